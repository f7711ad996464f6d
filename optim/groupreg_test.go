package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
)

// groupObjective returns F(x) = Σ_i (x_i − z_i)²/(2η_i) + λ·r(x) in float64.
func groupObjective(x, z, eta []float64, lambda float64, r func([]float64) float64) float64 {
	var s float64
	for i := range x {
		d := x[i] - z[i]
		s += d * d / (2 * eta[i])
	}
	return s + lambda*r(x)
}

func norm64(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func count64(x []float64) float64 {
	for _, v := range x {
		if v != 0 {
			return 1
		}
	}
	return 0
}

// istaGroupLasso minimises the group-lasso objective by proximal gradient
// descent in float64 with step min η (the objective is strongly convex, so
// it converges linearly): an independent reference for the Newton solve.
func istaGroupLasso(z, eta []float64, lambda float64) []float64 {
	step := math.Inf(1)
	for _, e := range eta {
		step = math.Min(step, e)
	}
	x := append([]float64(nil), z...)
	y := make([]float64, len(z))
	for range 20000 {
		for i := range x {
			y[i] = x[i] - step*(x[i]-z[i])/eta[i]
		}
		n := norm64(y)
		f := 0.0
		if n > step*lambda {
			f = 1 - step*lambda/n
		}
		for i := range x {
			x[i] = f * y[i]
		}
	}
	return x
}

// groupCase is one random group problem; near-threshold cases put λ within
// a relative 1e-1…1e-6 of the value at which the map switches to zero.
type groupCase struct {
	z, eta []float32
	lambda float32
}

// randomGroupCases draws n problems with η spread over a factor etaSpread.
func randomGroupCases(rng *rand.Rand, n int, threshold func(z, eta []float32) float64, etaSpread float64) []groupCase {
	var cs []groupCase
	for k := range n {
		size := 1 + rng.IntN(6)
		z := make([]float32, size)
		eta := make([]float32, size)
		scale := math.Pow(10, -3+6*rng.Float64())
		base := math.Pow(10, -3+4*rng.Float64())
		for i := range z {
			z[i] = float32(scale * rng.NormFloat64())
			eta[i] = float32(base * math.Pow(etaSpread, rng.Float64()))
		}
		th := threshold(z, eta)
		var lam float64
		switch k % 3 {
		case 0:
			lam = th * math.Pow(10, -7+9*rng.Float64())
		default:
			d := math.Pow(10, -1-5*rng.Float64())
			if rng.IntN(2) == 0 {
				d = -d
			}
			lam = th * (1 + d)
		}
		cs = append(cs, groupCase{z, eta, float32(lam)})
	}
	return cs
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestGroupLassoMatchesISTA compares the group-lasso map with a float64
// proximal-gradient solve of the same problem and checks the KKT
// conditions of its result.
func TestGroupLassoMatchesISTA(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	r := GroupLasso(ByFilter)
	threshold := func(z, eta []float32) float64 {
		var s float64
		for i := range z {
			q := float64(z[i]) / float64(eta[i])
			s += q * q
		}
		return math.Sqrt(s) // zero iff ‖z/η‖ ≤ λ
	}
	// ISTA converges at the rate 1 − min η/max η: a spread of 100 keeps
	// 20000 iterations exact to rounding (TestGroupLassoKKT covers wide
	// spreads).
	cases := randomGroupCases(rng, 1500, threshold, 100)
	zeros := 0
	var worstF, worstX float64 // largest excess objective and coordinate error, relative
	for k, c := range cases {
		got := make([]float32, len(c.z))
		r.Prox(got, c.z, c.eta, c.lambda)
		z, eta, lam := to64(c.z), to64(c.eta), float64(c.lambda)
		ref := istaGroupLasso(z, eta, lam)
		x := to64(got)
		F := func(x []float64) float64 { return groupObjective(x, z, eta, lam, norm64) }
		fx, fr := F(x), F(ref)
		// float32 rounding of x perturbs F by ≈ λ·‖x‖·1e-7 plus the
		// quadratic term; the reference itself is exact to ~1e-15.
		tol := 1e-6*(lam*norm64(x)+math.Abs(fr)) + 1e-300
		if fx > fr+tol {
			t.Fatalf("case %d z=%v eta=%v lambda=%g: prox %v (F=%.15g), ISTA %v (F=%.15g)", k, c.z, c.eta, c.lambda, got, fx, ref, fr)
		}
		worstF = math.Max(worstF, (fx-fr)/(lam*norm64(x)+math.Abs(fr)+1e-300))
		zn := norm64(z)
		for i := range x {
			worstX = math.Max(worstX, math.Abs(x[i]-ref[i])/(zn+1e-300))
			if math.Abs(x[i]-ref[i]) > 2e-6*zn+1e-30 {
				t.Fatalf("case %d coordinate %d: prox %.9g, ISTA %.9g (‖z‖ %g)", k, i, x[i], ref[i], zn)
			}
		}
		if (norm64(x) == 0) != (threshold(c.z, c.eta) <= lam) {
			t.Fatalf("case %d: zero %v but ‖z/η‖ = %.9g, λ = %.9g", k, norm64(x) == 0, threshold(c.z, c.eta), lam)
		}
		if norm64(x) == 0 {
			zeros++
		}
	}
	if zeros < 200 || zeros > len(cases)-200 {
		t.Fatalf("%d of %d cases zero: the cases do not straddle the threshold", zeros, len(cases))
	}
	t.Logf("%d cases (%d zero): F(prox) − F(ISTA) ≤ %.2g of λ‖x‖ + |F|, |x − x_ISTA| ≤ %.2g ‖z‖", len(cases), zeros, worstF, worstX)
}

// TestGroupLassoKKT checks stationarity, (x_i − z_i)/η_i + λx_i/‖x‖ = 0,
// for metrics spread over ten decades, where ISTA would be too slow.
func TestGroupLassoKKT(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	r := GroupLasso(ByFilter)
	var worst float64 // largest residual relative to its tolerance
	for k := range 3000 {
		size := 1 + rng.IntN(40)
		z := make([]float32, size)
		eta := make([]float32, size)
		for i := range z {
			z[i] = float32(rng.NormFloat64())
			eta[i] = float32(math.Pow(10, -5+10*rng.Float64()))
		}
		var q float64
		for i := range z {
			v := float64(z[i]) / float64(eta[i])
			q += v * v
		}
		// Down to 1e-8 of the threshold: the first-order path.
		lam := math.Sqrt(q) * math.Pow(10, -8*rng.Float64())
		x := make([]float32, size)
		r.Prox(x, z, eta, float32(lam))
		n := norm2(x)
		if n == 0 {
			if math.Sqrt(q) > float64(float32(lam))*(1+1e-6) {
				t.Fatalf("case %d: zero although ‖z/η‖ = %g > λ = %g", k, math.Sqrt(q), lam)
			}
			continue
		}
		for i := range x {
			xi, zi, ei := float64(x[i]), float64(z[i]), float64(eta[i])
			// x_i(1 + λη_i/‖x‖) = z_i, compared relative to |z_i| and to
			// the float32 rounding of x_i.
			res := xi*(1+float64(float32(lam))*ei/n) - zi
			tol := 1e-6*math.Abs(zi) + 2e-7*math.Abs(xi)*(1+float64(float32(lam))*ei/n)
			worst = math.Max(worst, math.Abs(res)/(tol+1e-300))
			if math.Abs(res) > tol {
				t.Fatalf("case %d coordinate %d: x=%g z=%g eta=%g ‖x‖=%g: residual %g", k, i, xi, zi, ei, n, res)
			}
		}
	}
	t.Logf("3000 cases: largest stationarity residual %.2g of its tolerance", worst)
}

// TestGroupLassoUniformMetric: with a constant η the map is block soft
// thresholding z·max(0, 1 − λη/‖z‖).
func TestGroupLassoUniformMetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	r := GroupLasso(ByFilter)
	for range 500 {
		size := 1 + rng.IntN(20)
		z := make([]float32, size)
		eta := make([]float32, size)
		e := float32(math.Pow(10, -3+4*rng.Float64()))
		for i := range z {
			z[i] = float32(rng.NormFloat64())
			eta[i] = e
		}
		lam := float32(rng.Float64() * 2 * norm2(z) / float64(e))
		x := make([]float32, size)
		r.Prox(x, z, eta, lam)
		f := math.Max(0, 1-float64(lam)*float64(e)/norm2(z))
		for i := range x {
			want := float64(z[i]) * f
			if math.Abs(float64(x[i])-want) > 2e-7*math.Abs(float64(z[i]))+1e-30 {
				t.Fatalf("size %d: x[%d] = %.9g, block soft threshold %.9g", size, i, x[i], want)
			}
		}
	}
}

// TestGroupProxMatchesGridSearch compares both group maps on groups of two
// coordinates with a brute-force minimisation of the objective over a grid
// (refined around its best point), including λ near the thresholds.
func TestGroupProxMatchesGridSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, rc := range []struct {
		reg       GroupRegularizer
		r         func([]float64) float64
		threshold func(z, eta []float32) float64
	}{
		{GroupLasso(ByFilter), norm64, func(z, eta []float32) float64 {
			return math.Hypot(float64(z[0])/float64(eta[0]), float64(z[1])/float64(eta[1]))
		}},
		{GroupL0(ByFilter), count64, func(z, eta []float32) float64 {
			return float64(z[0])*float64(z[0])/(2*float64(eta[0])) + float64(z[1])*float64(z[1])/(2*float64(eta[1]))
		}},
	} {
		t.Run(fmt.Sprint(rc.reg), func(t *testing.T) {
			var worst float64 // largest F(prox) − F(grid), relative to |F(grid)|
			better := 0       // cases where the map beats the refined grid
			for k := range 250 {
				z := []float32{float32(rng.NormFloat64()), float32(rng.NormFloat64())}
				eta := []float32{float32(math.Pow(10, -1+2*rng.Float64())), float32(math.Pow(10, -1+2*rng.Float64()))}
				lam := rc.threshold(z, eta) * (1 + (rng.Float64()-0.5)*0.2)
				if k%4 == 0 {
					lam *= math.Pow(10, -1+2*rng.Float64())
				}
				got := make([]float32, 2)
				rc.reg.Prox(got, z, eta, float32(lam))
				z64, e64, l64 := to64(z), to64(eta), float64(float32(lam))
				F := func(x []float64) float64 { return groupObjective(x, z64, e64, l64, rc.r) }
				best := []float64{0, 0}
				fb := F(best)
				// Grid over a box that holds every minimiser (|x_i| ≤ |z_i|),
				// then refinements around the best point.
				cx, cy := 0.0, 0.0
				hx, hy := math.Abs(z64[0])+1e-9, math.Abs(z64[1])+1e-9
				for range 6 {
					const n = 60
					for i := -n; i <= n; i++ {
						for j := -n; j <= n; j++ {
							x := []float64{cx + hx*float64(i)/n, cy + hy*float64(j)/n}
							if f := F(x); f < fb {
								best, fb = x, f
							}
						}
					}
					cx, cy = best[0], best[1]
					hx, hy = hx/20, hy/20
				}
				if f := F(z64); f < fb {
					best, fb = z64, f
				}
				fx := F(to64(got))
				if fx > fb+1e-6*math.Abs(fb)+1e-12 {
					t.Fatalf("case %d z=%v eta=%v λ=%g: prox %v (F=%.12g), grid %v (F=%.12g)", k, z, eta, lam, got, fx, best, fb)
				}
				worst = math.Max(worst, (fx-fb)/(math.Abs(fb)+1e-300))
				if fx < fb {
					better++
				}
			}
			t.Logf("250 cases: F(prox) − F(grid) ≤ %.2g |F(grid)|; the map beats the grid in %d", worst, better)
		})
	}
}

