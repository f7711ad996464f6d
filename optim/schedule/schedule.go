package schedule

import (
	"fmt"
	"math"
)

// Schedule maps a base step size to the step size α_t of update t (t >= 1).
// Schedules that change with observations (ReduceOnPlateau) also implement
// Stateful so optimizer checkpoints include them.
type Schedule interface {
	// Rate returns α_t for a group whose LR is base.
	Rate(base float64, t int) float64
}

// Constant keeps α_t = base.
type Constant struct{}

// Rate implements Schedule.
func (Constant) Rate(base float64, _ int) float64 { return base }

// MultiStep multiplies the step size by Gamma after each milestone: update t
// uses base·Gamma^k with k the number of milestones m < t. Milestones count
// updates; for epoch milestones multiply by the updates per epoch (update t
// belongs to epoch (t−1)/perEpoch, so this matches PyTorch's MultiStepLR
// stepped once per epoch).
type MultiStep struct {
	Milestones []int   // updates after which the step size drops, increasing
	Gamma      float64 // factor applied at each milestone
}

// EpochMultiStep returns a MultiStep with milestones given in epochs of
// perEpoch updates each.
func EpochMultiStep(perEpoch int, gamma float64, epochs ...int) MultiStep {
	ms := make([]int, len(epochs))
	for i, e := range epochs {
		ms[i] = e * perEpoch
	}
	return MultiStep{Milestones: ms, Gamma: gamma}
}

// Rate implements Schedule.
func (s MultiStep) Rate(base float64, t int) float64 {
	r := base
	for _, m := range s.Milestones {
		if t > m {
			r *= s.Gamma
		}
	}
	return r
}

// StepDecay multiplies the step size by Gamma every Every updates:
// α_t = base·Gamma^⌊(t−1)/Every⌋.
type StepDecay struct {
	Every int     // updates between decays; must be positive
	Gamma float64 // factor applied every Every updates
}

// Rate implements Schedule.
func (s StepDecay) Rate(base float64, t int) float64 {
	if s.Every <= 0 {
		panic(fmt.Sprintf("schedule.StepDecay: Every = %d must be positive", s.Every))
	}
	return base * math.Pow(s.Gamma, float64((t-1)/s.Every))
}

// InvSqrt is α_t = base/sqrt(t + Offset): Offset 0 gives the classical
// 1/√t decay, Offset 4 the per-iteration schedules of the official
// Prox-SGD code, ε0/(t+4)^0.5.
type InvSqrt struct {
	Offset float64 // added to t under the square root
}

// Rate implements Schedule.
func (s InvSqrt) Rate(base float64, t int) float64 {
	return base / math.Sqrt(float64(t)+s.Offset)
}

// ReduceOnPlateau scales the step size by Factor whenever the observed
// metric (for example the validation loss, reported once per epoch with
// Observe) has not improved for more than Patience observations, like
// PyTorch's ReduceLROnPlateau in "min" mode with a relative threshold. The
// LSTM experiment of the paper divides by 1.2 whenever the validation loss
// does not decrease: NewReduceOnPlateau(1/1.2, 0).
type ReduceOnPlateau struct {
	// Factor multiplies the scale on each reduction (0 < Factor < 1).
	Factor float64
	// Patience is how many non-improving observations are tolerated.
	Patience int
	// Threshold is the relative improvement that counts: metric <
	// best·(1 − Threshold).
	Threshold float64
	// MinScale bounds the scale from below.
	MinScale float64

	scale float64 // current multiplier; 0 means 1 (not yet observed)
	best  float64
	bad   int
	seen  bool
}

// NewReduceOnPlateau returns a schedule that multiplies the step size by
// factor after more than patience observations without improvement.
func NewReduceOnPlateau(factor float64, patience int) *ReduceOnPlateau {
	if !(factor > 0 && factor < 1) {
		panic(fmt.Sprintf("schedule.NewReduceOnPlateau: factor = %v must be in (0, 1)", factor))
	}
	return &ReduceOnPlateau{Factor: factor, Patience: patience, scale: 1}
}

// Scale returns the current multiplier of the base step size.
func (s *ReduceOnPlateau) Scale() float64 {
	if s.scale == 0 {
		return 1
	}
	return s.scale
}

// Rate implements Schedule.
func (s *ReduceOnPlateau) Rate(base float64, _ int) float64 { return base * s.Scale() }

// Observe records a metric value (lower is better) and reports whether the
// step size was reduced.
func (s *ReduceOnPlateau) Observe(metric float64) bool {
	if !s.seen || metric < s.best*(1-s.Threshold) {
		s.best, s.bad, s.seen = metric, 0, true
		return false
	}
	s.bad++
	if s.bad <= s.Patience {
		return false
	}
	s.bad = 0
	ns := s.Scale() * s.Factor
	if ns < s.MinScale {
		ns = s.MinScale
	}
	reduced := ns != s.Scale()
	s.scale = ns
	return reduced
}

// SaveState implements Stateful.
func (s *ReduceOnPlateau) SaveState(st Checkpoint, prefix string) {
	st.SetFloat64(prefix+"scale", s.Scale())
	st.SetFloat64(prefix+"best", s.best)
	st.SetInt(prefix+"bad", int64(s.bad))
	seen := int64(0)
	if s.seen {
		seen = 1
	}
	st.SetInt(prefix+"seen", seen)
}

// LoadState implements Stateful.
func (s *ReduceOnPlateau) LoadState(st Checkpoint, prefix string) error {
	scale, err := st.Float64(prefix + "scale")
	if err != nil {
		return err
	}
	best, err := st.Float64(prefix + "best")
	if err != nil {
		return err
	}
	bad, err := st.Int(prefix + "bad")
	if err != nil {
		return err
	}
	seen, err := st.Int(prefix + "seen")
	if err != nil {
		return err
	}
	s.scale, s.best, s.bad, s.seen = scale, best, int(bad), seen != 0
	return nil
}
