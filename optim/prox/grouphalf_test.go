package prox

import (
	"math"
	"math/rand/v2"
	"testing"
)

// halfObjective is F(x) = Σ (x_i − z_i)²/(2η_i) + λ‖x‖^½ in float64.
func halfObjective(x, z, eta []float64, lambda float64) float64 {
	return groupObjective(x, z, eta, lambda, func(x []float64) float64 { return math.Sqrt(norm64(x)) })
}

// halfScan minimises F over the curve x(μ) = z/(1 + μη) by a scan of
// 20,000 log-spaced μ from 1e-12 to 1e12, each of the three best refined
// by golden-section search, and over x = 0: an independent upper bound of
// the minimum (every non-zero minimiser lies on the curve).
func halfScan(z, eta []float64, lambda float64) (best float64, arg []float64) {
	at := func(mu float64) []float64 {
		x := make([]float64, len(z))
		for i := range z {
			x[i] = z[i] / (1 + mu*eta[i])
		}
		return x
	}
	f := func(nu float64) float64 { return halfObjective(at(math.Exp(nu)), z, eta, lambda) }
	arg = make([]float64, len(z))
	best = halfObjective(arg, z, eta, lambda)
	const n = 20000
	lo, hi := math.Log(1e-12), math.Log(1e12)
	step := (hi - lo) / n
	vals := make([]float64, n+1)
	for j := range vals {
		vals[j] = f(lo + float64(j)*step)
	}
	for j := 1; j < n; j++ {
		if vals[j] > vals[j-1] || vals[j] > vals[j+1] {
			continue // not a local minimum of the scan
		}
		a, b := lo+float64(j-1)*step, lo+float64(j+1)*step
		for range 100 {
			m1, m2 := a+(b-a)*0.382, a+(b-a)*0.618
			if f(m1) < f(m2) {
				b = m2
			} else {
				a = m1
			}
		}
		if v := f((a + b) / 2); v < best {
			best, arg = v, at(math.Exp((a+b)/2))
		}
	}
	return best, arg
}

// TestGroupHalfMatchesScan checks the map against the scan of the whole
// curve for groups of 1 to 16 coordinates whose step sizes spread from
// one value (the radial closed form) to six orders of magnitude (where
// log k can rise and fall more than once): the map's objective is never
// above the scan's, and its point is the scan's.
func TestGroupHalfMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := GroupHalf(ByFilter)
	zeros, kept := 0, 0
	for c := range 320 {
		n := 1 + rng.IntN(16)
		spread := []float64{0, 0.5, 2, 6}[c%4] // log10 of max η / min η
		z32, eta32 := make([]float32, n), make([]float32, n)
		base := math.Pow(10, -3+3*rng.Float64())
		for i := range z32 {
			z32[i] = float32(rng.NormFloat64() * math.Pow(10, -1+rng.Float64()))
			eta32[i] = float32(base * math.Pow(10, spread*rng.Float64()))
		}
		z, eta := to64(z32), to64(eta32)
		// λ around where the group is decided (the scalar threshold
		// (3/2)(λη)^{2/3} near ‖z‖), or, every third case, far below it,
		// as for most groups of a training step.
		scale := math.Pow(10, -1.5+2*rng.Float64())
		if c%3 == 2 {
			scale = math.Pow(10, -8+6*rng.Float64())
		}
		lambda := float32(math.Pow(norm64(z), 1.5) / base * scale)
		got32 := make([]float32, n)
		r.Prox(got32, z32, eta32, lambda)
		got := to64(got32)
		fGot := halfObjective(got, z, eta, float64(lambda))
		fScan, arg := halfScan(z, eta, float64(lambda))
		f0 := halfObjective(make([]float64, n), z, eta, float64(lambda))
		if fGot > fScan+1e-6*f0 {
			t.Fatalf("case %d (n %d, spread 1e%v, λ %v): F(map) %v above the scan's %v\nz %v\nη %v\nmap %v\nscan %v",
				c, n, spread, lambda, fGot, fScan, z32, eta32, got32, arg)
		}
		if norm64(got) == 0 {
			zeros++
		} else {
			kept++
			// Every kept group is stationary: x_i = z_i/(1 + μη_i) with
			// μ = λ/(2‖x‖^{3/2}), to float32 rounding.
			mu := float64(lambda) / (2 * math.Pow(norm64(got), 1.5))
			for i := range got {
				if want := z[i] / (1 + mu*eta[i]); math.Abs(got[i]-want) > 1e-6*math.Abs(z[i]) {
					t.Fatalf("case %d: x_%d = %v, stationarity wants %v", c, i, got[i], want)
				}
			}
		}
		// Where the scan's minimum is clearly better than the other
		// candidates, the points agree.
		if (norm64(got) == 0) != (norm64(arg) == 0) && math.Abs(fGot-fScan) > 1e-6*f0 {
			t.Fatalf("case %d: map %v, scan %v", c, got32, arg)
		}
	}
	if zeros < 30 || kept < 30 {
		t.Fatalf("%d groups zeroed and %d kept: λ does not reach both sides", zeros, kept)
	}
}