// TestGroupL0Rule checks the keep-or-zero rule and its tie convention.
func TestGroupL0Rule(t *testing.T) {
	r := GroupL0(ByFilter)
	z := []float32{1, -0.5} // Σ z²/(2η) = 1 + 1 = 2
	eta := []float32{0.5, 0.125}
	x := make([]float32, 2)
	for _, c := range []struct {
		lambda float32
		keep   bool
	}{{1.99, true}, {2, false}, {2.01, false}, {0, true}} {
		r.Prox(x, z, eta, c.lambda)
		if kept := x[0] == z[0] && x[1] == z[1]; kept != c.keep || (!kept && (x[0] != 0 || x[1] != 0)) {
			t.Errorf("λ = %g: got %v, want keep = %v", c.lambda, x, c.keep)
		}
	}
}

// TestGroupLayouts checks which coordinates form a group for each GroupBy.
func TestGroupLayouts(t *testing.T) {
	shape := []int{3, 2, 2, 2} // 3 filters, 2 input channels, 2×2 kernels
	theta := make([]float32, 24)
	for i := range theta {
		theta[i] = float32(i + 1)
	}
	// Input channel 1 of every filter zero.
	for o := range 3 {
		for j := range 4 {
			theta[o*8+4+j] = 0
		}
	}
	if nz, n := GroupNonZero(ByInputChannel, theta, shape); nz != 1 || n != 2 {
		t.Fatalf("ByInputChannel: %d of %d groups non-zero, want 1 of 2", nz, n)
	}
	if nz, n := GroupNonZero(ByFilter, theta, shape); nz != 3 || n != 3 {
		t.Fatalf("ByFilter: %d of %d groups non-zero, want 3 of 3", nz, n)
	}
	// Group ℓ0 penalty counts groups; group lasso sums the group norms.
	if got := GroupPenalty(GroupL0(ByInputChannel), theta, shape); got != 1 {
		t.Fatalf("gl0:in penalty %g, want 1", got)
	}
	var want float64
	for o := range 3 {
		want += norm2(theta[o*8 : o*8+8])
	}
	if got := GroupPenalty(GroupLasso(ByFilter), theta, shape); math.Abs(got-want) > 1e-12*want {
		t.Fatalf("gl21 penalty %g, want %g", got, want)
	}
	// Rank-1 tensors: one group per coordinate (group lasso = ℓ1).
	if got := GroupPenalty(GroupLasso(ByFilter), []float32{-1, 2, 0}, []int{3}); got != 3 {
		t.Fatalf("rank-1 gl21 penalty %g, want 3", got)
	}
}

