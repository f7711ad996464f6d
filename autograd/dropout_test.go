package autograd_test

import (
	"math"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
)

func TestDropoutIdentity(t *testing.T) {
	rng := newRNG(40)
	x := param(rng, 3, 4)
	if y := autograd.Dropout(x, 0.5, rng, false); y != x {
		t.Error("eval-mode Dropout does not return its input")
	}
	if y := autograd.Dropout(x, 0, rng, true); y != x {
		t.Error("Dropout with p = 0 does not return its input")
	}
	y := autograd.Dropout(x, 1, rng, true)
	for _, v := range y.Data {
		if v != 0 {
			t.Fatalf("Dropout with p = 1 kept %v", v)
		}
	}
	autograd.Sum(y).Backward()
	for _, v := range x.Grad {
		if v != 0 {
			t.Fatalf("Dropout with p = 1 passed gradient %v", v)
		}
	}
	mustPanic(t, func() { autograd.Dropout(x, 1.5, rng, true) }, "autograd.Dropout", "1.5", "[3 4]")
	mustPanic(t, func() { autograd.Dropout(x, float32(math.NaN()), rng, true) }, "autograd.Dropout")
}

func TestDropoutMask(t *testing.T) {
	const n, p = 100000, 0.3
	x := autograd.RandN(newRNG(41), n)
	y := autograd.Dropout(x, p, newRNG(7), true)
	pv := float32(p)
	scale := 1 / (1 - pv)
	dropped := 0
	for i, v := range y.Data {
		switch {
		case v == 0:
			dropped++
		case v != x.Data[i]*scale:
			t.Fatalf("element %d = %v, want 0 or %v", i, v, x.Data[i]/(1-p))
		}
	}
	// Binomial(n, p): 6 standard deviations.
	if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(dropped)-n*p) > 6*sd {
		t.Errorf("dropped %d of %d, want about %v", dropped, n, n*p)
	}
	// Same rng state, same mask, for any worker count; a fresh draw differs.
	prev := parallel.SetWorkers(1)
	y1 := autograd.Dropout(x, p, newRNG(7), true)
	parallel.SetWorkers(4)
	y4 := autograd.Dropout(x, p, newRNG(7), true)
	parallel.SetWorkers(prev)
	if !equal(y.Data, y1.Data) || !equal(y.Data, y4.Data) {
		t.Error("mask depends on the worker count")
	}
	rng := newRNG(7)
	autograd.Dropout(x, p, rng, true)
	if equal(y.Data, autograd.Dropout(x, p, rng, true).Data) {
		t.Error("two draws from one rng gave the same mask")
	}
}

func TestDropoutGradients(t *testing.T) {
	x := param(newRNG(42), 5, 7)
	f := func() *autograd.Tensor { return autograd.Dropout(x, 0.4, newRNG(3), true) }
	if err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
		t.Fatal(err)
	}
	// The gradient is the mask scaled by 1/(1−p).
	x.Grad = nil
	y := f()
	autograd.Sum(y).Backward()
	for i, g := range x.Grad {
		want := float32(0)
		if y.Data[i] != 0 {
			p := float32(0.4)
			want = 1 / (1 - p)
		}
		if g != want {
			t.Fatalf("grad %d = %v, want %v", i, g, want)
		}
	}
}
