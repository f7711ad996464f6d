package autograd

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestProfileCountsOps runs two steps of a small convolutional network in
// a profiled context and checks that every op is charged once per forward
// call with forward and backward time, and that profiling changes no
// result.
func TestProfileCountsOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(shape ...int) *Tensor {
		x := New(shape...)
		for i := range x.Data {
			x.Data[i] = float32(rng.NormFloat64())
		}
		return x
	}
	x, w, fw, fb := randn(2, 3, 6, 6), randn(4, 3, 3, 3), randn(5, 4), randn(5)
	for _, p := range []*Tensor{w, fw, fb} {
		p.SetRequiresGrad(true)
	}
	step := func(ctx *Context) (float32, []float32) {
		w.Grad = nil
		h := ReLU(Conv2d(x.In(ctx), w, nil, 1, 1, 1))
		loss := CrossEntropy(Linear(Reshape(GlobalAvgPool2d(h), 2, 4), fw, fb), []int{1, 3})
		loss.Backward()
		return loss.Data[0], slices.Clone(w.Grad)
	}
	plainLoss, plainGrad := step(&Context{})
	p := NewProfile()
	ctx := &Context{Profile: p}
	for range 2 {
		p.Mark()
		loss, grad := step(ctx)
		if loss != plainLoss || !slices.Equal(grad, plainGrad) {
			t.Fatalf("profiled step: loss %v, grad %v; unprofiled %v, %v", loss, grad[:3], plainLoss, plainGrad[:3])
		}
	}
	ops := p.Ops()
	byName := map[string]OpTime{}
	for _, o := range ops {
		byName[o.Op] = o
	}
	for _, name := range []string{"Conv2d", "ReLU", "GlobalAvgPool2d", "Linear"} {
		o, ok := byName[name]
		if !ok {
			t.Fatalf("no entry for %s in %+v", name, ops)
		}
		if o.Calls != 2 || o.Forward <= 0 || o.Backward <= 0 {
			t.Errorf("%s: %+v, want 2 calls with forward and backward time", name, o)
		}
	}
	for i := 1; i < len(ops); i++ {
		if ops[i].Forward+ops[i].Backward > ops[i-1].Forward+ops[i-1].Backward {
			t.Errorf("Ops not sorted by total time: %+v", ops)
		}
	}
}
