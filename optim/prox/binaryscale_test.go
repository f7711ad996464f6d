package prox

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBinaryWAtIsScaleFree checks the scaled W-shaped regularizer against
// its definition r(x) = s²·r₁(x/s): its prox is s times the unit prox of
// z/s (to float32 rounding), it minimises the prox objective over a dense
// grid, its penalty is s² times the unit penalty, and its subgradient
// matches a central difference of the penalty away from the kinks.
func TestBinaryWAtIsScaleFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, q := range []float64{0, 0.5, 2.0 / 3, 1, 0.3} {
		unit := BinaryW(q)
		r1 := binFunc(q)
		for range 400 {
			s := math.Exp(rng.Float64()*8 - 6) // 0.0025 … 7.4
			z := float32(rng.NormFloat64() * 2 * s)
			eta := float32(math.Exp(rng.Float64()*6 - 4))
			lam := float32(math.Exp(rng.Float64()*6 - 4))
			reg := BinaryWAt(q, s)
			var got, ref [1]float32
			reg.Prox(got[:], []float32{z}, []float32{eta}, lam)
			unit.Prox(ref[:], []float32{float32(float64(z) / s)}, []float32{eta}, lam)
			want := s * float64(ref[0])
			if d := math.Abs(float64(got[0]) - want); d > 1e-5*math.Max(math.Abs(want), s) {
				t.Fatalf("q=%g s=%g: prox(%g; η=%g, λ=%g) = %g, s·prox₁(z/s) = %g", q, s, z, eta, lam, got[0], want)
			}
			// The objective at the result is no worse than anywhere on a
			// grid around z and at the wells.
			rs := func(x float64) float64 {
				u := x / s
				if math.Abs(math.Abs(u)-1) < 1e-6 {
					u = math.Copysign(1, u) // a well, up to float32 rounding of ±s
				}
				return s * s * r1(u)
			}
			F := func(x float64) float64 {
				d := x - float64(z)
				return d*d/(2*float64(eta)) + float64(lam)*rs(x)
			}
			fx := F(float64(got[0]))
			best := math.Min(F(s), F(-s))
			lo, hi := math.Min(float64(z), -2*s)-s, math.Max(float64(z), 2*s)+s
			for i := 0; i <= 4000; i++ {
				best = math.Min(best, F(lo+(hi-lo)*float64(i)/4000))
			}
			if fx > best+1e-5*(math.Abs(best)+s*s) {
				t.Fatalf("q=%g s=%g z=%g η=%g λ=%g: F(prox) = %g above the grid's %g", q, s, z, eta, lam, fx, best)
			}
			theta := []float32{z, float32(s), -z / 3}
			var pu float64
			for _, v := range theta {
				pu += r1(float64(v) / s)
			}
			if p := reg.Penalty(theta); math.Abs(p-s*s*pu) > 1e-6*s*s*(pu+1) {
				t.Fatalf("q=%g s=%g: penalty %g, want %g", q, s, p, s*s*pu)
			}
			if q == 0 {
				continue
			}
			x := float64(z)
			if math.Abs(math.Abs(x)-s) < 1e-2*s || math.Abs(x) < 1e-2*s {
				continue // too near a kink for a central difference
			}
			g := []float32{0}
			reg.(Subdifferentiable).AddSubgradient(g, []float32{z}, 1, 0)
			h := 1e-4 * s
			fd := (rs(x+h) - rs(x-h)) / (2 * h)
			if math.Abs(float64(g[0])-fd) > 1e-3*math.Max(1, math.Abs(fd)) {
				t.Fatalf("q=%g s=%g x=%g: subgradient %g, central difference %g", q, s, x, g[0], fd)
			}
		}
	}
	if s, ok := BinaryScale(BinaryWAt(1, 0.25)); !ok || s != 0.25 {
		t.Fatalf("BinaryScale = %v, %v", s, ok)
	}
	if s, ok := BinaryScale(BinaryW(1)); !ok || s != 1 {
		t.Fatalf("BinaryScale(BinaryW) = %v, %v", s, ok)
	}
	if _, ok := BinaryScale(L1()); ok {
		t.Fatal("BinaryScale(L1) reports a binary regularizer")
	}
	if !IsBinary(BinaryWAt(0.5, 3)) {
		t.Fatal("IsBinary(BinaryWAt) = false")
	}
}
