package autograd_test

import (
	"testing"

	"github.com/proxgen/proxgen/autograd"
)

// TestArenaStepsMatchPlainSteps runs the same small training computation
// with and without an arena and checks identical gradients and losses,
// including after the arena's buffers have been recycled several times.
func TestArenaStepsMatchPlainSteps(t *testing.T) {
	rng := newRNG(7)
	x := autograd.RandN(rng, 8, 5)
	w1, b1 := param(rng, 6, 5), param(rng, 6)
	w2 := param(rng, 1, 6)
	step := func(ctx *autograd.Context) float32 {
		h := autograd.Tanh(autograd.Linear(x.In(ctx), w1, b1))
		loss := autograd.Mean(autograd.Mul(autograd.Linear(h, w2, nil), autograd.Linear(h, w2, nil)))
		loss.Backward()
		return loss.Item()
	}
	want := step(nil)
	wantG := append([]float32(nil), w1.Grad...)
	arena := autograd.NewArena()
	ctx := &autograd.Context{Arena: arena}
	for i := 0; i < 3; i++ {
		w1.Grad, b1.Grad, w2.Grad = nil, nil, nil
		arena.Reset()
		got := step(ctx)
		if got != want || !equal(w1.Grad, wantG) {
			t.Fatalf("step %d under arena: loss %v grad %v, want %v %v", i, got, w1.Grad[:3], want, wantG[:3])
		}
	}
	if arena.Bytes() == 0 {
		t.Fatal("arena holds no buffers after use")
	}
}
