package schedule

import (
	"math"
	"strings"
	"testing"
)

func TestParseScheduleErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"cosin", "unknown schedule"},
		{"const:1", "takes no arguments"},
		{"invsqrt:-1", "offset"},
		{"multistep:5,3", "must increase"},
		{"multistep:a", "not a positive epoch"},
		{"multistep:5:2", "gamma"},
		{"step:0:0.5", "EVERY"},
		{"plateau:1.2", "factor"},
		{"cosine:-1", "floor"},
		{"cosine:1:2", "at most a floor"},
		{"onecycle:1.5", "PCT"},
		{"onecycle:0.3:0", "DIV"},
		{"onecycle:0.3:25:-1", "FINALDIV"},
		{"onecycle:0.3:25:1e4:2", "at most"},
		{"warmup", "needs EPOCHS"},
		{"warmup:0+cosine", "warm-up epochs"},
		{"warmup:2:1.5+cosine", "start factor"},
		{"warmup:2+warmup:1", "only one"},
		{"warmup:2+cosine:x", "floor"},
		{"warmupx:2", "needs EPOCHS"},
	} {
		_, err := Parse(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.spec, err, c.want)
		}
	}
}

// TestScheduleSpecBuild checks that the parsed descriptions build the
// schedules they name, in the units Build documents.
func TestScheduleSpecBuild(t *testing.T) {
	const perEpoch, epochs = 10, 20 // 200 updates
	for _, c := range []struct {
		spec string
		want Schedule
	}{
		{"const", Constant{}},
		{"multistep:5,15", MultiStep{Milestones: []int{50, 150}, Gamma: 0.1}},
		{"multistep:5,15:0.5", MultiStep{Milestones: []int{50, 150}, Gamma: 0.5}},
		{"step:3:0.7", StepDecay{Every: 30, Gamma: 0.7}},
		{"invsqrt:4", InvSqrt{Offset: 4}},
		{"cosine", Cosine{T: 200}},
		{"cosine:1e-4", Cosine{T: 200, Min: 1e-4}},
		{"onecycle", OneCycle{Total: 200, PctStart: 0.3, DivFactor: 25, FinalDivFactor: 1e4}},
		{"onecycle:0.25:10:100:three:linear", OneCycle{Total: 200, PctStart: 0.25, DivFactor: 10, FinalDivFactor: 100, ThreePhase: true, Linear: true}},
		{"onecycle:0.4:linear", OneCycle{Total: 200, PctStart: 0.4, DivFactor: 25, FinalDivFactor: 1e4, Linear: true}},
		{"warmup:2", Warmup{Steps: 20, StartFactor: 1.0 / 3, Then: Constant{}}},
		{"warmup:0.55:0+cosine:0.001", Warmup{Steps: 6, StartFactor: 0, Then: Cosine{T: 194, Min: 0.001}}},
		{"warmup:1:0.1+multistep:5", Warmup{Steps: 10, StartFactor: 0.1, Then: MultiStep{Milestones: []int{50}, Gamma: 0.1}}},
		{"warmup:3:0.5+onecycle:0.2", Warmup{Steps: 30, StartFactor: 0.5, Then: OneCycle{Total: 170, PctStart: 0.2, DivFactor: 25, FinalDivFactor: 1e4}}},
	} {
		sp, err := Parse(c.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.spec, err)
		}
		got, err := sp.Build(perEpoch, epochs)
		if err != nil {
			t.Fatalf("%q: Build: %v", c.spec, err)
		}
		for u := 1; u <= perEpoch*epochs+5; u++ {
			g, w := got.Rate(0.1, u), c.want.Rate(0.1, u)
			if g != w || math.IsNaN(g) {
				t.Fatalf("%q: rate at update %d = %v, want %v (built %#v)", c.spec, u, g, w, got)
			}
		}
	}
	sp, _ := Parse("warmup:1+plateau:0.5")
	s, err := sp.Build(perEpoch, epochs)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := s.(Warmup).Then.(*ReduceOnPlateau)
	if !ok || p.Factor != 0.5 {
		t.Fatalf("warmup+plateau built %#v", s)
	}
	if err := sp.Check(2); err != nil {
		t.Fatalf("warm-up of 1 epoch in 2: %v", err)
	}
	sp, _ = Parse("warmup:20+cosine")
	if err := sp.Check(20); err == nil {
		t.Fatal("Check accepted a warm-up as long as the run")
	}
	if _, err := sp.Build(perEpoch, epochs); err == nil || !strings.Contains(err.Error(), "leaves nothing") {
		t.Fatalf("warm-up as long as the run: err = %v", err)
	}
	if _, err := sp.Build(0, epochs); err == nil {
		t.Fatal("zero updates per epoch accepted")
	}
}

// TestCosineEnds checks the documented end points of the annealing
// schedules: Cosine reaches Min at update T+1, OneCycle starts at
// base/DivFactor, peaks at base and ends at base/(DivFactor·FinalDivFactor)
// and keeps it past Total, and Warmup starts at StartFactor·base.
func TestCosineEnds(t *testing.T) {
	c := Cosine{T: 40, Min: 0.002}
	if c.Rate(0.1, 1) != 0.1 || math.Abs(c.Rate(0.1, 41)-0.002) > 1e-17 {
		t.Fatalf("cosine ends %v, %v", c.Rate(0.1, 1), c.Rate(0.1, 41))
	}
	oc := NewOneCycle(100)
	peak := 0.0
	for u := 1; u <= 100; u++ {
		peak = max(peak, oc.Rate(1, u))
	}
	if math.Abs(oc.Rate(1, 1)-1.0/25) > 1e-15 || peak != 1 || math.Abs(oc.Rate(1, 100)-1.0/25/1e4) > 1e-18 || oc.Rate(1, 150) != oc.Rate(1, 100) {
		t.Fatalf("onecycle: first %v, peak %v, last %v, past the end %v", oc.Rate(1, 1), peak, oc.Rate(1, 100), oc.Rate(1, 150))
	}
	w := Warmup{Steps: 4, StartFactor: 0.2}
	if w.Rate(1, 1) != 0.2 || w.Rate(1, 4) != 0.8 || w.Rate(1, 5) != 1 {
		t.Fatalf("warmup: %v %v %v", w.Rate(1, 1), w.Rate(1, 4), w.Rate(1, 5))
	}
	// A zero-length first phase (PctStart·Total = 1) starts at the peak.
	if r := (OneCycle{Total: 10, PctStart: 0.1}).Rate(1, 1); r != 1 {
		t.Fatalf("onecycle with a one-update rise starts at %v", r)
	}
}

// TestScheduleRateAllocates checks that the annealing schedules allocate
// nothing per update: the optimizer asks for every group's rate on every
// step.
func TestScheduleRateAllocates(t *testing.T) {
	for _, s := range []Schedule{
		Cosine{T: 100, Min: 1e-3},
		OneCycle{Total: 100, PctStart: 0.3, ThreePhase: true},
		NewOneCycle(100),
		Warmup{Steps: 10, StartFactor: 0.1, Then: Cosine{T: 90}},
	} {
		u := 0
		if a := testing.AllocsPerRun(100, func() { u++; _ = s.Rate(0.1, u) }); a != 0 {
			t.Errorf("%#v: %v allocations per Rate", s, a)
		}
	}
}