// TestGroupProxInOptimizer checks that ProxGen applies the group map to
// whole groups of the stepped tensor: one step of ProxGen-Adam with group
// lasso equals the Adam step followed by the map on each group, for both
// groupings, and whole groups become exactly zero.
func TestGroupProxInOptimizer(t *testing.T) {
	for _, by := range []GroupBy{ByFilter, ByInputChannel} {
		t.Run(by.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, 32))
			shape := []int{8, 5, 3, 3}
			p := autograd.RandN(rng, shape...)
			p.Grad = make([]float32, p.Numel())
			for i := range p.Grad {
				p.Grad[i] = float32(rng.NormFloat64()) * float32(1+i%7)
			}
			q := autograd.FromSlice(append([]float32(nil), p.Data...), shape...)
			q.Grad = append([]float32(nil), p.Grad...)
			const lr = 0.5
			reg := GroupLasso(by)
			// Reference: the same Adam step without a regularizer, then the
			// map per group with η = α/(|g| + δ) (first Adam step: m̂ = g,
			// sqrt(v̂) = |g|), λ between the two middle thresholds ‖z_g/η_g‖
			// of the groups, so that about half the groups are zeroed.
			New([]*Group{{Params: []*autograd.Tensor{q}, LR: lr}}, ProxGenAdam(0.9, 0.999, 1e-8)).Step()
			eta := make([]float32, q.Numel())
			for i, g := range q.Grad {
				eta[i] = lr * (1 / (float32(math.Abs(float64(g))) + 1e-8))
			}
			l := layoutOf(by, shape)
			zg, eg := make([]float32, l.size), make([]float32, l.size)
			var ths []float64
			for g := range l.count {
				l.gather(zg, q.Data, g)
				l.gather(eg, eta, g)
				for i := range zg {
					zg[i] /= eg[i]
				}
				ths = append(ths, norm2(zg))
			}
			slices.Sort(ths)
			k := len(ths) / 2
			lam := float32((ths[k-1] + ths[k]) / 2)
			for g := range l.count {
				l.gather(zg, q.Data, g)
				l.gather(eg, eta, g)
				reg.Prox(zg, zg, eg, lam)
				l.scatter(q.Data, zg, g)
			}
			New([]*Group{{Params: []*autograd.Tensor{p}, Reg: reg, Lambda: float64(lam), LR: lr}}, ProxGenAdam(0.9, 0.999, 1e-8)).Step()
			// The fused Adam kernel rounds η differently from the formula
			// above by an ulp or two; zeros must agree exactly.
			for i := range p.Data {
				if (p.Data[i] == 0) != (q.Data[i] == 0) || !near(float64(p.Data[i]), float64(q.Data[i]), 1e-5, 0) {
					t.Fatalf("element %d: optimizer %g, reference %g", i, p.Data[i], q.Data[i])
				}
			}
			nz, n := GroupNonZero(by, p.Data, shape)
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
	l := layoutOf(ByInputChannel, shape)
	tg, og := make([]float32, l.size), make([]float32, l.size)
	for g := range l.count {
		l.gather(tg, q.Data, g)
		n := norm2(tg)
		for i := range og {
			og[i] = float32(lam / n * float64(tg[i]))
		}
		ga := make([]float32, l.size)
		l.gather(ga, q.Grad, g)
		for i := range ga {
			ga[i] += og[i]
		}
		l.scatter(q.Grad, ga, g)
	}
	c := SGDConfig(0, false)
	c.RegMode = RegSubgradient
	New([]*Group{{Params: []*autograd.Tensor{p}, Reg: GroupLasso(ByInputChannel), Lambda: lam, LR: 0.1}}, c).Step()
	New([]*Group{{Params: []*autograd.Tensor{q}, LR: 0.1}}, SGDConfig(0, false)).Step()
	for i := range p.Data {
		if !near(float64(p.Data[i]), float64(q.Data[i]), 1e-6, 1e-7) {
			t.Fatalf("element %d: %g vs %g", i, p.Data[i], q.Data[i])
		}
	}
}

