package schedule

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Syntax describes the schedules Parse accepts, for flag
// help texts.
const Syntax = "const, multistep:E1,E2[:GAMMA], step:EVERY:GAMMA, invsqrt[:OFFSET], plateau:FACTOR, cosine[:FLOOR], " +
	"onecycle[:PCT[:DIV[:FINALDIV]]][:three][:linear], each optionally preceded by warmup:EPOCHS[:START]+"

// Spec is a step-size schedule described in epochs, as programs
// take it from a flag. Parse reads one; Build turns it into a
// Schedule once the number of updates per epoch and of epochs is known.
type Spec struct {
	// Kind is const, multistep, step, invsqrt, plateau, cosine or
	// onecycle.
	Kind string
	// Milestones are the epochs after which multistep multiplies by Gamma.
	Milestones []int
	// Every is the number of epochs between the decays of step.
	Every int
	// Gamma is the decay factor of multistep and step.
	Gamma float64
	// Factor is the reduction factor of plateau.
	Factor float64
	// Offset is invsqrt's offset: base/sqrt(t + Offset).
	Offset float64
	// Floor is cosine's final step size (eta_min).
	Floor float64
	// OneCycle holds onecycle's PctStart, DivFactor, FinalDivFactor,
	// ThreePhase and Linear; Build sets Total.
	OneCycle OneCycle
	// WarmupEpochs is the length of the linear warm-up in epochs (0: no
	// warm-up); it may be fractional.
	WarmupEpochs float64
	// WarmupStart is the warm-up's start factor.
	WarmupStart float64
}

// Parse parses a schedule description (see Syntax):
//
//	const                         the base step size throughout
//	multistep:E1,E2[:GAMMA]       times GAMMA (default 0.1) after epochs E1, E2, …
//	step:EVERY:GAMMA              times GAMMA every EVERY epochs
//	invsqrt[:OFFSET]              base/sqrt(t + OFFSET), t = update (InvSqrt)
//	plateau:FACTOR                times FACTOR after an epoch whose observed metric did not improve (ReduceOnPlateau)
//	cosine[:FLOOR]                cosine annealing per update from base to FLOOR (default 0) at the end of the run (Cosine)
//	onecycle[:PCT[:DIV[:FINALDIV]]][:three][:linear]
//	                              one cycle over the run with base as the peak (OneCycle; defaults 0.3, 25, 1e4)
//	warmup:EPOCHS[:START]+S       linear warm-up from START·base (default 1/3) over EPOCHS epochs, then S (Warmup)
//
// After a warm-up, S's clock starts at the end of the warm-up (multistep
// milestones count from there; cosine and onecycle span the rest of the
// run), as with PyTorch's SequentialLR. "warmup:EPOCHS[:START]" alone is
// followed by const.
func Parse(s string) (Spec, error) {
	bad := func(why string) (Spec, error) {
		return Spec{}, fmt.Errorf("schedule %q: %s (want %s)", s, why, Syntax)
	}
	var sp Spec
	rest := s
	if strings.HasPrefix(s, "warmup") {
		w, after, found := strings.Cut(s, "+")
		rest = "const"
		if found {
			rest = after
		}
		parts := strings.Split(w, ":")
		if parts[0] != "warmup" || len(parts) < 2 || len(parts) > 3 {
			return bad("warmup needs EPOCHS")
		}
		e, err := strconv.ParseFloat(parts[1], 64)
		if err != nil || !(e > 0) || math.IsInf(e, 0) {
			return bad(fmt.Sprintf("warm-up epochs %q is not a positive number", parts[1]))
		}
		sp.WarmupEpochs, sp.WarmupStart = e, 1.0/3
		if len(parts) == 3 {
			f, err := strconv.ParseFloat(parts[2], 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return bad(fmt.Sprintf("warm-up start factor %q not in [0, 1]", parts[2]))
			}
			sp.WarmupStart = f
		}
		if strings.HasPrefix(rest, "warmup") {
			return bad("only one warm-up")
		}
	}
	parts := strings.Split(rest, ":")
	num := func(i int, what string, ok func(float64) bool) (float64, error) {
		v, err := strconv.ParseFloat(parts[i], 64)
		if err != nil || math.IsInf(v, 0) || !ok(v) {
			return 0, fmt.Errorf("%s %q", what, parts[i])
		}
		return v, nil
	}
	sp.Kind = parts[0]
	switch parts[0] {
	case "const":
		if len(parts) != 1 {
			return bad("const takes no arguments")
		}
	case "invsqrt":
		if len(parts) > 2 {
			return bad("invsqrt takes at most an offset")
		}
		if len(parts) == 2 {
			o, err := num(1, "offset", func(v float64) bool { return v >= 0 })
			if err != nil {
				return bad(err.Error() + " is not a non-negative number")
			}
			sp.Offset = o
		}
	case "multistep":
		if len(parts) < 2 || len(parts) > 3 {
			return bad("multistep needs milestones")
		}
		sp.Gamma = 0.1
		for _, f := range strings.Split(parts[1], ",") {
			e, err := strconv.Atoi(f)
			if err != nil || e < 1 {
				return bad(fmt.Sprintf("milestone %q is not a positive epoch", f))
			}
			if len(sp.Milestones) > 0 && e <= sp.Milestones[len(sp.Milestones)-1] {
				return bad("milestones must increase")
			}
			sp.Milestones = append(sp.Milestones, e)
		}
		if len(parts) == 3 {
			g, err := num(2, "gamma", func(v float64) bool { return v > 0 && v <= 1 })
			if err != nil {
				return bad(err.Error() + " not in (0, 1]")
			}
			sp.Gamma = g
		}
	case "step":
		if len(parts) != 3 {
			return bad("step needs EVERY:GAMMA")
		}
		e, err := strconv.Atoi(parts[1])
		if err != nil || e < 1 {
			return bad(fmt.Sprintf("EVERY %q is not a positive number of epochs", parts[1]))
		}
		g, err := num(2, "gamma", func(v float64) bool { return v > 0 && v <= 1 })
		if err != nil {
			return bad(err.Error() + " not in (0, 1]")
		}
		sp.Every, sp.Gamma = e, g
	case "plateau":
		if len(parts) != 2 {
			return bad("plateau needs FACTOR")
		}
		f, err := num(1, "factor", func(v float64) bool { return v > 0 && v < 1 })
		if err != nil {
			return bad(err.Error() + " not in (0, 1)")
		}
		sp.Factor = f
	case "cosine":
		if len(parts) > 2 {
			return bad("cosine takes at most a floor")
		}
		if len(parts) == 2 {
			f, err := num(1, "floor", func(v float64) bool { return v >= 0 })
			if err != nil {
				return bad(err.Error() + " is not a non-negative step size")
			}
			sp.Floor = f
		}
	case "onecycle":
		oc := NewOneCycle(0)
		args := parts[1:]
		for len(args) > 0 && (args[len(args)-1] == "three" || args[len(args)-1] == "linear") {
			switch args[len(args)-1] {
			case "three":
				oc.ThreePhase = true
			case "linear":
				oc.Linear = true
			}
			args = args[:len(args)-1]
		}
		if len(args) > 3 {
			return bad("onecycle takes at most PCT:DIV:FINALDIV, then three and linear")
		}
		checks := []struct {
			dst  *float64
			what string
			ok   func(float64) bool
		}{
			{&oc.PctStart, "PCT", func(v float64) bool { return v >= 0 && v <= 1 }},
			{&oc.DivFactor, "DIV", func(v float64) bool { return v > 0 }},
			{&oc.FinalDivFactor, "FINALDIV", func(v float64) bool { return v > 0 }},
		}
		for i := range args {
			v, err := num(i+1, checks[i].what, checks[i].ok)
			if err != nil {
				return bad(err.Error() + " out of range (PCT in [0, 1], DIV and FINALDIV positive)")
			}
			*checks[i].dst = v
		}
		sp.OneCycle = oc
	default:
		return bad("unknown schedule")
	}
	return sp, nil
}

