package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim/internal/opttest"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
)

// groupObjective returns F(x) = Σ_i (x_i − z_i)²/(2η_i) + λ·r(x) in float64.
// istaGroupLasso minimises the group-lasso objective by proximal gradient
// descent in float64 with step min η (the objective is strongly convex, so
// it converges linearly): an independent reference for the Newton solve.
// groupCase is one random group problem; near-threshold cases put λ within
// a relative 1e-1…1e-6 of the value at which the map switches to zero.
// randomGroupCases draws n problems with η spread over a factor etaSpread.
// TestGroupLassoMatchesISTA compares the group-lasso map with a float64
// proximal-gradient solve of the same problem and checks the KKT
// conditions of its result.
// TestGroupLassoKKT checks stationarity, (x_i − z_i)/η_i + λx_i/‖x‖ = 0,
// for metrics spread over ten decades, where ISTA would be too slow.
// TestGroupLassoUniformMetric: with a constant η the map is block soft
// thresholding z·max(0, 1 − λη/‖z‖).
// TestGroupProxMatchesGridSearch compares both group maps on groups of two
// coordinates with a brute-force minimisation of the objective over a grid
// (refined around its best point), including λ near the thresholds.
// TestGroupL0Rule checks the keep-or-zero rule and its tie convention.
// TestGroupLayouts checks which coordinates form a group for each GroupBy.
// TestGroupProxInOptimizer checks that ProxGen applies the group map to
// whole groups of the stepped tensor: one step of ProxGen-Adam with group
// lasso equals the Adam step followed by the map on each group, for both
// groupings, and whole groups become exactly zero.
func TestGroupProxInOptimizer(t *testing.T) {
	for _, by := range []prox.GroupBy{prox.ByFilter, prox.ByInputChannel, prox.ByBlock} {
		t.Run(by.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, 32))
			shape := []int{8, 5, 3, 3}
			if by == prox.ByBlock {
				shape = []int{24, 5, 3, 3} // a block of 16 channels and a last one of 8
			}
			p := autograd.RandN(rng, shape...)
			p.Grad = make([]float32, p.Numel())
			for i := range p.Grad {
				p.Grad[i] = float32(rng.NormFloat64()) * float32(1+i%7)
			}
			q := autograd.FromSlice(append([]float32(nil), p.Data...), shape...)
			q.Grad = append([]float32(nil), p.Grad...)
			const lr = 0.5
			reg := prox.GroupLasso(by)
			// Reference: the same Adam step without a regularizer, then the
			// map per group with η = α/(|g| + δ) (first Adam step: m̂ = g,
			// sqrt(v̂) = |g|), λ between the two middle thresholds ‖z_g/η_g‖
			// of the groups, so that about half the groups are zeroed.
			New([]*Group{{Params: []*autograd.Tensor{q}, LR: lr}}, ProxGenAdam(0.9, 0.999, 1e-8)).Step()
			eta := make([]float32, q.Numel())
			for i, g := range q.Grad {
				eta[i] = lr * (1 / (float32(math.Abs(float64(g))) + 1e-8))
			}
			l := proxk.LayoutOf(int(by), shape)
			zg, eg := make([]float32, l.Size), make([]float32, l.Size)
			var ths []float64
			for g := range l.Count {
				l.Gather(zg, q.Data, g)
				l.Gather(eg, eta, g)
				l.PadLike(eg, g)
				for i := range zg {
					zg[i] /= eg[i]
				}
				ths = append(ths, proxk.Norm2(zg))
			}
			slices.Sort(ths)
			k := len(ths) / 2
			lam := float32((ths[k-1] + ths[k]) / 2)
			for g := range l.Count {
				l.Gather(zg, q.Data, g)
				l.Gather(eg, eta, g)
				l.PadLike(eg, g)
				reg.Prox(zg, zg, eg, lam)
				l.Scatter(q.Data, zg, g)
			}
			New([]*Group{{Params: []*autograd.Tensor{p}, Reg: reg, Lambda: float64(lam), LR: lr}}, ProxGenAdam(0.9, 0.999, 1e-8)).Step()
			// The fused Adam kernel rounds η differently from the formula
			// above by an ulp or two; zeros must agree exactly.
			for i := range p.Data {
				if (p.Data[i] == 0) != (q.Data[i] == 0) || !opttest.Near(float64(p.Data[i]), float64(q.Data[i]), 1e-5, 0) {
					t.Fatalf("element %d: optimizer %g, reference %g", i, p.Data[i], q.Data[i])
				}
			}
			nz, n := prox.GroupNonZero(by, p.Data, shape)
			if nz == 0 || nz == n {
				t.Fatalf("%d of %d groups non-zero: choose λ so that some but not all are zeroed", nz, n)
			}
		})
	}
}

