package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/impl"
)

// TestGroupKernelsMatchGo checks that the AVX2 group kernels give
// bit-identical results to the Go loops, for lengths around the 8-lane
// boundaries, values over the float32 range and dst aliasing z.
func TestGroupKernelsMatchGo(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	defer impl.Reset("optim")
	rng := rand.New(rand.NewPCG(51, 52))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-20, 1e20, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, n := range []int{1, 7, 8, 9, 16, 27, 64, 576, 4608 + 3} {
		z := make([]float32, n)
		eta := make([]float32, n)
		for i := range z {
			z[i] = float32(rng.NormFloat64() * logU(rng, 1e-4, 10))
			if rng.IntN(10) == 0 {
				z[i] = special[rng.IntN(len(special))]
			}
			eta[i] = float32(logU(rng, 1e-8, 1e3))
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
			o.sums[0], o.sums[1], o.sums[2], o.sums[3], o.sums[4] = groupSums(z, eta)
			o.newton[0], o.newton[1] = newtonSums(z, eta, 0.3, 5e-3)
			o.sums32[0], o.sums32[1], o.sums32[2], o.sums32[3], o.sums32[4], o.ok32 = groupSums32(z, eta)
			o.first = make([]float32, n)
			o.inPlace2 = append([]float32(nil), z...)
			scaleFirstOrder(o.first, z, eta, 3e-4)
			scaleFirstOrder(o.inPlace2, o.inPlace2, eta, 1e-7)
			o.rho = make([]float32, n)
			scaleRho(o.rho, z, eta, 0.37, 2e-3)
			o.inPlace = append([]float32(nil), z...)
			scaleRho(o.inPlace, o.inPlace, eta, 1.5, 1e-5)
			// Two accumulations onto random starting sums and bounds.
			arng := rand.New(rand.NewPCG(uint64(n), 9))
			for k := range o.acc {
				o.acc[k] = make([]float32, n)
				for i := range o.acc[k] {
					o.acc[k][i] = float32(logU(arng, 1e-8, 1e3))
				}
			}
			accumSums32(z, eta, o.acc[0], o.acc[1], o.acc[2], o.acc[3])
			accumSums32(eta, z, o.acc[0], o.acc[1], o.acc[2], o.acc[3])
			c := make([]float32, n)
			for i := range c {
				c[i] = float32(logU(arng, 1e-9, 1e-3))
			}
			o.vec = make([]float32, n)
			scaleFirstOrderVec(o.vec, z, eta, c)
			o.vecInPlace = append([]float32(nil), z...)
			scaleFirstOrderVec(o.vecInPlace, o.vecInPlace, eta, c)
			return o
		}
		a, g := run(true), run(false)
		for i := range a.sums {
			if math.Float64bits(a.sums[i]) != math.Float64bits(g.sums[i]) {
				t.Fatalf("n = %d: groupSums result %d: AVX2 %g, Go %g", n, i, a.sums[i], g.sums[i])
			}
		}
		for i := range a.newton {
			if math.Float64bits(a.newton[i]) != math.Float64bits(g.newton[i]) {
				t.Fatalf("n = %d: newtonSums result %d: AVX2 %g, Go %g", n, i, a.newton[i], g.newton[i])
			}
		}
		for i := range a.sums32 {
			if math.Float64bits(a.sums32[i]) != math.Float64bits(g.sums32[i]) || a.ok32 != g.ok32 {
				t.Fatalf("n = %d: groupSums32 result %d: AVX2 %g, Go %g", n, i, a.sums32[i], g.sums32[i])
			}
		}
		for name, pair := range map[string][2][]float32{"scaleFirstOrder": {a.first, g.first}, "scaleRho": {a.rho, g.rho}, "scaleRho in place": {a.inPlace, g.inPlace}, "scaleFirstOrder in place": {a.inPlace2, g.inPlace2},
			"accumSums32 z²": {a.acc[0], g.acc[0]}, "accumSums32 z²η": {a.acc[1], g.acc[1]}, "accumSums32 min": {a.acc[2], g.acc[2]}, "accumSums32 max": {a.acc[3], g.acc[3]},
			"scaleFirstOrderVec": {a.vec, g.vec}, "scaleFirstOrderVec in place": {a.vecInPlace, g.vecInPlace}} {
			for i := range pair[0] {
				if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
					t.Fatalf("n = %d: %s element %d: AVX2 %g, Go %g", n, name, i, pair[0][i], pair[1][i])
				}
			}
		}
	}
}

// TestGroupSums checks the sums against a float64 reference, the float32
// sums within their error bound.
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
		z2, ze, ze2, lo, hi := groupSums(z, eta)
		if tol64 := float64(n) * 0x1p-52; !near(z2, w2, tol64, 0) || !near(ze, we, tol64, 0) || !near(ze2, we2, tol64, 0) || lo != wlo || hi != whi {
			t.Fatalf("n = %d: groupSums = %g %g %g %g, want %g %g %g %g", n, z2, ze, lo, hi, w2, we, wlo, whi)
		}
		// The float32 sums stay within their error bound.
		z2, ze, lo, hi, tol, ok := groupSums32(z, eta)
		if !ok || !near(z2, w2, tol, 0) || !near(ze, we, tol, 0) || lo != wlo || hi != whi {
			t.Fatalf("n = %d: groupSums32 = %g %g %g %g (tol %g, ok %v), want %g %g %g %g", n, z2, ze, lo, hi, tol, ok, w2, we, wlo, whi)
		}
	}
}

// TestStridedStepMatchesGo checks that ProxGen-Adam steps with
// input-channel groups (stridedPass.run: the Adam kernel, the per-position
// sums and the scaling of rows of groups) give the same bits with the AVX2
// kernels as with the Go loops.
func TestStridedStepMatchesGo(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	defer impl.Reset("optim")
	for _, reg := range []GroupRegularizer{GroupL0(ByInputChannel), GroupLasso(ByInputChannel)} {
		for _, lam := range []float64{1e-5, 0.3} {
			run := func(asm bool) [][]float32 {
				selectAsm(asm)
				rng := rand.New(rand.NewPCG(71, 72))
				var ps []*autograd.Tensor
				for _, sh := range [][]int{{70, 40, 3, 3}, {5, 1003}, {3, 600, 1, 1}} {
					p := autograd.RandN(rng, sh...)
					for i := range p.Data {
						p.Data[i] *= float32(logU(rng, 1e-3, 1))
					}
					p.Grad = make([]float32, p.Numel())
					ps = append(ps, p)
				}
				o := New([]*Group{{Params: ps, Reg: reg, Lambda: lam, LR: 1e-2}}, ProxGenAdam(0.9, 0.999, 1e-8))
				for range 3 {
					for _, p := range ps {
						for i := range p.Grad {
							p.Grad[i] = float32(rng.NormFloat64() * logU(rng, 1e-4, 1))
						}
					}
					o.Step()
				}
				var out [][]float32
				st := o.State()
				for i, sl := range o.slots {
					out = append(out, ps[i].Data, st.Tensors[sl.name+".m"], st.Tensors[sl.name+".v"])
				}
				return out
			}
			want, got := run(false), run(true)
			for j := range want {
				for i := range want[j] {
					if math.Float32bits(got[j][i]) != math.Float32bits(want[j][i]) {
						t.Fatalf("%v λ=%g vector %d [%d]: asm %g, go %g", reg, lam, j, i, got[j][i], want[j][i])
					}
				}
			}
		}
	}
}
