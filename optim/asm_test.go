package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/optim/internal/opttest"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
)

// TestAVX2MatchesGo checks that the AVX2 prox kernels give bit-identical
// results to the Go loops, for lengths around the 8-lane and chunk
// boundaries, extreme values that take the float64 path, and dst
// aliasing z.
func TestAVX2MatchesGo(t *testing.T) {
	if !proxk.HaveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-20, 1e-13, 1e13, -1e20, math.MaxFloat32, math.SmallestNonzeroFloat32}
	for _, n := range []int{1, 7, 8, 9, 16, 24, 64, proxk.ChunkSize + 13, proxk.ChunkSize + 8, 2*proxk.ChunkSize + 8} {
		z := make([]float32, n)
		eta := make([]float32, n)
		for i := range z {
			switch rng.IntN(10) {
			case 0:
				z[i] = special[rng.IntN(len(special))]
			default:
				z[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-4, 10))
			}
			eta[i] = float32(opttest.LogU(rng, 1e-6, 1e3))
			if rng.IntN(50) == 0 {
				eta[i] = special[rng.IntN(len(special))]
				if eta[i] < 0 {
					eta[i] = -eta[i]
				}
			}
		}
		for _, reg := range []prox.Regularizer{prox.L0(), prox.L1(), prox.Lq(0.5)} {
			for _, lam := range []float32{1e-7, 1e-3, 0.3, 50} {
				want := make([]float32, n)
				impl.Select("optim", impl.Generic)
				reg.Prox(want, z, eta, lam)
				impl.Reset("optim")
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

// TestAVX2StepMatchesGo checks that optimizer steps through the AVX2 (or,
// on arm64, NEON) Adam kernels (alone, followed by a prox, or with the ℓ1/2 prox fused) give
// the same bits as the Go loops, on parameters whose lengths straddle the
// 8-lane and chunk boundaries and whose values send some ℓ1/2 lanes to
// the float64 path.
func TestAVX2StepMatchesGo(t *testing.T) {
	if !proxk.HaveAVX2 && !haveNEON {
		t.Skip("no AVX2 or NEON kernels on this machine (or built with purego)")
	}
	defer impl.Reset("optim")
	sizes := []int{1, 7, 8, 13, 64, proxk.ChunkSize + 13, 2*proxk.ChunkSize + 8}
	special := []float32{0, 1e-13, -1e-20, 1e13, 3e-4, -2e-6}
	mk := func() []*autograd.Tensor {
		rng := rand.New(rand.NewPCG(41, 42))
		var ps []*autograd.Tensor
		for _, n := range sizes {
			p := autograd.New(n, 1)
			p.Grad = make([]float32, n)
			for i := range p.Data {
				p.Data[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-4, 1))
				p.Grad[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-6, 1e-1))
				if rng.IntN(20) == 0 {
					p.Data[i] = special[rng.IntN(len(special))]
				}
				if rng.IntN(20) == 0 {
					p.Grad[i] = special[rng.IntN(len(special))]
				}
			}
			ps = append(ps, p)
		}
		return ps
	}
	noBC := ProxGenAdam(0.9, 0.999, 1e-8)
	noBC.Precond = AdamPrecond{Beta: 0.999, Delta: 1e-8}
	for _, c := range []struct {
		name string
		cfg  Config
		reg  prox.Regularizer
		wd   float64
	}{
		{"adam", AdamConfig(0.9, 0.999, 1e-8), nil, 0},
		{"adamw", AdamWConfig(0.9, 0.999, 1e-8), nil, 0.01},
		{"l1/2", ProxGenAdam(0.9, 0.999, 1e-8), prox.Lq(0.5), 0},
		{"l1/2-w", ProxGenAdam(0.9, 0.999, 1e-8), prox.Lq(0.5), 0.01},
		{"l1/2-nobc", noBC, prox.Lq(0.5), 0},
		{"l1", ProxGenAdam(0.9, 0.999, 1e-8), prox.L1(), 0},
		{"l0", ProxGenAdam(0.9, 0.999, 1e-8), prox.L0(), 0},
		{"l2/3", ProxGenAdam(0.9, 0.999, 1e-8), prox.Lq(2.0 / 3), 0},
	} {
		for _, lam := range []float64{1e-6, 1e-2, 1e-32} {
			run := func(asm bool) []*autograd.Tensor {
				selectAsm(asm)
				ps := mk()
				o := New([]*Group{{Params: ps, Reg: c.reg, Lambda: lam, WeightDecay: c.wd, LR: 1e-3}}, c.cfg)
				for range 3 {
					o.Step()
				}
				st := o.State()
				for _, sl := range o.slots {
					ps = append(ps, autograd.FromSlice(st.Tensors[sl.name+".m"], sl.n), autograd.FromSlice(st.Tensors[sl.name+".v"], sl.n))
				}
				return ps
			}
			want, got := run(false), run(true)
			for j := range want {
				for i := range want[j].Data {
					if math.Float32bits(got[j].Data[i]) != math.Float32bits(want[j].Data[i]) {
						t.Fatalf("%s lambda=%g tensor %d [%d]: asm %g, go %g", c.name, lam, j, i, got[j].Data[i], want[j].Data[i])
					}
				}
			}
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
