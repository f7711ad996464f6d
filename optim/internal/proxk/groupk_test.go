package proxk

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/optim/internal/opttest"
)

func TestGroupKernelsMatchGo(t *testing.T) {
	if !HaveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	defer impl.Reset("optim")
	rng := rand.New(rand.NewPCG(51, 52))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-20, 1e20, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, n := range []int{1, 7, 8, 9, 16, 27, 64, 576, 4608 + 3} {
		z := make([]float32, n)
		eta := make([]float32, n)
		for i := range z {
			z[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-4, 10))
			if rng.IntN(10) == 0 {
				z[i] = special[rng.IntN(len(special))]
			}
			eta[i] = float32(opttest.LogU(rng, 1e-8, 1e3))
			if rng.IntN(50) == 0 {
				eta[i] = float32(math.Abs(float64(special[rng.IntN(len(special))]))) + math.SmallestNonzeroFloat32
			}
		}
		type out struct {
			sums32            [5]float64
			ok32              bool
			sums              [5]float64
			newton            [2]float64
			first, rho        []float32
			inPlace, inPlace2 []float32
			acc               [4][]float32
			vec, vecInPlace   []float32
		}
		run := func(asm bool) out {
			selectAsm(asm)
			var o out
			o.sums[0], o.sums[1], o.sums[2], o.sums[3], o.sums[4] = GroupSums(z, eta)
			o.newton[0], o.newton[1] = NewtonSums(z, eta, 0.3, 5e-3)
			o.sums32[0], o.sums32[1], o.sums32[2], o.sums32[3], o.sums32[4], o.ok32 = GroupSums32(z, eta)
			o.first = make([]float32, n)
			o.inPlace2 = append([]float32(nil), z...)
			ScaleFirstOrder(o.first, z, eta, 3e-4)
			ScaleFirstOrder(o.inPlace2, o.inPlace2, eta, 1e-7)
			o.rho = make([]float32, n)
			ScaleRho(o.rho, z, eta, 0.37, 2e-3)
			o.inPlace = append([]float32(nil), z...)
			ScaleRho(o.inPlace, o.inPlace, eta, 1.5, 1e-5)
			// Two accumulations onto random starting sums and bounds.
			arng := rand.New(rand.NewPCG(uint64(n), 9))
			for k := range o.acc {
				o.acc[k] = make([]float32, n)
				for i := range o.acc[k] {
					o.acc[k][i] = float32(opttest.LogU(arng, 1e-8, 1e3))
				}
			}
			AccumSums32(z, eta, o.acc[0], o.acc[1], o.acc[2], o.acc[3])
			AccumSums32(eta, z, o.acc[0], o.acc[1], o.acc[2], o.acc[3])
			c := make([]float32, n)
			for i := range c {
				c[i] = float32(opttest.LogU(arng, 1e-9, 1e-3))
			}
			o.vec = make([]float32, n)
			ScaleFirstOrderVec(o.vec, z, eta, c)
			o.vecInPlace = append([]float32(nil), z...)
			ScaleFirstOrderVec(o.vecInPlace, o.vecInPlace, eta, c)
			return o
		}
		a, g := run(true), run(false)
		for i := range a.sums {
			if math.Float64bits(a.sums[i]) != math.Float64bits(g.sums[i]) {
				t.Fatalf("n = %d: GroupSums result %d: AVX2 %g, Go %g", n, i, a.sums[i], g.sums[i])
			}
		}
		for i := range a.newton {
			if math.Float64bits(a.newton[i]) != math.Float64bits(g.newton[i]) {
				t.Fatalf("n = %d: NewtonSums result %d: AVX2 %g, Go %g", n, i, a.newton[i], g.newton[i])
			}
		}
		for i := range a.sums32 {
			if math.Float64bits(a.sums32[i]) != math.Float64bits(g.sums32[i]) || a.ok32 != g.ok32 {
				t.Fatalf("n = %d: GroupSums32 result %d: AVX2 %g, Go %g", n, i, a.sums32[i], g.sums32[i])
			}
		}
		for name, pair := range map[string][2][]float32{"ScaleFirstOrder": {a.first, g.first}, "ScaleRho": {a.rho, g.rho}, "ScaleRho in place": {a.inPlace, g.inPlace}, "ScaleFirstOrder in place": {a.inPlace2, g.inPlace2},
			"AccumSums32 z²": {a.acc[0], g.acc[0]}, "AccumSums32 z²η": {a.acc[1], g.acc[1]}, "AccumSums32 min": {a.acc[2], g.acc[2]}, "AccumSums32 max": {a.acc[3], g.acc[3]},
			"ScaleFirstOrderVec": {a.vec, g.vec}, "ScaleFirstOrderVec in place": {a.vecInPlace, g.vecInPlace}} {
			for i := range pair[0] {
				if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
					t.Fatalf("n = %d: %s element %d: AVX2 %g, Go %g", n, name, i, pair[0][i], pair[1][i])
				}
			}
		}
	}
}

func TestGroupSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	for _, n := range []int{1, 5, 8, 13, 100, 4608, 100000} {
		z, eta := make([]float32, n), make([]float32, n)
		var w2, we, we2 float64
		wlo, whi := math.Inf(1), 0.0
		for i := range z {
			z[i] = float32(rng.NormFloat64())
			eta[i] = float32(0.1 + rng.Float64())
			a := float64(z[i]) * float64(z[i])
			w2 += a
			we += a * float64(eta[i])
			we2 += a * float64(eta[i]) * float64(eta[i])
			wlo, whi = math.Min(wlo, float64(eta[i])), math.Max(whi, float64(eta[i]))
		}
		z2, ze, ze2, lo, hi := GroupSums(z, eta)
		if tol64 := float64(n) * 0x1p-52; !opttest.Near(z2, w2, tol64, 0) || !opttest.Near(ze, we, tol64, 0) || !opttest.Near(ze2, we2, tol64, 0) || lo != wlo || hi != whi {
			t.Fatalf("n = %d: GroupSums = %g %g %g %g, want %g %g %g %g", n, z2, ze, lo, hi, w2, we, wlo, whi)
		}
		// The float32 sums stay within their error bound.
		z2, ze, lo, hi, tol, ok := GroupSums32(z, eta)
		if !ok || !opttest.Near(z2, w2, tol, 0) || !opttest.Near(ze, we, tol, 0) || lo != wlo || hi != whi {
			t.Fatalf("n = %d: GroupSums32 = %g %g %g %g (tol %g, ok %v), want %g %g %g %g", n, z2, ze, lo, hi, tol, ok, w2, we, wlo, whi)
		}
	}
}

// selectAsm enables the assembly kernels of the optimizers (implementation
// group "optim", as at start-up) or only the Go loops.
func selectAsm(asm bool) {
	if asm {
		impl.Reset("optim")
	} else {
		impl.Select("optim", impl.Generic)
	}
}
