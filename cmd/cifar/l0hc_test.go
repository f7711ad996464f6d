package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// zTest is the deterministic hard-concrete gate, written out.
func zTest(a float32) float32 {
	z := 1/(1+math.Exp(-float64(a)))*(1.1+0.1) - 0.1
	return float32(math.Min(math.Max(z, 0), 1))
}

func TestHardConcreteLayers(t *testing.T) {
	for _, name := range []string{"resnet8", "vgg16"} {
		m, err := models.New(name, 10, rand.New(rand.NewPCG(1, 1)), models.WithWidth(0.125), models.WithShortcut(models.ShortcutB))
		if err != nil {
			t.Fatal(err)
		}
		c := &config{}
		h, err := newHardConcrete(m, func(n string, w *autograd.Tensor) bool { return regularized(c, n, w) }, 0.1, 3)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range m.Params() {
			if regularized(c, p.Name, p.T) {
				want = append(want, p.Name)
			}
		}
		var got []string
		for _, l := range h.layers {
			got = append(got, l.name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: gated %v\nwant %v", name, got, want)
		}

		// Training substitution and the penalty.
		noGrad := &autograd.Context{NoGrad: true}
		x := autograd.RandN(rand.New(rand.NewPCG(5, 5)), 2, 3, 32, 32).In(noGrad)
		pen := h.begin(noGrad).Item()
		for _, l := range h.layers {
			if *l.slot == l.w {
				t.Fatalf("%s: layer %s not gated during the step", name, l.name)
			}
		}
		if m.Forward(x).RequiresGrad() {
			t.Fatalf("%s: forward pass in a NoGrad context recorded the graph", name)
		}
		h.end()
		if math.Abs(float64(pen)-h.penalty()) > 1e-4*h.penalty() {
			t.Fatalf("%s: penalty %v, want %v", name, pen, h.penalty())
		}
		l := h.layers[0]
		if *l.slot != l.w {
			t.Fatalf("%s: end did not restore the weights", name)
		}

		// Test-time weights.
		orig := l.w.Data
		la := l.gate.LogAlpha.Data
		la[0], la[1] = -5, 5
		h.useEffective()
		for j := range 3 {
			if want := orig[j] * zTest(la[j]); math.Abs(float64(l.w.Data[j]-want)) > 1e-6*math.Abs(float64(want)) {
				t.Fatalf("%s: effective weight %d = %v, want %v", name, j, l.w.Data[j], want)
			}
		}
		if l.w.Data[0] != 0 || l.w.Data[1] != orig[1] {
			t.Fatalf("%s: closed/open gates give %v, %v", name, l.w.Data[0], l.w.Data[1])
		}
		h.restore()
		if &l.w.Data[0] != &orig[0] {
			t.Fatalf("%s: restore did not give the trained weights back", name)
		}
	}
	if _, err := newHardConcrete(nn.NewSequential(), func(string, *autograd.Tensor) bool { return true }, 1, 1); err == nil {
		t.Fatal("a model without weights was accepted")
	}
}

// TestHardConcreteStepGradients checks by finite differences the gradients
// that a training step's substitution gives the weights and log α: the
// output of a small network with gated weights plus λ·E[L0], with the
// gate noise replayed from a saved random state on every evaluation.
func TestHardConcreteStepGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	m := nn.NewSequential(nn.NewLinear(4, 3, true, rng), nn.ReLU{}, nn.NewLinear(3, 2, false, rng))
	h, err := newHardConcrete(m, func(_ string, w *autograd.Tensor) bool { return w.Rank() == 2 }, 0.3, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.layers) != 2 {
		t.Fatalf("%d gated layers, want 2", len(h.layers))
	}
	// log α away from the gates' clamp kinks for the saved noise.
	for _, l := range h.layers {
		for i := range l.gate.LogAlpha.Data {
			l.gate.LogAlpha.Data[i] = float32(1.5 + 0.1*float64(i%5))
		}
	}
	state, err := h.pcg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	x := autograd.RandN(rng, 5, 4)
	f := func() *autograd.Tensor {
		if err := h.pcg.UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
		pen := h.begin(nil)
		out := autograd.Add(autograd.Sum(m.Forward(x)), pen)
		h.end()
		return out
	}
	inputs := []*autograd.Tensor{h.layers[0].w, h.layers[0].gate.LogAlpha, h.layers[1].w, h.layers[1].gate.LogAlpha}
	if err := gradcheck.Check(f, inputs, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
}
