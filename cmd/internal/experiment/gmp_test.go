package experiment

import (
	"math"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

func TestGMPSchedule(t *testing.T) {
	g := NewGMP(nil, 0.8, 10, 50, 10)
	for _, c := range []struct {
		t    int
		want float64
	}{{0, 0}, {9, 0}, {10, 0}, {20, 0.8 * (1 - 0.75*0.75*0.75)}, {30, 0.8 * (1 - 0.125)}, {50, 0.8}, {90, 0.8}} {
		if got := g.SparsityAt(c.t); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("SparsityAt(%d) = %v, want %v", c.t, got, c.want)
		}
	}
	var due []int
	for s := range 60 {
		if g.Due(s) {
			due = append(due, s)
		}
	}
	if want := []int{10, 20, 30, 40, 50}; !slices.Equal(due, want) {
		t.Errorf("pruning steps %v, want %v", due, want)
	}
	// End off the grid of Every is a pruning step too.
	if g := NewGMP(nil, 0.5, 0, 25, 10); !g.Due(25) || g.Due(24) {
		t.Error("End = 25 with Every 10: want a step at 25")
	}
}

func TestGMPPrunesGloballyAndKeepsMasks(t *testing.T) {
	a := autograd.FromSlice([]float32{0.5, -0.1, 0.3, 0.2}, 4)
	b := autograd.FromSlice([]float32{-0.05, 0.4, 0.1, -0.6, 0.25, 0.15}, 6)
	ws := []nn.Param{{Name: "a", T: a}, {Name: "b", T: b}}
	g := NewGMP(ws, 0.6, 1, 3, 1)
	if g.Step(0) {
		t.Fatal("pruned before Begin")
	}
	g.Step(1) // sparsity 0
	if n, _ := g.Pruned(); n != 0 {
		t.Fatalf("%d pruned at Begin", n)
	}
	g.Step(2) // 0.6·(1 − 1/8) = 0.525 of 10 → 5
	if n, total := g.Pruned(); n != 5 || total != 10 {
		t.Fatalf("%d of %d pruned after update 2, want 5 of 10", n, total)
	}
	// The five smallest magnitudes over both tensors, ties by order:
	// 0.05 (b0), 0.1 (a1, then b2), 0.15 (b5), 0.2 (a3).
	if want := []float32{0.5, 0, 0.3, 0}; !slices.Equal(a.Data, want) {
		t.Errorf("a = %v, want %v", a.Data, want)
	}
	if want := []float32{0, 0.4, 0, -0.6, 0.25, 0}; !slices.Equal(b.Data, want) {
		t.Errorf("b = %v, want %v", b.Data, want)
	}
	// An update moves pruned weights; Step puts them back to zero, and a
	// pruned weight that grew stays pruned.
	a.Data[1], b.Data[0] = 0.9, -0.8
	g.Step(3) // 0.6 → 6: the smallest unpruned is 0.25 (b4)
	if want := []float32{0.5, 0, 0.3, 0}; !slices.Equal(a.Data, want) {
		t.Errorf("a = %v, want %v", a.Data, want)
	}
	if want := []float32{0, 0.4, 0, -0.6, 0, 0}; !slices.Equal(b.Data, want) {
		t.Errorf("b = %v, want %v", b.Data, want)
	}
	// The masks survive a checkpoint.
	h := NewGMP(ws, 0.6, 1, 3, 1)
	if err := h.SetMasks(g.Masks()); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.Pruned(); n != 6 {
		t.Fatalf("%d pruned after SetMasks, want 6", n)
	}
	a.Data[0] = 7
	b.Data[4] = 7
	h.Apply()
	if a.Data[0] != 7 || b.Data[4] != 0 {
		t.Errorf("restored masks: a[0] %v (unpruned), b[4] %v (pruned)", a.Data[0], b.Data[4])
	}
	if err := h.SetMasks(map[string][]float32{"a": {0, 0, 0, 0}}); err == nil {
		t.Error("SetMasks without b's mask: no error")
	}
}

func TestGMPOneShot(t *testing.T) {
	// End = 0: the first update prunes to Final at once, later ones add
	// nothing.
	w := autograd.FromSlice([]float32{0.4, -0.3, 0.2, -0.1}, 4)
	g := NewGMP([]nn.Param{{Name: "w", T: w}}, 0.5, 0, 0, 100)
	if !g.Step(1) {
		t.Fatal("update 1 did not prune")
	}
	if want := []float32{0.4, -0.3, 0, 0}; !slices.Equal(w.Data, want) {
		t.Errorf("w = %v, want %v", w.Data, want)
	}
	w.Data[2] = 0.01
	if g.Step(2) || w.Data[2] != 0 {
		t.Errorf("update 2 pruned again or left w[2] = %v", w.Data[2])
	}
}
