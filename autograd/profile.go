package autograd

import (
	"cmp"
	"slices"
	"time"
)

// Profile accumulates the wall time of ops by name, in the forward pass
// and in the backward pass, as PyTorch's autograd profiler does: set it as
// a Context's Profile, call Mark at the start of every forward pass, run
// the steps, then read Ops. Forward time is the time from the previous op
// of the context (or the last Mark) to the moment an op records its result,
// so it includes the module code between two ops; backward time is the time
// each op's backward function takes. A Profile belongs to one goroutine's
// context at a time. A nil *Profile (the default) profiles nothing.
type Profile struct {
	mark time.Time
	ops  map[string]*OpTime
}

// OpTime is the time spent in one kind of op.
type OpTime struct {
	Op                string        // the op's name, as in panics ("Conv2d", "BatchNormReLU", ...)
	Calls             int           // forward calls
	Forward, Backward time.Duration // wall time in the forward and the backward pass
}

// NewProfile returns an empty profile whose forward clock starts now.
func NewProfile() *Profile {
	return &Profile{mark: time.Now(), ops: map[string]*OpTime{}}
}

// Mark restarts the forward clock: the time until the next op records its
// result counts to that op. Call it when a forward pass starts, so that
// the time between steps (data loading, the optimizer) is not counted.
func (p *Profile) Mark() { p.mark = time.Now() }

// Reset forgets every op's time and restarts the forward clock (to leave
// out warm-up steps, say).
func (p *Profile) Reset() {
	clear(p.ops)
	p.Mark()
}

// Ops returns the time of every op, the most expensive (forward plus
// backward) first, ties by name.
func (p *Profile) Ops() []OpTime {
	out := make([]OpTime, 0, len(p.ops))
	for _, o := range p.ops {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b OpTime) int {
		if c := cmp.Compare(b.Forward+b.Backward, a.Forward+a.Backward); c != 0 {
			return c
		}
		return cmp.Compare(a.Op, b.Op)
	})
	return out
}

// op returns the entry of the op called name.
func (p *Profile) op(name string) *OpTime {
	o := p.ops[name]
	if o == nil {
		o = &OpTime{Op: name}
		p.ops[name] = o
	}
	return o
}

// forward charges the time since the last mark to the op called name.
func (p *Profile) forward(name string) {
	now := time.Now()
	o := p.op(name)
	o.Calls++
	o.Forward += now.Sub(p.mark)
	p.mark = now
}

// backward runs the backward function of the op called name and charges
// its time to it.
func (p *Profile) backward(name string, run func()) {
	start := time.Now()
	run()
	p.op(name).Backward += time.Since(start)
}

// profile returns the Profile of c, or nil.
func (c *Context) profile() *Profile {
	if c == nil {
		return nil
	}
	return c.Profile
}
