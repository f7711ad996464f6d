package autograd_test

import (
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

func TestConcatSliceValues(t *testing.T) {
	a := autograd.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := autograd.FromSlice([]float32{7, 8}, 2, 1)
	if got, want := autograd.Concat(1, a, b).Data, []float32{1, 2, 3, 7, 4, 5, 6, 8}; !equal(got, want) {
		t.Errorf("Concat axis 1 = %v, want %v", got, want)
	}
	if got, want := autograd.Concat(-1, b, a).Shape(), []int{2, 4}; !equal(got, want) {
		t.Errorf("Concat axis -1 shape = %v, want %v", got, want)
	}
	if got, want := autograd.Concat(0, a, a).Data, []float32{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}; !equal(got, want) {
		t.Errorf("Concat axis 0 = %v, want %v", got, want)
	}
	if got, want := autograd.Slice(a, 1, 1, 3).Data, []float32{2, 3, 5, 6}; !equal(got, want) {
		t.Errorf("Slice axis 1 = %v, want %v", got, want)
	}
	if got, want := autograd.Slice(a, 0, 1, 2).Data, []float32{4, 5, 6}; !equal(got, want) {
		t.Errorf("Slice axis 0 = %v, want %v", got, want)
	}
	if got := autograd.Slice(a, -1, 2, 2).Shape(); !equal(got, []int{2, 0}) {
		t.Errorf("empty Slice shape = %v, want [2 0]", got)
	}
	// The result must not alias the input.
	s := autograd.Slice(a, 0, 0, 1)
	s.Data[0] = 100
	if a.Data[0] != 1 {
		t.Errorf("Slice result aliases its input")
	}
}

func TestConcatSliceRoundTrip(t *testing.T) {
	rng := newRNG(10)
	x := autograd.RandN(rng, 3, 5, 4, 2)
	for axis := -4; axis < 4; axis++ {
		d := x.Dim(axis)
		parts := []*autograd.Tensor{autograd.Slice(x, axis, 0, 1), autograd.Slice(x, axis, 1, d-1), autograd.Slice(x, axis, d-1, d)}
		if y := autograd.Concat(axis, parts...); !autograd.AllClose(y, x, 0, 0) {
			t.Errorf("axis %d: Concat of Slices differs from the input", axis)
		}
	}
}

func TestConcatGradients(t *testing.T) {
	rng := newRNG(11)
	for axis := 0; axis < 3; axis++ {
		sa, sb, sc := []int{2, 3, 4}, []int{2, 3, 4}, []int{2, 3, 4}
		sb[axis], sc[axis] = 1, 3
		a, b, c := param(rng, sa...), param(rng, sb...), param(rng, sc...)
		f := func() *autograd.Tensor { return autograd.Concat(axis, a, b, c, a) }
		if err := gradcheck.Check(f, []*autograd.Tensor{a, b, c}, gradcheck.Options{}); err != nil {
			t.Errorf("axis %d: %v", axis, err)
		}
	}
}

func TestSliceGradients(t *testing.T) {
	rng := newRNG(12)
	x := param(rng, 3, 4, 5)
	for axis := -3; axis < 3; axis++ {
		d := x.Dim(axis)
		// Overlapping slices: the shared region receives both gradients.
		f := func() *autograd.Tensor {
			return autograd.Concat(axis, autograd.Slice(x, axis, 1, d), autograd.Slice(x, axis, 0, d-1))
		}
		if err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
			t.Errorf("axis %d: %v", axis, err)
		}
	}
}

func TestConcatSlicePanics(t *testing.T) {
	a, b := autograd.New(2, 3), autograd.New(3, 3)
	mustPanic(t, func() { autograd.Concat(1, a, b) }, "autograd.Concat", "[2 3]", "[3 3]")
	mustPanic(t, func() { autograd.Concat(0, a, autograd.New(2, 3, 1)) }, "autograd.Concat", "[2 3]", "[2 3 1]")
	mustPanic(t, func() { autograd.Concat(2, a) }, "autograd.Concat", "axis 2")
	mustPanic(t, func() { autograd.Concat(0) }, "autograd.Concat")
	mustPanic(t, func() { autograd.Slice(a, 1, 2, 4) }, "autograd.Slice", "[2, 4)", "[2 3]")
	mustPanic(t, func() { autograd.Slice(a, -3, 0, 1) }, "autograd.Slice", "axis -3")
}
