package schedule

import (
	"fmt"
	"math"
)

// Cosine anneals the step size from base to Min along half a cosine over
// T updates, like PyTorch's CosineAnnealingLR (T_max = T, eta_min = Min)
// stepped once per update: update t uses
//
//	α_t = Min + (base − Min)·(1 + cos(π·(t−1)/T))/2,
//
// so update 1 uses base and update T+1 uses Min. Past T+1 the formula is
// applied as it stands, as in PyTorch: the step size rises again towards
// base, which it reaches at update 2T+1; set T to the number of updates
// of the run. Min is an absolute step size shared by every group (0: anneal
// to zero).
type Cosine struct {
	T   int     // updates from base to Min (T_max); must be positive
	Min float64 // final step size (eta_min), absolute
}

// Rate implements Schedule.
func (s Cosine) Rate(base float64, t int) float64 {
	if s.T <= 0 {
		panic(fmt.Sprintf("schedule.Cosine: T = %d must be positive", s.T))
	}
	return s.Min + (base-s.Min)*(1+math.Cos(math.Pi*float64(t-1)/float64(s.T)))/2
}

// Warmup raises the step size linearly over the first Steps updates and
// then hands over to Then, whose clock starts after the warm-up. It is
// PyTorch's SequentialLR([LinearLR(start_factor=StartFactor,
// end_factor=1, total_iters=Steps), then], milestones=[Steps]) stepped
// once per update:
//
//	α_t = base·(StartFactor + (1 − StartFactor)·(t−1)/Steps)  for t ≤ Steps,
//	α_t = Then.Rate(base, t − Steps)                          for t > Steps.
//
// The warm-up therefore never quite reaches base (its last update uses
// base·(StartFactor + (1−StartFactor)·(Steps−1)/Steps)), and Then sees
// update 1 at update Steps+1 of the run: a Cosine with T = total − Steps
// reaches its floor right after the last update of a run of total updates
// (as Spec.Build sets it up), and MultiStep milestones count from
// the end of the warm-up. Then may be any Schedule
// (nil means Constant{}); a ReduceOnPlateau keeps being observed through
// the pointer the caller holds. StartFactor must be in [0, 1]; PyTorch's
// default is 1/3.
type Warmup struct {
	Steps       int      // updates of the warm-up (total_iters)
	StartFactor float64  // multiplier of base at update 1 (start_factor)
	Then        Schedule // schedule after the warm-up; nil: Constant{}
}

// Rate implements Schedule.
func (s Warmup) Rate(base float64, t int) float64 {
	if s.Steps < 0 || !(s.StartFactor >= 0 && s.StartFactor <= 1) {
		panic(fmt.Sprintf("schedule.Warmup: Steps = %d must not be negative and StartFactor = %v must be in [0, 1]", s.Steps, s.StartFactor))
	}
	if t <= s.Steps {
		return base * (s.StartFactor + (1-s.StartFactor)*float64(t-1)/float64(s.Steps))
	}
	if s.Then == nil {
		return base
	}
	return s.Then.Rate(base, t-s.Steps)
}

// SaveState implements Stateful: it saves Then's state when Then is
// Stateful (the warm-up itself depends only on the update counter).
func (s Warmup) SaveState(st Checkpoint, prefix string) {
	if th, ok := s.Then.(Stateful); ok {
		th.SaveState(st, prefix)
	}
}

// LoadState implements Stateful.
func (s Warmup) LoadState(st Checkpoint, prefix string) error {
	if th, ok := s.Then.(Stateful); ok {
		return th.LoadState(st, prefix)
	}
	return nil
}

// OneCycle is the one-cycle policy of Smith and Topin ("Super-Convergence",
// 2017) as PyTorch's OneCycleLR implements it, stepped once per update,
// with base as max_lr: the step size rises from base/DivFactor to base
// over the first PctStart·Total updates and then anneals to
// base/(DivFactor·FinalDivFactor) at update Total. With ThreePhase it
// instead returns to base/DivFactor symmetrically and anneals to the final
// value in a third phase. Linear selects linear instead of cosine
// annealing (anneal_strategy="linear").
//
// Update t uses PyTorch's step number t−1 and its phase boundaries
// (PctStart·Total − 1, 2·PctStart·Total − 2, Total − 1), so the rates
// agree with OneCycleLR(max_lr=base, total_steps=Total,
// pct_start=PctStart, div_factor=DivFactor,
// final_div_factor=FinalDivFactor, three_phase=ThreePhase) step by step.
// Past Total, where PyTorch raises an error, the final step size is kept.
// A phase of zero length (PyTorch divides by zero there) counts as
// finished. Momentum cycling (cycle_momentum) is not supported: the
// optimizers' momentum stays at its configured value. Zero DivFactor and
// FinalDivFactor mean PyTorch's defaults 25 and 1e4; PctStart must be in
// [0, 1] (PyTorch's default is 0.3, see NewOneCycle).
type OneCycle struct {
	Total          int     // updates of the cycle (total_steps); must be positive
	PctStart       float64 // fraction of Total spent rising (pct_start)
	DivFactor      float64 // initial step size is base/DivFactor (div_factor); 0: 25
	FinalDivFactor float64 // final is initial/FinalDivFactor (final_div_factor); 0: 1e4
	ThreePhase     bool    // three_phase: fall back to the initial step size, then anneal
	Linear         bool    // anneal_strategy "linear" instead of "cos"
}

// NewOneCycle returns a OneCycle over total updates with PyTorch's
// defaults: pct_start 0.3, div_factor 25, final_div_factor 1e4, two
// phases, cosine annealing.
func NewOneCycle(total int) OneCycle {
	return OneCycle{Total: total, PctStart: 0.3, DivFactor: 25, FinalDivFactor: 1e4}
}

// Rate implements Schedule.
func (s OneCycle) Rate(base float64, t int) float64 {
	if s.Total <= 0 || !(s.PctStart >= 0 && s.PctStart <= 1) {
		panic(fmt.Sprintf("schedule.OneCycle: Total = %d must be positive and PctStart = %v in [0, 1]", s.Total, s.PctStart))
	}
	div, final := s.DivFactor, s.FinalDivFactor
	if div == 0 {
		div = 25
	}
	if final == 0 {
		final = 1e4
	}
	initial := base / div
	minLR := initial / final
	type phase struct{ end, from, to float64 }
	total := float64(s.Total)
	// float64(...) rounds the products before the subtraction, as
	// PyTorch does: without it Go may fuse them (FMA on arm64), and
	// 0.1·10 − 1 would not be 0.
	buf := [3]phase{{float64(s.PctStart*total) - 1, initial, base}}
	phases := buf[:2]
	if s.ThreePhase {
		phases = buf[:3]
		phases[1] = phase{float64(2*s.PctStart*total) - 2, base, initial}
		phases[2] = phase{total - 1, initial, minLR}
	} else {
		phases[1] = phase{total - 1, base, minLR}
	}
	step := float64(min(t, s.Total) - 1)
	start := 0.0
	for i, p := range phases {
		if step <= p.end || i == len(phases)-1 {
			pct := 1.0
			if p.end != start {
				pct = (step - start) / (p.end - start)
			}
			if s.Linear {
				return (p.to-p.from)*pct + p.from
			}
			return p.to + (p.from-p.to)/2.0*(math.Cos(math.Pi*pct)+1)
		}
		start = p.end
	}
	panic("unreachable")
}
