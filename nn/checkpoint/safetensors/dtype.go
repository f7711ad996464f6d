package safetensors

import "math"

// DType names the element type of a tensor as the safetensors header spells it.
type DType string

// The element types this package knows. Every one of them can be read,
// written and carried through unchanged; the conversion methods of Tensor
// say which of them they accept.
const (
	BOOL    DType = "BOOL"    // one byte, 0 or 1
	U8      DType = "U8"      // uint8
	I8      DType = "I8"      // int8
	F8E5M2  DType = "F8_E5M2" // float8, 5-bit exponent, 2-bit mantissa (with infinities)
	F8E4M3  DType = "F8_E4M3" // float8, 4-bit exponent, 3-bit mantissa (finite, NaN only at 0x7F and 0xFF)
	I16     DType = "I16"     // int16
	U16     DType = "U16"     // uint16
	F16     DType = "F16"     // IEEE 754 binary16
	BF16    DType = "BF16"    // bfloat16: the upper half of a binary32
	I32     DType = "I32"     // int32
	U32     DType = "U32"     // uint32
	F32     DType = "F32"     // IEEE 754 binary32
	F64     DType = "F64"     // IEEE 754 binary64
	I64     DType = "I64"     // int64
	U64     DType = "U64"     // uint64
	C64     DType = "C64"     // complex64: two binary32 values (real, imaginary)
	unknown DType = ""
)

// Size returns the number of bytes of one element of type d, or 0 if d is
// not a type this package knows.
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E5M2, F8E4M3:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64, C64:
		return 8
	}
	return 0
}

// isFloat reports whether d is a real floating-point type.
func (d DType) isFloat() bool {
	switch d {
	case F8E5M2, F8E4M3, F16, BF16, F32, F64:
		return true
	}
	return false
}

// isInt reports whether d is an integer type or BOOL.
func (d DType) isInt() bool {
	switch d {
	case BOOL, U8, I8, I16, U16, I32, U32, I64, U64:
		return true
	}
	return false
}

// f16ToF32 converts an IEEE 754 binary16 value to binary32 exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // infinity or NaN; the payload is kept
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant * 2^-24. Normalise it.
		e := uint32(127 - 14)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// f32ToF16 converts a binary32 value to binary16, rounding to nearest with
// ties to even; values too large become infinities and NaNs stay NaNs.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13) // quiet NaN, payload kept where it fits
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to infinity
	}
	return sign | uint16(h)
}

// bf16ToF32 converts a bfloat16 value to binary32 exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 converts a binary32 value to bfloat16, rounding to nearest with
// ties to even; NaNs stay NaNs.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// f8e5m2ToF32 converts a float8 E5M2 value (the upper byte of a binary16)
// to binary32 exactly.
func f8e5m2ToF32(x byte) float32 { return f16ToF32(uint16(x) << 8) }

// f8e4m3ToF32 converts a float8 E4M3FN value (bias 7, no infinities,
// S.1111.111 is NaN) to binary32 exactly.
func f8e4m3ToF32(x byte) float32 {
	neg := x&0x80 != 0
	exp := int(x>>3) & 0xf
	mant := float64(x & 7)
	var v float64
	switch {
	case exp == 0xf && mant == 7:
		return float32(math.NaN())
	case exp == 0:
		v = math.Ldexp(mant, -9)
	default:
		v = math.Ldexp(8+mant, exp-10)
	}
	if neg {
		v = -v
	}
	return float32(v)
}
