package schedule

import (
	"math"
	"testing"
)

func TestSchedules(t *testing.T) {
	ms := EpochMultiStep(10, 0.1, 150, 250)
	for _, c := range []struct {
		t    int
		want float64
	}{{1, 1}, {1500, 1}, {1501, 0.1}, {2500, 0.1}, {2501, 0.01}} {
		if got := ms.Rate(1, c.t); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("MultiStep t=%d: %g, want %g", c.t, got, c.want)
		}
	}
	sd := StepDecay{Every: 3, Gamma: 0.5}
	if sd.Rate(2, 3) != 2 || sd.Rate(2, 4) != 1 || sd.Rate(2, 7) != 0.5 {
		t.Errorf("StepDecay: %g %g %g", sd.Rate(2, 3), sd.Rate(2, 4), sd.Rate(2, 7))
	}
	if got := (InvSqrt{}).Rate(1, 4); got != 0.5 {
		t.Errorf("InvSqrt: %g", got)
	}
	if got := (InvSqrt{Offset: 4}).Rate(0.06, 5); math.Abs(got-0.02) > 1e-15 {
		t.Errorf("InvSqrt offset 4 at t=5: %g, want 0.06/sqrt(9)", got)
	}
	r := NewReduceOnPlateau(1/1.2, 0)
	seq := []float64{5, 4, 4.5, 3, 3, 2.9}
	wantScale := []float64{1, 1, 1 / 1.2, 1 / 1.2, 1 / 1.44, 1 / 1.44}
	for i, v := range seq {
		r.Observe(v)
		if math.Abs(r.Rate(1, 0)-wantScale[i]) > 1e-12 {
			t.Errorf("plateau after %v: scale %g, want %g", seq[:i+1], r.Scale(), wantScale[i])
		}
	}
	p := NewReduceOnPlateau(0.5, 1)
	p.MinScale = 0.3
	for _, v := range []float64{1, 2, 2, 2, 2, 2, 2} {
		p.Observe(v)
	}
	if p.Scale() != 0.3 {
		t.Errorf("patience 1 with floor: scale %g, want 0.3", p.Scale())
	}
}