// TestGroupHalfRadial checks the one-step-size case by hand: with η = 1 and
// λ = 2 the map of a group of norm 3 is radial with ρ the scalar ℓ½ map
// of 3, the root of (ρ − 3) + ρ^{−½} = 0 (ρ ≈ 2.347), and a group of
// norm 1 is below the threshold (3/2)(λη)^{2/3} = 2.38 and goes to 0.
func TestGroupHalfRadial(t *testing.T) {
	r := GroupHalf(ByFilter)
	dst := make([]float32, 2)
	r.Prox(dst, []float32{1.8, -2.4}, []float32{1, 1}, 2)
	rho := math.Hypot(float64(dst[0]), float64(dst[1]))
	if res := (rho - 3) + 1/math.Sqrt(rho); math.Abs(res) > 1e-5 {
		t.Fatalf("ρ = %v: stationarity residual %v", rho, res)
	}
	if c := float64(dst[0]) / 1.8; math.Abs(float64(dst[1])/-2.4-c) > 1e-6 || c < 0.78 || c > 0.79 {
		t.Fatalf("map %v is not radial with ρ near 2.347", dst)
	}
	r.Prox(dst, []float32{0.6, -0.8}, []float32{1, 1}, 2)
	if dst[0] != 0 || dst[1] != 0 {
		t.Fatalf("a group of norm 1 under λη = 2: %v, want 0", dst)
	}
}

// TestGroupHalfTwoCrossings builds a group whose k(μ) rises and falls
// twice: a large coordinate with a large step size (which the map
// shrinks first) and a small one with a tiny step size. k peaks at about
// 0.78 (μ ≈ 2), dips to about 0.66 (μ ≈ 10) and rises again, so for λ
// between them there are two upward crossings; near the top of that
// range the global minimiser is the second (x ≈ (0.04, 0.05)), which a
// search of the rising part alone would miss.
func TestGroupHalfTwoCrossings(t *testing.T) {
	z32 := []float32{1, 0.05}
	eta32 := []float32{1, 1e-6}
	z, eta := to64(z32), to64(eta32)
	r := GroupHalf(ByFilter)
	found := false
	for _, lambda := range []float32{0.02, 0.3, 0.7, 0.74, 0.75, 0.76, 0.77, 1.2, 3} {
		got32 := make([]float32, 2)
		r.Prox(got32, z32, eta32, lambda)
		fGot := halfObjective(to64(got32), z, eta, float64(lambda))
		fScan, arg := halfScan(z, eta, float64(lambda))
		if fGot > fScan+1e-9 {
			t.Fatalf("λ %v: F(map %v) = %v above the scan's %v at %v", lambda, got32, fGot, fScan, arg)
		}
		// The second crossing while the first exists: the large
		// coordinate nearly gone, the small one nearly kept.
		if lambda < 0.775 && got32[0] < 0.1 && got32[1] > 0.04 {
			found = true
		}
	}
	if !found {
		t.Fatal("no λ put the minimiser at the second crossing: the case does not test it")
	}
}

// TestGroupHalfPenaltyAndName checks Penalty (‖θ‖^½) and the Parse round
// trip of every grouping.
func TestGroupHalfPenaltyAndName(t *testing.T) {
	if got := GroupHalf(ByFilter).Penalty([]float32{3, 4}); math.Abs(got-math.Sqrt(5)) > 1e-12 {
		t.Fatalf("Penalty = %v, want √5", got)
	}
	for _, by := range []GroupBy{ByFilter, ByInputChannel, ByBlock} {
		r := GroupHalf(by)
		p, err := Parse(r.(interface{ String() string }).String())
		if err != nil || p.(GroupRegularizer).GroupBy() != by {
			t.Fatalf("Parse(%v) = %v, %v", r, p, err)
		}
	}
	if p, err := Parse("gl12:in"); err != nil || p.(interface{ String() string }).String() != "gl1/2:in" {
		t.Fatalf(`Parse("gl12:in") = %v, %v`, p, err)
	}
}

// TestGroupHalfZeroSteps checks coordinates whose step size is 0 (a
// schedule's last step): they keep z, whether the others are mapped or
// the whole group has η = 0, and the map ends.
func TestGroupHalfZeroSteps(t *testing.T) {
	r := GroupHalf(ByFilter)
	z := []float32{0.3, -0.4, 0.05, 0}
	for _, tc := range []struct {
		eta    []float32
		lambda float32
	}{
		{[]float32{0, 0, 0, 0}, 5},
		{[]float32{0, 0.5, 2, 1}, 0.2},
		{[]float32{0, 0.5, 2, 1}, 50},
		{[]float32{1, 0.5, 2, 0}, 50},
	} {
		got := make([]float32, len(z))
		r.Prox(got, z, tc.eta, tc.lambda)
		// F over the coordinates that can move (the others cost 0 at z).
		var fGot, r2 float64
		for i, e := range tc.eta {
			d := float64(got[i] - z[i])
			r2 += float64(got[i]) * float64(got[i])
			if e == 0 {
				if d != 0 {
					t.Fatalf("η %v, λ %v: x_%d = %v moved from z %v", tc.eta, tc.lambda, i, got[i], z[i])
				}
				continue
			}
			fGot += d * d / (2 * float64(e))
		}
		fGot += float64(tc.lambda) * math.Sqrt(math.Sqrt(r2))
		// The moving coordinates are stationary: x_i = z_i/(1 + μη_i),
		// μ = λ/(2‖x‖^{3/2}).
		mu := float64(tc.lambda) / (2 * math.Pow(r2, 0.75))
		for i, e := range tc.eta {
			if want := float64(z[i]) / (1 + mu*float64(e)); r2 > 0 && math.Abs(float64(got[i])-want) > 1e-6 {
				t.Fatalf("η %v, λ %v: x_%d = %v, stationarity wants %v", tc.eta, tc.lambda, i, got[i], want)
			}
		}
		if math.IsNaN(fGot) || math.IsInf(fGot, 0) {
			t.Fatalf("η %v, λ %v: map %v with objective %v", tc.eta, tc.lambda, got, fGot)
		}
	}
}
