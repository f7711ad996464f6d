package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAVX2MatchesGo checks that the AVX2 prox kernels give bit-identical
// results to the Go loops, for lengths around the 8-lane and chunk
// boundaries, extreme values that take the float64 path, and dst
// aliasing z.
func TestAVX2MatchesGo(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-20, 1e-13, 1e13, -1e20, math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, n := range []int{1, 7, 8, 9, 16, 24, 64, chunkSize + 13, chunkSize + 8, 2*chunkSize + 8} {
		z := make([]float32, n)
		eta := make([]float32, n)
		for i := range z {
			switch rng.IntN(10) {
			case 0:
				z[i] = special[rng.IntN(len(special))]
			default:
				z[i] = float32(rng.NormFloat64() * logU(rng, 1e-4, 10))
			}
			eta[i] = float32(logU(rng, 1e-6, 1e3))
			if rng.IntN(50) == 0 {
				eta[i] = special[rng.IntN(len(special))]
				if eta[i] < 0 {
					eta[i] = -eta[i]
				}
			}
		}
		for _, reg := range []Regularizer{L0(), L1(), Lq(0.5)} {
			for _, lam := range []float32{1e-7, 1e-3, 0.3, 50} {
				want := make([]float32, n)
				haveAVX2 = false
				reg.Prox(want, z, eta, lam)
				haveAVX2 = true
				got := make([]float32, n)
				reg.Prox(got, z, eta, lam)
				alias := append([]float32(nil), z...)
				reg.Prox(alias, alias, eta, lam)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(alias[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v n=%d lambda=%g i=%d z=%g eta=%g: avx2 %g (aliased %g), go %g", reg, n, lam, i, z[i], eta[i], got[i], alias[i], want[i])
					}
				}
			}
		}
	}
}