func TestParseGroupRegularizers(t *testing.T) {
	for _, name := range []string{"gl0", "gl21", "gl0:in", "gl21:in"} {
		r, err := ParseRegularizer(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(r); got != name {
			t.Errorf("ParseRegularizer(%q) prints as %q", name, got)
		}
	}
	for _, bad := range []string{"gl1", "gl21:out", "gl0:"} {
		if _, err := ParseRegularizer(bad); err == nil {
			t.Errorf("ParseRegularizer(%q) accepted", bad)
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
	for _, reg := range []GroupRegularizer{GroupL0(ByFilter), GroupLasso(ByFilter), GroupLasso(ByInputChannel)} {
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

// hiddenDecider hides the sums32Decider of a group map, so that the
// optimizers gather its groups one by one instead of mapping them with
// stridedPass.run.
type hiddenDecider struct{ GroupRegularizer }

// TestProxStridedMatchesGather checks the memory-order group prox of
// input-channel groups (stridedPass.run) against gathering each group and
// mapping it with Prox, over several ProxGen-Adam steps and λ from the
// first-order regime to one where many groups are zeroed or decided by the
// full map: the same groups are zero, the rest agree to the rounding of
// the sums in the first-order factor.
func TestProxStridedMatchesGather(t *testing.T) {
	for _, shape := range [][]int{{70, 40, 3, 3}, {50, 300}, {9, 20, 5, 5}, {3, 17, 1, 1}} {
		for _, reg := range []GroupRegularizer{GroupL0(ByInputChannel), GroupLasso(ByInputChannel)} {
			mixed := false
			for _, lam := range []float64{1e-5, 0.3, 3, 10} {
				name := fmt.Sprintf("%v/%v/%g", shape, reg, lam)
				rng := rand.New(rand.NewPCG(61, 62))
				p := autograd.RandN(rng, shape...)
				// Groups of sizes from 1 down to 1e-3, so that λ zeroes some.
				l := layoutOf(ByInputChannel, shape)
				for i := range p.Data {
					p.Data[i] *= float32(math.Pow(1e-3, float64(i/l.inner%l.count)/float64(l.count)))
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
						if (p.Data[i] == 0) != (q.Data[i] == 0) || !near(float64(p.Data[i]), float64(q.Data[i]), 1e-6, 0) {
							t.Fatalf("%s, step %d, element %d: strided %g, gathered %g", name, step, i, p.Data[i], q.Data[i])
						}
					}
				}
				nz, n := GroupNonZero(ByInputChannel, p.Data, shape)
				mixed = mixed || nz > 0 && nz < n
			}
			if !mixed {
				t.Errorf("%v/%v: no λ zeroed some but not all groups", shape, reg)
			}
		}
	}
}
