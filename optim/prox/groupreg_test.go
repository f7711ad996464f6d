package prox

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/optim/internal/proxk"
)

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

type groupCase struct {
	z, eta []float32
	lambda float32
}

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
		n := proxk.Norm2(x)
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
		lam := float32(rng.Float64() * 2 * proxk.Norm2(z) / float64(e))
		x := make([]float32, size)
		r.Prox(x, z, eta, lam)
		f := math.Max(0, 1-float64(lam)*float64(e)/proxk.Norm2(z))
		for i := range x {
			want := float64(z[i]) * f
			if math.Abs(float64(x[i])-want) > 2e-7*math.Abs(float64(z[i]))+1e-30 {
				t.Fatalf("size %d: x[%d] = %.9g, block soft threshold %.9g", size, i, x[i], want)
			}
		}
	}
}

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
		want += proxk.Norm2(theta[o*8 : o*8+8])
	}
	if got := GroupPenalty(GroupLasso(ByFilter), theta, shape); math.Abs(got-want) > 1e-12*want {
		t.Fatalf("gl21 penalty %g, want %g", got, want)
	}
	// Rank-1 tensors: one group per coordinate (group lasso = ℓ1).
	if got := GroupPenalty(GroupLasso(ByFilter), []float32{-1, 2, 0}, []int{3}); got != 3 {
		t.Fatalf("rank-1 gl21 penalty %g, want 3", got)
	}
}

func TestParseGroupRegularizers(t *testing.T) {
	for _, name := range []string{"gl0", "gl21", "gl0:in", "gl21:in"} {
		r, err := Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(r); got != name {
			t.Errorf("Parse(%q) prints as %q", name, got)
		}
	}
	for _, bad := range []string{"gl1", "gl21:out", "gl0:"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
