package autograd_test

import (
	"math"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
)

// TestContextNoGrad checks that ops in a NoGrad context record nothing,
// even on parameters that require a gradient, and that the same ops
// without a context do record.
func TestContextNoGrad(t *testing.T) {
	rng := newRNG(80)
	w, b := param(rng, 3, 4), param(rng, 3)
	ctx := &autograd.Context{NoGrad: true}
	x := autograd.RandN(rng, 5, 4).In(ctx)
	y := autograd.CrossEntropy(autograd.ReLU(autograd.Linear(x, w, b)), []int{0, 1, 2, 0, 1})
	if y.RequiresGrad() || !y.IsLeaf() || y.Context() != ctx {
		t.Fatalf("NoGrad context: requires grad %v, leaf %v, context %p (want %p)", y.RequiresGrad(), y.IsLeaf(), y.Context(), ctx)
	}
	mustPanic(t, func() { y.Backward() }, "autograd.Backward", "does not require a gradient")
	if w.Grad != nil || b.Grad != nil {
		t.Error("a NoGrad computation produced parameter gradients")
	}
	// A leaf that requires a gradient does not change that.
	xg := autograd.RandN(rng, 5, 4).RequireGrad().In(ctx)
	if autograd.Mul(xg, xg).RequiresGrad() {
		t.Error("an op on a leaf requiring a gradient recorded in a NoGrad context")
	}
	// Without a context, the same ops record the graph.
	y = autograd.Sum(autograd.ReLU(autograd.Linear(autograd.FromSlice(x.Data, 5, 4), w, b)))
	if !y.RequiresGrad() || y.Context() != nil {
		t.Fatal("ops without a context did not record the graph")
	}
	y.Backward()
	if w.Grad == nil {
		t.Error("no parameter gradient without a context")
	}
}

// TestContextMixedPanics checks that an op whose inputs are bound to two
// different contexts panics naming the op, and that inputs without a
// context join the context of the others.
func TestContextMixedPanics(t *testing.T) {
	c1, c2 := &autograd.Context{}, &autograd.Context{NoGrad: true}
	a := autograd.New(2, 3).In(c1)
	b := autograd.New(2, 3).In(c2)
	mustPanic(t, func() { autograd.Add(a, b) }, "autograd.Add", "different contexts")
	mustPanic(t, func() { autograd.Concat(0, a, autograd.New(2, 3), b) }, "autograd.Concat", "different contexts")
	mustPanic(t, func() { autograd.Linear(a, autograd.New(4, 3), autograd.New(4).In(c2)) }, "autograd.Linear", "different contexts")
	mustPanic(t, func() { autograd.Embedding(c2, autograd.New(5, 3).In(c1), []int{1}) }, "autograd.Embedding", "differ")
	if got := autograd.Mul(autograd.New(2, 3), a).Context(); got != c1 {
		t.Errorf("op on an unbound and a bound input runs in %p, want %p", got, c1)
	}
	if got := autograd.Embedding(c2, autograd.New(5, 3), []int{1}).Context(); got != c2 {
		t.Errorf("Embedding runs in %p, want the given %p", got, c2)
	}
}

// TestContextBinding checks In, Detach, Clone and Context.New.
func TestContextBinding(t *testing.T) {
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x := autograd.New(2, 2).In(ctx)
	if x.Context() != ctx || x.Detach().Context() != ctx {
		t.Error("In or Detach lost the context")
	}
	if x.Clone().Context() != nil || x.In(nil).Context() != nil {
		t.Error("Clone or In(nil) kept the context")
	}
	var none *autograd.Context
	z := none.New(3, 1)
	if z.Context() != nil || !slices.Equal(z.Shape(), []int{3, 1}) || !slices.Equal(z.Data, []float32{0, 0, 0}) {
		t.Errorf("nil Context.New: %v bound to %p", z, z.Context())
	}
}

