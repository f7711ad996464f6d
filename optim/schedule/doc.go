// Package schedule holds the step-size schedules of ProxGen and its
// baselines (Section 4 and Appendix B of the paper): the factor α_t that
// an optimizer multiplies a group's base step size by at update t.
// Constant, MultiStep, StepDecay and InvSqrt are fixed in t; the annealing
// schedules Cosine, Warmup and OneCycle follow PyTorch's schedulers step
// by step (checked against PyTorch 1.13, testdata/torch_schedules.py);
// ReduceOnPlateau reacts to an observed metric and so keeps state, which
// it saves into an optimizer checkpoint (Stateful). Spec is a schedule
// described in epochs, as programs take it from a flag (Parse, Syntax).
package schedule

// Checkpoint is where a Stateful schedule keeps its scalars in an
// optimizer checkpoint; *optim.State implements it.
type Checkpoint interface {
	// SetFloat64 stores v bit-exactly under key.
	SetFloat64(key string, v float64)
	// Float64 returns the value stored with SetFloat64, or an error
	// naming the missing key.
	Float64(key string) (float64, error)
	// SetInt stores v under key.
	SetInt(key string, v int64)
	// Int returns the value stored with SetInt, or an error naming the
	// missing key.
	Int(key string) (int64, error)
}

// Stateful is implemented by schedules whose state must survive a
// checkpoint. SaveState writes entries whose names start with prefix;
// LoadState reads them back or returns an error naming a missing entry.
type Stateful interface {
	SaveState(c Checkpoint, prefix string)
	LoadState(c Checkpoint, prefix string) error
}
