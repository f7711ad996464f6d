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

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestTrainGateValues(t *testing.T) {
	la := []float32{-3, -0.8, 0, 0.3, 1, 2.5, 8, -8}
	noise := []float32{0, 0.5, -0.25, 0, 1.5, -1, 0, 0}
	z := trainGate(autograd.FromSlice(la, len(la)), autograd.FromSlice(noise, len(noise)))
	for i := range la {
		s := sigmoid((float64(noise[i]) + float64(la[i])) / hcBeta)
		want := math.Min(math.Max(s*(hcZeta-hcGamma)+hcGamma, 0), 1)
		if math.Abs(float64(z.Data[i])-want) > 1e-6 {
			t.Errorf("gate(%v, noise %v) = %v, want %v", la[i], noise[i], z.Data[i], want)
		}
	}
	if z.Data[6] != 1 || z.Data[7] != 0 {
		t.Errorf("saturated gates %v and %v, want exactly 1 and 0", z.Data[6], z.Data[7])
	}
	if got, want := testGate(0), float32(0.5*(hcZeta-hcGamma)+hcGamma); got != want {
		t.Errorf("testGate(0) = %v, want %v", got, want)
	}
	if testGate(-3) != 0 || testGate(3) != 1 {
		t.Errorf("testGate(±3) = %v, %v; want 0 and 1", testGate(-3), testGate(3))
	}
}

// TestHardConcreteGradients checks the gradients of the gated weights and
// the expected-L0 penalty with respect to w and log α by finite
// differences (points are kept away from the clamp's kinks).
func TestHardConcreteGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := autograd.RandN(rng, 2, 3).RequireGrad()
	vals := []float32{-3, -0.8, 0.3, 1, 2.5, -0.2}
	la := autograd.FromSlice(vals, 2, 3).RequireGrad()
	noise := autograd.FromSlice([]float32{0.1, -0.3, 0.2, 0, -0.1, 0.4}, 2, 3)
	h := &hardConcrete{layers: []hcLayer{{name: "w", w: w, logAlpha: la}}, lambda: 0.7}
	f := func() *autograd.Tensor {
		gated := autograd.Mul(w, trainGate(la, noise))
		return autograd.Add(autograd.Sum(gated), autograd.Scale(h.expectedL0(), float32(h.lambda)))
	}
	if err := gradcheck.Check(f, []*autograd.Tensor{w, la}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
	// The float64 penalty agrees with the graph's.
	var graph float64
	autograd.NoGrad(func() { graph = float64(h.expectedL0().Item()) * h.lambda })
	if math.Abs(graph-h.penalty()) > 1e-5 {
		t.Fatalf("penalty %v, graph %v", h.penalty(), graph)
	}
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

		// Training substitution and test-time weights.
		x := autograd.RandN(rand.New(rand.NewPCG(5, 5)), 2, 3, 32, 32)
		var pen float32
		autograd.NoGrad(func() {
			pen = h.begin().Item()
			for _, l := range h.layers {
				if *l.slot == l.w {
					t.Fatalf("%s: layer %s not gated during the step", name, l.name)
				}
			}
			m.Forward(x)
			h.end()
		})
		if math.Abs(float64(pen)-h.penalty()) > 1e-3*h.penalty() {
			t.Fatalf("%s: penalty %v, want %v", name, pen, h.penalty())
		}
		l := h.layers[0]
		if *l.slot != l.w {
			t.Fatalf("%s: end did not restore the weights", name)
		}
		orig := l.w.Data
		l.logAlpha.Data[0], l.logAlpha.Data[1] = -5, 5
		h.useEffective()
		if l.w.Data[0] != 0 || l.w.Data[1] != orig[1] || l.w.Data[2] != orig[2]*testGate(l.logAlpha.Data[2]) {
			t.Fatalf("%s: effective weights %v from %v", name, l.w.Data[:3], orig[:3])
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
