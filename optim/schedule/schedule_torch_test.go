package schedule

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"
)

// scheduleCase is one case of testdata/torch_schedules.json.
type scheduleCase struct {
	Params struct {
		T          int
		Min        float64
		Warmup     int
		Start      float64
		Then       string
		Milestones []int
		Gamma      float64
		Every      int
		Offset     float64
		Total      int
		Pct        float64
		Div        float64
		Final      float64
		Three      bool
		Linear     bool
	}
	LR [][]float64
}

// schedule rebuilds the Go schedule that the case describes.
func (c *scheduleCase) schedule(t *testing.T, name string) Schedule {
	p := c.Params
	main := func(kind string) Schedule {
		switch kind {
		case "cosine":
			return Cosine{T: p.T, Min: p.Min}
		case "multistep":
			return MultiStep{Milestones: p.Milestones, Gamma: p.Gamma}
		case "step":
			return StepDecay{Every: p.Every, Gamma: p.Gamma}
		case "const":
			return Constant{}
		case "invsqrt":
			return InvSqrt{Offset: p.Offset}
		case "onecycle":
			return OneCycle{Total: p.Total, PctStart: p.Pct, DivFactor: p.Div, FinalDivFactor: p.Final, ThreePhase: p.Three, Linear: p.Linear}
		}
		t.Fatalf("%s: unknown schedule %q", name, kind)
		return nil
	}
	switch {
	case p.Warmup > 0:
		return Warmup{Steps: p.Warmup, StartFactor: p.Start, Then: main(p.Then)}
	case p.Total > 0:
		return main("onecycle")
	default:
		return main("cosine")
	}
}

// TestSchedulesMatchPyTorch compares Cosine, Warmup (followed by each
// kind of schedule) and OneCycle with PyTorch 1.13's CosineAnnealingLR,
// SequentialLR(LinearLR, …) and OneCycleLR update by update, for two
// parameter groups with different base step sizes
// (testdata/torch_schedules.json, written by torch_schedules.py).
func TestSchedulesMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_schedules.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Bases []float64
		Cases map[string]*scheduleCase
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 10 {
		t.Fatalf("fixture has %d cases", len(fx.Cases))
	}
	names := make([]string, 0, len(fx.Cases))
	for name := range fx.Cases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := fx.Cases[name]
		s := c.schedule(t, name)
		worst := 0.0
		for g, base := range fx.Bases {
			for k, want := range c.LR[g] {
				got := s.Rate(base, k+1)
				d := math.Abs(got - want)
				worst = max(worst, d)
				// PyTorch computes LinearLR, CosineAnnealingLR and
				// MultiStepLR recursively (lr_t from lr_(t-1)), so
				// rounding accumulates on its side.
				if !(d <= 1e-12*math.Max(base, 1e-300)) {
					t.Errorf("%s: group %d (base %v), update %d: rate %.17g, PyTorch %.17g", name, g, base, k+1, got, want)
				}
			}
		}
		t.Logf("%-22s %3d updates: max |Δlr| = %.3g", name, len(c.LR[0]), worst)
	}
}
