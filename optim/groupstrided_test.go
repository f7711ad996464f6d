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

// TestGroupKernelsMatchGo checks that the AVX2 group kernels give
// bit-identical results to the Go loops, for lengths around the 8-lane
// boundaries, values over the float32 range and dst aliasing z.
// TestGroupSums checks the sums against a float64 reference, the float32
// sums within their error bound.
// TestStridedStepMatchesGo checks that ProxGen-Adam steps with
// input-channel groups (stridedPass.run: the Adam kernel, the per-position
// sums and the scaling of rows of groups) give the same bits with the AVX2
// kernels as with the Go loops.
func TestStridedStepMatchesGo(t *testing.T) {
	if !proxk.HaveAVX2 {
		t.Skip("no AVX2 on this machine (or built with purego)")
	}
	defer impl.Reset("optim")
	for _, reg := range []prox.GroupRegularizer{prox.GroupL0(prox.ByInputChannel), prox.GroupLasso(prox.ByInputChannel), prox.GroupHalf(prox.ByInputChannel)} {
		for _, lam := range []float64{1e-5, 0.3} {
			run := func(asm bool) [][]float32 {
				selectAsm(asm)
				rng := rand.New(rand.NewPCG(71, 72))
				var ps []*autograd.Tensor
				for _, sh := range [][]int{{70, 40, 3, 3}, {5, 1003}, {3, 600, 1, 1}} {
					p := autograd.RandN(rng, sh...)
					for i := range p.Data {
						p.Data[i] *= float32(opttest.LogU(rng, 1e-3, 1))
					}
					p.Grad = make([]float32, p.Numel())
					ps = append(ps, p)
				}
				o := New([]*Group{{Params: ps, Reg: reg, Lambda: lam, LR: 1e-2}}, ProxGenAdam(0.9, 0.999, 1e-8))
				for range 3 {
					for _, p := range ps {
						for i := range p.Grad {
							p.Grad[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-4, 1))
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
