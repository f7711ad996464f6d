package autograd

import (
	"math/rand/v2"
	"testing"
)

// fromArena reports whether s starts at one of a's buffers.
func fromArena(a *Arena, s []float32) bool {
	if len(s) == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.bufs[:a.next] {
		if len(b) > 0 && &b[:1][0] == &s[0] {
			return true
		}
	}
	return false
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
	used := a.next
	seen = nil
	x2 := x.Clone().RequireGrad()
	h2 := Linear(x2, w, nil)
	Sum(probe(Tanh(probe(h2, a, &seen)), a, &seen)).Backward()
	if a.next != used || h2.Context() != nil || fromArena(a, h2.Data) || seen[0] || seen[1] {
		t.Errorf("nil context: arena positions %d → %d, result context %p, grads from the arena %v", used, a.next, h2.Context(), seen)
	}

	// Context.New takes zeroed storage from the arena, even a reused one.
	a.Reset()
	fill(a.get(6, false), 7)
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