// convNet is a small network of convolutions, batch norm, pooling and a
// classifier; it returns the loss and its gradients for the input batch
// bound to ctx, and the logits.
func convNet(x *autograd.Tensor, ps []*autograd.Tensor, rm, rv *autograd.Tensor, training bool) (loss, logits *autograd.Tensor) {
	h := autograd.Conv2d(x, ps[0], ps[1], 1, 1, 1)
	h = autograd.BatchNormReLU(h, ps[2], ps[3], rm, rv, training, 0.1, 1e-5)
	h = autograd.MaxPool2d(h, 2, 2, 0)
	h = autograd.Dropout(h, 0.25, newRNG(3), training)
	logits = autograd.Linear(autograd.Flatten(autograd.GlobalAvgPool2d(h)), ps[4], ps[5])
	return autograd.CrossEntropy(logits, []int{1, 0, 2, 1}), logits
}

// TestContextResultsIdentical checks bit-identical losses, logits and
// gradients of a network step without a context and in a context with an
// arena whose recycled buffers hold stale data, and identical logits in
// evaluation mode with and without a NoGrad context.
func TestContextResultsIdentical(t *testing.T) {
	rng := newRNG(81)
	data := autograd.RandN(rng, 4, 2, 6, 6).Data
	ps := []*autograd.Tensor{param(rng, 5, 2, 3, 3), param(rng, 5), param(rng, 5), param(rng, 5), param(rng, 3, 5), param(rng, 3)}
	step := func(ctx *autograd.Context) [][]float32 {
		for _, p := range ps {
			p.Grad = nil
		}
		rm, rv := autograd.New(5), autograd.Full(1, 5)
		loss, logits := convNet(autograd.FromSlice(data, 4, 2, 6, 6).In(ctx), ps, rm, rv, true)
		loss.Backward()
		out := [][]float32{slices.Clone(loss.Data), slices.Clone(logits.Data), rm.Data, rv.Data}
		for _, p := range ps {
			out = append(out, p.Grad)
		}
		return out
	}
	want := step(nil)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for pass := range 3 {
		ctx.Arena.Reset()
		got := step(ctx)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("pass %d: value %d differs in the arena context", pass, i)
			}
		}
		// Leave NaNs in the arena's buffers for the next pass.
		ctx.Arena.Reset()
		for range 40 {
			d := ctx.New(4, 5, 6, 6).Data
			for i := range d {
				d[i] = float32(math.NaN())
			}
		}
	}

	rm, rv := autograd.RandU(rng, -1, 1, 5), autograd.RandU(rng, 0.5, 2, 5)
	_, eval := convNet(autograd.FromSlice(data, 4, 2, 6, 6), ps, rm, rv, false)
	noGrad := &autograd.Context{NoGrad: true, Arena: ctx.Arena}
	for pass := range 2 {
		noGrad.Arena.Reset()
		_, got := convNet(autograd.FromSlice(data, 4, 2, 6, 6).In(noGrad), ps, rm, rv, false)
		if !slices.Equal(got.Data, eval.Data) || got.RequiresGrad() {
			t.Fatalf("pass %d: evaluation in a NoGrad arena context differs (or recorded the graph)", pass)
		}
	}
}

// TestBackwardDeepGraph runs Backward through a chain of 50,000 ops,
// which a recursive graph walk would not survive on a small stack, and
// through a graph whose nodes are reached along many paths.
func TestBackwardDeepGraph(t *testing.T) {
	x := autograd.FromSlice([]float32{1, 2}, 2).RequireGrad()
	y := x
	for range 50000 {
		y = autograd.AddScalar(y, 1)
	}
	autograd.Sum(y).Backward()
	if !slices.Equal(x.Grad, []float32{1, 1}) {
		t.Fatalf("chain: grad %v, want [1 1]", x.Grad)
	}
	// y_{k+1} = y_k + y_k doubles the gradient at every level.
	x.Grad = nil
	y = x
	for range 20 {
		y = autograd.Add(y, y)
	}
	autograd.Sum(y).Backward()
	if want := float32(1 << 20); !slices.Equal(x.Grad, []float32{want, want}) {
		t.Fatalf("doubling: grad %v, want %v", x.Grad, want)
	}
}
