package autograd

import "fmt"

// Context is the execution state of a computation: whether ops record the
// graph for Backward, and where the storage of their results comes from.
// It is a value the caller owns; nothing in this package is process-wide,
// so goroutines that train and serve with their own contexts (or with none)
// never interfere.
//
// A tensor is bound to at most one context (see In). An op inherits the
// context of its inputs: the first non-nil context among them (inputs
// bound to two different non-nil contexts make it panic), and binds its
// result to it. A nil *Context is the default, as in PyTorch: ops record
// the graph whenever an input requires a gradient and allocate from the
// heap. Leaves created by New, FromSlice and friends, parameters included,
// are bound to no context.
//
// A training step binds its input batch to a context with an arena and
// resets the arena before the step:
//
//	ctx := &autograd.Context{Arena: autograd.NewArena()}
//	for step := range steps {
//		ctx.Arena.Reset()
//		opt.ZeroGrad()
//		x := autograd.FromSlice(batch(step), n, 3, 32, 32).In(ctx)
//		loss := autograd.CrossEntropy(model.Forward(x), labels(step))
//		loss.Backward()
//		opt.Step()
//	}
//
// Evaluation and inference use a context with NoGrad set (optionally with
// an arena of its own).
//
// The fields must not be changed while tensors bound to the context are in
// use. A context with an arena is used by one goroutine at a time; one
// without an arena is only read by ops and may be shared by goroutines.
type Context struct {
	// Arena, when non-nil, supplies the storage of op results and the
	// gradient buffers of tensors bound to this context (a bound leaf
	// that requires a gradient included: its Grad is invalid after the
	// arena's Reset, like the op results).
	Arena *Arena
	// NoGrad switches graph recording off, as torch.no_grad() does: ops
	// that run in this context record nothing, and their results never
	// require a gradient.
	NoGrad bool
	// Profile, when non-nil, accumulates the time of the ops that run in
	// this context, forward and backward (see Profile).
	Profile *Profile
	// Precision is the arithmetic of the matrix products of convolutions,
	// Linear and MatMul in this context (see Precision): FP32, the zero
	// value, or BF16 for training in bfloat16 with float32 master
	// weights. Gradient checks and evaluation run in FP32.
	Precision Precision
}

// In binds t (a leaf or an op result) to the context c and returns t. Ops
// on t then run in c. A nil c unbinds t.
func (t *Tensor) In(c *Context) *Tensor {
	t.ctx = c
	return t
}

// Context returns the context t is bound to, or nil.
func (t *Tensor) Context() *Context { return t.ctx }

// New returns a zero-filled tensor of the given shape bound to c, its
// storage taken from c's arena if it has one. c may be nil: the tensor
// then comes from the heap, as from the package-level New.
func (c *Context) New(shape ...int) *Tensor {
	return &Tensor{Data: c.alloc(numel("New", shape), true), shape: cloneInts(shape), ctx: c}
}

// alloc returns a buffer for n elements from c's arena, or a fresh zeroed
// slice when c is nil or has no arena. zero requests zeroed memory; ops
// that overwrite every element pass false.
func (c *Context) alloc(n int, zero bool) []float32 {
	if c != nil && c.Arena != nil && n > 0 {
		return c.Arena.get(n, zero)
	}
	return make([]float32, n)
}

// release hands b, which no tensor refers to any more, back to c's arena
// if it came from there.
func (c *Context) release(b []float32) {
	if c != nil && c.Arena != nil {
		c.Arena.release(b)
	}
}

// empty returns a tensor bound to c whose elements the caller overwrites
// completely; its contents are unspecified when c has an arena.
func (c *Context) empty(shape ...int) *Tensor {
	return &Tensor{Data: c.alloc(numel("New", shape), false), shape: cloneInts(shape), ctx: c}
}

// grads reports whether ops in c record the graph.
func (c *Context) grads() bool { return c == nil || !c.NoGrad }

// contextOf returns the context an op named op runs in: the first non-nil
// context among its inputs (nil inputs are skipped). It panics if two
// inputs are bound to different non-nil contexts.
func contextOf(op string, inputs ...*Tensor) *Context {
	var c *Context
	for _, t := range inputs {
		if t == nil || t.ctx == nil {
			continue
		}
		if c == nil {
			c = t.ctx
		} else if t.ctx != c {
			panic(fmt.Sprintf("autograd.%s: inputs are bound to different contexts (%p and %p); bind them to one with In", op, c, t.ctx))
		}
	}
	return c
}