// TestGroupSubgradientInOptimizer checks the subgradient baseline with
// group lasso: the gradient gains λθ_g/‖θ_g‖ per group.
func TestGroupSubgradientInOptimizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	shape := []int{4, 3, 2, 2}
	p := autograd.RandN(rng, shape...)
	q := autograd.FromSlice(append([]float32(nil), p.Data...), shape...)
	p.Grad = make([]float32, p.Numel())
	for i := range p.Grad {
		p.Grad[i] = float32(rng.NormFloat64())
	}
	q.Grad = append([]float32(nil), p.Grad...)
	const lam = 0.7
	l := proxk.LayoutOf(proxk.GroupInput, shape)
	tg, og := make([]float32, l.Size), make([]float32, l.Size)
	for g := range l.Count {
		l.Gather(tg, q.Data, g)
		n := proxk.Norm2(tg)
		for i := range og {
			og[i] = float32(lam / n * float64(tg[i]))
		}
		ga := make([]float32, l.Size)
		l.Gather(ga, q.Grad, g)
		for i := range ga {
			ga[i] += og[i]
		}
		l.Scatter(q.Grad, ga, g)
	}
	c := SGDConfig(0, false)
	c.RegMode = RegSubgradient
	New([]*Group{{Params: []*autograd.Tensor{p}, Reg: prox.GroupLasso(prox.ByInputChannel), Lambda: lam, LR: 0.1}}, c).Step()
	New([]*Group{{Params: []*autograd.Tensor{q}, LR: 0.1}}, SGDConfig(0, false)).Step()
	for i := range p.Data {
		if !opttest.Near(float64(p.Data[i]), float64(q.Data[i]), 1e-6, 1e-7) {
			t.Fatalf("element %d: %g vs %g", i, p.Data[i], q.Data[i])
		}
	}
}

// BenchmarkGroupProx measures the group maps in ns/element on VGG-16-like
// filters (4608 coordinates) with training-like inputs.
func BenchmarkGroupProx(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	shape := []int{64, 512, 3, 3}
	n := 64 * 512 * 9
	z := make([]float32, n)
	eta := make([]float32, n)
	for i := range z {
		z[i] = float32(0.05 * rng.NormFloat64())
		eta[i] = float32(1e-3 * (0.5 + rng.Float64()))
	}
	dst := make([]float32, n)
	for _, reg := range []prox.GroupRegularizer{prox.GroupL0(prox.ByFilter), prox.GroupLasso(prox.ByFilter), prox.GroupLasso(prox.ByInputChannel)} {
		ws := appendGroupWork(nil, 0, reg, shape)
		b.Run(fmt.Sprint(reg), func(b *testing.B) {
			for range b.N {
				copy(dst, z)
				for i := range ws {
					ws[i].prox(dst, eta, 0, 1e-4, 0, nil)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
		})
	}
}

// hiddenDecider hides the Decider of a group map, so that the
// optimizers gather its groups one by one instead of mapping them with
// stridedPass.run.
type hiddenDecider struct{ prox.GroupRegularizer }

// TestProxStridedMatchesGather checks the memory-order group prox of
// input-channel groups (stridedPass.run) against gathering each group and
// mapping it with Prox, over several ProxGen-Adam steps and λ from the
// first-order regime to one where many groups are zeroed or decided by the
// full map: the same groups are zero, the rest agree to the rounding of
// the sums in the first-order factor.
func TestProxStridedMatchesGather(t *testing.T) {
	for _, shape := range [][]int{{70, 40, 3, 3}, {50, 300}, {9, 20, 5, 5}, {3, 17, 1, 1}} {
		for _, reg := range []prox.GroupRegularizer{prox.GroupL0(prox.ByInputChannel), prox.GroupLasso(prox.ByInputChannel), prox.GroupHalf(prox.ByInputChannel)} {
			mixed := false
			for _, lam := range []float64{1e-5, 0.3, 3, 10} {
				name := fmt.Sprintf("%v/%v/%g", shape, reg, lam)
				rng := rand.New(rand.NewPCG(61, 62))
				p := autograd.RandN(rng, shape...)
				// Groups of sizes from 1 down to 1e-3, so that λ zeroes some.
				l := proxk.LayoutOf(proxk.GroupInput, shape)
				for i := range p.Data {
					p.Data[i] *= float32(math.Pow(1e-3, float64(i/l.Inner%l.Count)/float64(l.Count)))
				}
				q := autograd.FromSlice(append([]float32(nil), p.Data...), shape...)
				op := New([]*Group{{Params: []*autograd.Tensor{p}, Reg: reg, Lambda: lam, LR: 1e-2}}, ProxGenAdam(0.9, 0.999, 1e-8))
				oq := New([]*Group{{Params: []*autograd.Tensor{q}, Reg: hiddenDecider{reg}, Lambda: lam, LR: 1e-2}}, ProxGenAdam(0.9, 0.999, 1e-8))
				if !op.slots[0].strided || oq.slots[0].strided {
					t.Fatalf("%s: strided = %v and %v, want true and false", name, op.slots[0].strided, oq.slots[0].strided)
				}
				for step := range 4 {
					p.Grad = make([]float32, p.Numel())
					for i := range p.Grad {
						p.Grad[i] = float32(rng.NormFloat64() * 0.1 * float64(1+i%5))
					}
					q.Grad = p.Grad
					op.Step()
					oq.Step()
					for i := range p.Data {
						if (p.Data[i] == 0) != (q.Data[i] == 0) || !opttest.Near(float64(p.Data[i]), float64(q.Data[i]), 1e-6, 0) {
							t.Fatalf("%s, step %d, element %d: strided %g, gathered %g", name, step, i, p.Data[i], q.Data[i])
						}
					}
				}
				nz, n := prox.GroupNonZero(prox.ByInputChannel, p.Data, shape)
				mixed = mixed || nz > 0 && nz < n
			}
			if !mixed {
				t.Errorf("%v/%v: no λ zeroed some but not all groups", shape, reg)
			}
		}
	}
}
