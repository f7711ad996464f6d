package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tensor is one named array of a safetensors file: its element type, its
// shape and its elements as raw little-endian bytes in row-major order.
// A valid Tensor has len(Data) == Numel() * DType.Size(); a rank-0 tensor
// (empty Shape) holds one element.
type Tensor struct {
	DType DType  // element type
	Shape []int  // dimensions, outermost first; empty for a scalar
	Data  []byte // elements, little-endian, row-major
}

// Numel returns the number of elements the shape describes (1 for a
// rank-0 tensor), or -1 if a dimension is negative or the product
// overflows an int.
func (t Tensor) Numel() int { return numel(t.Shape) }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt/d {
			return -1
		}
		n *= d
	}
	return n
}

// validate reports what is wrong with t, if anything.
func (t Tensor) validate() error {
	size := t.DType.Size()
	if size == 0 {
		return fmt.Errorf("unknown dtype %q", string(t.DType))
	}
	n := t.Numel()
	if n < 0 || n > math.MaxInt/size {
		return fmt.Errorf("invalid shape %v", t.Shape)
	}
	if len(t.Data) != n*size {
		return fmt.Errorf("shape %v of %s needs %d bytes, Data has %d", t.Shape, t.DType, n*size, len(t.Data))
	}
	return nil
}

// Float32 returns the elements of t converted to float32. It accepts the
// floating-point types F64, F32, F16, BF16, F8_E5M2 and F8_E4M3 (F64 values
// are rounded to nearest, the others convert exactly) and the integer
// types and BOOL (integers beyond 2^24 in magnitude are rounded). It returns
// an error for C64 and for a Tensor whose Data does not match its shape.
func (t Tensor) Float32() ([]float32, error) {
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("safetensors: Float32: %w", err)
	}
	n := t.Numel()
	out := make([]float32, n)
	b := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case F16:
		for i := range out {
			out[i] = f16ToF32(le.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = bf16ToF32(le.Uint16(b[2*i:]))
		}
	case F8E5M2:
		for i := range out {
			out[i] = f8e5m2ToF32(b[i])
		}
	case F8E4M3:
		for i := range out {
			out[i] = f8e4m3ToF32(b[i])
		}
	default:
		if !t.DType.isInt() {
			return nil, fmt.Errorf("safetensors: Float32: cannot convert %s elements to float32", t.DType)
		}
		for i := range out {
			v, err := t.intAt(i)
			if err != nil {
				return nil, fmt.Errorf("safetensors: Float32: %w", err)
			}
			out[i] = float32(v)
		}
	}
	return out, nil
}

// Float64 returns the elements of t converted to float64. It accepts the
// same types as Float32; every conversion except from I64 and U64 beyond
// 2^53 in magnitude is exact.
func (t Tensor) Float64() ([]float64, error) {
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("safetensors: Float64: %w", err)
	}
	out := make([]float64, t.Numel())
	switch {
	case t.DType == F64:
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case t.DType.isFloat():
		f, err := t.Float32()
		if err != nil {
			return nil, err
		}
		for i, v := range f {
			out[i] = float64(v)
		}
	case t.DType == U64:
		for i := range out {
			out[i] = float64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case t.DType.isInt():
		for i := range out {
			v, err := t.intAt(i)
			if err != nil {
				return nil, fmt.Errorf("safetensors: Float64: %w", err)
			}
			out[i] = float64(v)
		}
	default:
		return nil, fmt.Errorf("safetensors: Float64: cannot convert %s elements to float64", t.DType)
	}
	return out, nil
}

// Int64 returns the elements of t converted to int64. It accepts the
// integer types and BOOL (whose bytes must be 0 or 1), and returns an error
// for floating-point types and for U64 values above math.MaxInt64.
func (t Tensor) Int64() ([]int64, error) {
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("safetensors: Int64: %w", err)
	}
	if !t.DType.isInt() {
		return nil, fmt.Errorf("safetensors: Int64: cannot convert %s elements to int64", t.DType)
	}
	out := make([]int64, t.Numel())
	for i := range out {
		v, err := t.intAt(i)
		if err != nil {
			return nil, fmt.Errorf("safetensors: Int64: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// intAt returns element i of an integer or BOOL tensor whose Data has been
// validated.
func (t Tensor) intAt(i int) (int64, error) {
	b := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case BOOL:
		if b[i] > 1 {
			return 0, fmt.Errorf("BOOL element %d has byte value %d, want 0 or 1", i, b[i])
		}
		return int64(b[i]), nil
	case U8:
		return int64(b[i]), nil
	case I8:
		return int64(int8(b[i])), nil
	case I16:
		return int64(int16(le.Uint16(b[2*i:]))), nil
	case U16:
		return int64(le.Uint16(b[2*i:])), nil
	case I32:
		return int64(int32(le.Uint32(b[4*i:]))), nil
	case U32:
		return int64(le.Uint32(b[4*i:])), nil
	case I64:
		return int64(le.Uint64(b[8*i:])), nil
	case U64:
		v := le.Uint64(b[8*i:])
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("U64 element %d = %d overflows int64", i, v)
		}
		return int64(v), nil
	}
	return 0, fmt.Errorf("%s is not an integer type", t.DType)
}

// checkLen panics if data cannot fill shape; a mismatch is a programming error.
func checkLen(fn string, shape []int, n int) {
	if want := numel(shape); want < 0 || want != n {
		panic(fmt.Sprintf("safetensors.%s: shape %v needs %d elements, got %d", fn, shape, want, n))
	}
}

// FromFloat32 returns an F32 tensor of the given shape holding a copy of
// data. It panics if len(data) does not match the shape.
func FromFloat32(shape []int, data []float32) Tensor {
	checkLen("FromFloat32", shape, len(data))
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return Tensor{DType: F32, Shape: append([]int{}, shape...), Data: b}
}

// FromFloat32As returns a tensor of the given floating-point dtype (F32,
// F16, BF16 or F64) and shape holding data converted to that type, F16 and
// BF16 with round-to-nearest-even. It panics if len(data) does not match the
// shape, and returns an error for any other dtype.
func FromFloat32As(dtype DType, shape []int, data []float32) (Tensor, error) {
	checkLen("FromFloat32As", shape, len(data))
	le := binary.LittleEndian
	b := make([]byte, dtype.Size()*len(data))
	switch dtype {
	case F32:
		return FromFloat32(shape, data), nil
	case F64:
		for i, v := range data {
			le.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
	case F16:
		for i, v := range data {
			le.PutUint16(b[2*i:], f32ToF16(v))
		}
	case BF16:
		for i, v := range data {
			le.PutUint16(b[2*i:], f32ToBF16(v))
		}
	default:
		return Tensor{}, fmt.Errorf("safetensors: FromFloat32As: cannot store float32 data as %q", string(dtype))
	}
	return Tensor{DType: dtype, Shape: append([]int{}, shape...), Data: b}, nil
}

// FromFloat64 returns an F64 tensor of the given shape holding a copy of
// data. It panics if len(data) does not match the shape.
func FromFloat64(shape []int, data []float64) Tensor {
	checkLen("FromFloat64", shape, len(data))
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return Tensor{DType: F64, Shape: append([]int{}, shape...), Data: b}
}

// FromInt64 returns an I64 tensor of the given shape holding a copy of data.
// It panics if len(data) does not match the shape.
func FromInt64(shape []int, data []int64) Tensor {
	checkLen("FromInt64", shape, len(data))
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return Tensor{DType: I64, Shape: append([]int{}, shape...), Data: b}
}
