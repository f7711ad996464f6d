package autograd

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
)

// fromArena reports whether s starts at a buffer a handed out since Reset.
func fromArena(a *Arena, s []float32) bool {
	if len(s) == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.seen[&s[0]]
	return ok
}

// probe is the identity op; its backward pass reports through seen
// whether the gradient buffer of its input came from a.
func probe(x *Tensor, a *Arena, seen *[]bool) *Tensor {
	c := contextOf("probe", x)
	out := c.empty(x.shape...)
	copy(out.Data, x.Data)
	return c.record("probe", out, func(g []float32) {
		gx := x.grad()
		*seen = append(*seen, fromArena(a, gx))
		addTo(gx, g)
	}, x)
}

// TestContextArenaAllocation checks where storage comes from: op results
// of a context with an arena, the gradient buffers of op results bound to
// it and of leaves bound to it come from the arena; parameters (no context)
// keep heap gradients; without a context nothing comes from the arena.
func TestContextArenaAllocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := NewArena()
	ctx := &Context{Arena: a}
	w := RandN(rng, 3, 4).RequireGrad()
	var seen []bool
	x := RandN(rng, 2, 4).RequireGrad().In(ctx)
	h := Linear(x, w, nil)
	y := probe(Tanh(probe(h, a, &seen)), a, &seen)
	loss := Sum(y)
	for name, v := range map[string]*Tensor{"Linear": h, "Tanh": y, "Sum": loss} {
		if !fromArena(a, v.Data) || v.Context() != ctx {
			t.Errorf("%s result: from the arena %v, context %p, want the arena and %p", name, fromArena(a, v.Data), v.Context(), ctx)
		}
	}
	loss.Backward()
	if len(seen) != 2 || !seen[0] || !seen[1] {
		t.Errorf("gradient buffers of op results from the arena: %v, want [true true]", seen)
	}
	if !fromArena(a, x.Grad) || !fromArena(a, loss.Grad) {
		t.Error("the gradients of the bound leaf and of the loss do not come from the arena")
	}
	if fromArena(a, w.Grad) || w.Grad == nil {
		t.Error("the parameter's gradient comes from the arena")
	}

	// Without a context the same computation leaves the arena alone.
	used := len(a.used)
	seen = nil
	x2 := x.Clone().RequireGrad()
	h2 := Linear(x2, w, nil)
	Sum(probe(Tanh(probe(h2, a, &seen)), a, &seen)).Backward()
	if len(a.used) != used || h2.Context() != nil || fromArena(a, h2.Data) || seen[0] || seen[1] {
		t.Errorf("nil context: arena buffers %d → %d, result context %p, grads from the arena %v", used, len(a.used), h2.Context(), seen)
	}

	// Context.New takes zeroed storage from the arena, even a reused one.
	a.Reset()
	kernels.Fill(a.get(6, false), 7)
	a.Reset()
	z := ctx.New(2, 3)
	if !fromArena(a, z.Data) || z.Context() != ctx {
		t.Error("Context.New does not take its storage from the arena")
	}
	for _, v := range z.Data {
		if v != 0 {
			t.Fatalf("Context.New on a reused buffer: %v, want zeros", z.Data)
		}
	}
}

// TestArenaRecyclesGradients checks that Backward hands the gradient of an
// op result back to the arena once consumed, so that a chain of n ops uses
// n result buffers and a few gradient buffers instead of 2n, that the
// results do not change, and that Reset keeps only what the last step used.
func TestArenaRecyclesGradients(t *testing.T) {
	const n, size = 12, 1000
	rng := rand.New(rand.NewPCG(3, 4))
	w := RandN(rng, size).RequireGrad()
	step := func(ctx *Context) float32 {
		h := Mul(w.In(ctx), w)
		for range n {
			h = Tanh(h)
		}
		loss := Sum(h)
		loss.Backward()
		return loss.Item()
	}
	want := step(nil)
	wantG := append([]float32(nil), w.Grad...)
	a := NewArena()
	ctx := &Context{Arena: a}
	for i := range 3 {
		w.Grad = nil
		a.Reset()
		if got := step(ctx); got != want || !slices.Equal(w.Grad, wantG) {
			t.Fatalf("step %d under the arena: loss %v, want %v (or the gradient differs)", i, got, want)
		}
		// n+1 results (Mul, n Tanh), the Sum result and its gradient, and
		// at most two gradient buffers of the chain alive at once.
		if len(a.used) > n+5 {
			t.Fatalf("step %d: %d buffers for a chain of %d ops, want at most %d", i, len(a.used), n+1, n+5)
		}
	}
	before := a.Bytes()
	if before == 0 || before > 4*(n+5)*size+64 {
		t.Fatalf("arena holds %d bytes", before)
	}
	// A step that needs nothing from the arena: the next Reset drops all.
	a.Reset()
	a.Reset()
	if got := a.Bytes(); got != 0 {
		t.Fatalf("after an empty step the arena holds %d bytes, want 0", got)
	}
	// Buffers handed back twice, or not from this arena, are ignored.
	b := a.get(8, true)
	a.release(b)
	a.release(b)
	a.release(make([]float32, 8))
	if got := len(a.free[8]); got != 1 {
		t.Fatalf("%d free buffers of 8 after releasing one buffer twice and a foreign one, want 1", got)
	}
	// A smaller step (a short last batch) reuses the larger buffers, zeroed
	// where asked, and the step after it finds them again.
	a.Reset()
	kernels.Fill(a.get(100, false), 3)
	a.get(60, false)
	a.Reset()
	held := a.Bytes()
	small := a.get(80, true)
	a.get(50, false)
	if len(small) != 80 || cap(small) != 80 || !slices.Equal(small, make([]float32, 80)) || a.Bytes() != held {
		t.Fatalf("smaller step: len %d cap %d, zeroed %v, arena %d bytes, was %d", len(small), cap(small),
			slices.Equal(small, make([]float32, 80)), a.Bytes(), held)
	}
	a.release(small)
	a.Reset()
	if a.get(100, false); a.Bytes() != held {
		t.Fatalf("full step after a smaller one: arena %d bytes, want %d", a.Bytes(), held)
	}
}
