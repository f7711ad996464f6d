package proxk

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/optim/internal/opttest"
)

// TestClosedFormsAgree cross-checks the fast ℓ1/2 path against the paper's
// trigonometric formula and both closed forms against the numerical solver,
// in float64, on a dense sweep across each threshold.
func TestClosedFormsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		kappa := opttest.LogU(rng, 1e-8, 1e4)
		for _, q := range []float64{0.5, 2.0 / 3} {
			th := opttest.Threshold(q, kappa)
			a := th * opttest.LogU(rng, 0.5, 1e4)
			if rng.IntN(2) == 0 {
				a = -a
			}
			var fast, ref float64
			if q == 0.5 {
				fast, ref = ProxL12F64(a, kappa), ProxL12Trig(a, kappa)
				// The fast path is accurate to 5e-9 relative, far below
				// float32 resolution.
				if d := math.Abs(fast - ref); d > 1e-8*math.Abs(a) {
					t.Fatalf("l1/2 a=%g kappa=%g: fast %.17g, trig %.17g", a, kappa, fast, ref)
				}
			} else {
				fast = ProxL23F64(a, kappa)
			}
			num := ProxLqNumeric(a, kappa, q)
			// Away from the jump both must agree to near machine precision.
			tol := 1e-13
			if q == 0.5 {
				tol = 1e-8
			}
			if math.Abs(math.Abs(a)-th) > 1e-9*th {
				if d := math.Abs(fast - num); d > tol*math.Abs(a) {
					t.Fatalf("q=%g a=%.17g kappa=%g (threshold %g): closed form %.17g, numeric %.17g", q, a, kappa, th, fast, num)
				}
			}
		}
	}
}

// TestL12FastAccuracy sweeps the float32 fast path of the ℓ1/2 prox
// (l12S, l12X: the Go loop and the AVX2 kernels compute the same bits)
// over s from 0 to past the threshold, densely near both ends, for |z|
// across its guarded range and both signs, against the float64 map
// rounded to float32. It also checks the rational fit h = P/Q itself
// (gen_l12rat.go).
func TestL12FastAccuracy(t *testing.T) {
	var worst, worstH float64
	for i := 0; i <= 20000; i++ {
		u := float64(i) / 20000
		sv := l12FastEnd * u * u * (3 - 2*u) // dense near 0 and near the end
		// Below 1e-3 the reference (w/s − 1)/s loses digits in float64.
		if sv > 1e-3 {
			w := solveW(0.5, math.Log(sv))
			want := (w/sv - 1) / sv
			c := L12Rat
			var p, q float64
			for j := 3; j >= 0; j-- {
				p = p*sv + float64(c[j])
			}
			for j := 6; j >= 4; j-- {
				q = (q + float64(c[j])) * sv
			}
			worstH = max(worstH, math.Abs(p/(q+1)-want)/want)
		}
		for _, tv := range []float64{1.01e-12, 3.7e-7, 0.0123, 0.5, 1, 1.7, 913, 9.9e11} {
			k := float32(sv * 4 * tv * math.Sqrt(tv))
			if !(k > 1e-30) {
				continue
			}
			for _, z := range []float32{float32(tv), -float32(tv)} {
				t32 := float32(math.Abs(float64(z)))
				s, ok := l12S(t32, k)
				if !ok {
					t.Fatalf("l12S(%g, %g) refused a guarded input", t32, k)
				}
				got := l12X(z, s)
				kappa := float64(k)
				want := proxL12(z, kappa)
				th := opttest.Threshold(0.5, kappa)
				if math.Abs(float64(t32)-th) < 1e-5*th {
					continue // a near-tie: either minimiser is right
				}
				if want == 0 {
					if got != 0 {
						t.Fatalf("z=%g kappa=%g: fast path %g, want 0", z, kappa, got)
					}
					continue
				}
				rel := math.Abs(float64(got-want)) / math.Abs(float64(want))
				worst = max(worst, rel)
				if rel > 2.5e-7 {
					t.Fatalf("z=%g kappa=%g (s=%g): fast path %g, float64 map %g (relative error %.2e)", z, kappa, s, got, want, rel)
				}
			}
		}
	}
	t.Logf("largest relative error: x %.3g, h %.3g", worst, worstH)
	if worstH > 1e-7 {
		t.Errorf("rational fit of h: relative error %.2e, want below 1e-7 (rerun go generate?)", worstH)
	}
}

// TestSliceMatchesScalar checks the float32 fast paths of the ℓ1/2 and
// ℓ2/3 slice loops against the float64 scalar maps.
func TestSliceMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	const n = 5000
	z := make([]float32, n)
	eta := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64() * opttest.LogU(rng, 1e-3, 1e3))
		eta[i] = float32(opttest.LogU(rng, 1e-4, 1e2))
	}
	dst := make([]float32, n)
	for _, lam := range []float32{1e-6, 1e-3, 0.05, 3} {
		for _, q := range []float64{0.5, 2.0 / 3} {
			if q == 0.5 {
				ProxL12Slice(dst, z, eta, 2*float64(lam))
			} else {
				ProxL23Slice(dst, z, eta, 2*float64(lam))
			}
			for i := range z {
				kappa := 2 * float64(lam) * float64(eta[i])
				want := proxL12(z[i], kappa)
				if q != 0.5 {
					want = proxL23(z[i], kappa)
				}
				// The float32 fast path may differ from the float64 map by an
				// ulp, and right at the threshold either minimiser is right.
				th := opttest.Threshold(q, kappa)
				if math.Abs(math.Abs(float64(z[i]))-th) < 1e-5*th {
					continue
				}
				if math.Abs(float64(dst[i]-want)) > 2.5e-7*math.Abs(float64(want)) {
					t.Fatalf("q=%g z=%g eta=%g lambda=%g: slice %g, scalar %g", q, z[i], eta[i], lam, dst[i], want)
				}
			}
		}
	}
}
