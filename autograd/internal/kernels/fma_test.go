package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestFMA32 checks fma32 against an exactly rounded a·b+c, on random
// values and on sums built to fall on float32 halfway points.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	for i := 0; i < 200000; i++ {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		var c float32
		switch i % 3 {
		case 0:
			c = float32(rng.NormFloat64())
		case 1:
			// c cancels a·b's leading bits: its rounding bits matter.
			c = -float32(float64(a) * float64(b))
			c = math.Float32frombits(math.Float32bits(c) + uint32(rng.IntN(5)) - 2)
		case 2:
			// a·b + c near a float32 halfway point with tiny excess.
			c = float32(rng.NormFloat64()) * 1e4
		}
		if got, want := FMA32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}
