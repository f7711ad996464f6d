package kernels

import "math"

// FMA32 returns a·b+c rounded once to float32, as VFMADD231PS does, for
// results in float32's normal range: a·b is exact in float64, and the
// float64 sum is nudged off a float32 halfway point by its rounding error
// so that the second rounding goes the way the exact sum would.
func FMA32(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	bb := s - p
	e := (p - (s - bb)) + (cc - bb) // s + e = p + cc exactly
	if e != 0 {
		if bits := math.Float64bits(s); bits&(1<<29-1) == 1<<28 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}