// Check reports an error when sp cannot describe a run of epochs epochs:
// when its warm-up would take the whole run.
func (sp Spec) Check(epochs int) error {
	if sp.WarmupEpochs >= float64(epochs) {
		return fmt.Errorf("schedule: warm-up of %v epochs leaves nothing of a run of %d epochs", sp.WarmupEpochs, epochs)
	}
	return nil
}

// Build returns the Schedule sp describes for a run of epochs epochs of
// perEpoch updates each. The warm-up lasts round(WarmupEpochs·perEpoch)
// updates (at least one); cosine and onecycle span the updates after it.
func (sp Spec) Build(perEpoch, epochs int) (Schedule, error) {
	if perEpoch <= 0 || epochs <= 0 {
		return nil, fmt.Errorf("schedule: schedule over %d epochs of %d updates: both must be positive", epochs, perEpoch)
	}
	warm := 0
	if sp.WarmupEpochs > 0 {
		warm = max(1, int(math.Round(sp.WarmupEpochs*float64(perEpoch))))
	}
	left := perEpoch*epochs - warm
	if left <= 0 {
		return nil, fmt.Errorf("schedule: warm-up of %v epochs (%d updates) leaves nothing of a run of %d epochs of %d updates", sp.WarmupEpochs, warm, epochs, perEpoch)
	}
	var s Schedule
	switch sp.Kind {
	case "const", "":
		s = Constant{}
	case "multistep":
		s = EpochMultiStep(perEpoch, sp.Gamma, sp.Milestones...)
	case "step":
		s = StepDecay{Every: sp.Every * perEpoch, Gamma: sp.Gamma}
	case "invsqrt":
		s = InvSqrt{Offset: sp.Offset}
	case "plateau":
		s = NewReduceOnPlateau(sp.Factor, 0)
	case "cosine":
		s = Cosine{T: left, Min: sp.Floor}
	case "onecycle":
		oc := sp.OneCycle
		oc.Total = left
		s = oc
	default:
		return nil, fmt.Errorf("schedule: unknown schedule kind %q", sp.Kind)
	}
	if warm > 0 {
		s = Warmup{Steps: warm, StartFactor: sp.WarmupStart, Then: s}
	}
	return s, nil
}
