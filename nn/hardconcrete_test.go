package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

func hcRef(la, u, beta, gamma, zeta float64, training bool) float64 {
	pre := la
	if training {
		pre = (math.Log(u) - math.Log(1-u) + la) / beta
	}
	s := 1/(1+math.Exp(-pre))*(zeta-gamma) + gamma
	return math.Min(math.Max(s, 0), 1)
}

func TestHardConcreteValues(t *testing.T) {
	h := NewHardConcrete(rand.New(rand.NewPCG(1, 2)), 3, 4)
	for i := range h.LogAlpha.Data {
		if d := float64(h.LogAlpha.Data[i]); math.Abs(d) > 0.05 {
			t.Fatalf("initial log α %g, want about N(0, 0.01²)", d)
		}
	}
	copy(h.LogAlpha.Data, []float32{-3, -1, -0.2, 0, 0.3, 1, 2, 5, -6, 0.7, -0.5, 1.5})
	// Replay the noise the module draws.
	h.rng = rand.New(rand.NewPCG(7, 8))
	z := h.Gate(nil)
	replay := rand.New(rand.NewPCG(7, 8))
	for i, la := range h.LogAlpha.Data {
		u := 1e-6 + (1-2e-6)*replay.Float64()
		want := hcRef(float64(la), u, 2.0/3, -0.1, 1.1, true)
		if math.Abs(float64(z.Data[i])-want) > 1e-6 {
			t.Fatalf("training gate %d: %g, want %g", i, z.Data[i], want)
		}
	}
	h.SetTraining(false)
	z = h.Gate(nil)
	nz := 0
	for i, la := range h.LogAlpha.Data {
		want := hcRef(float64(la), 0, 2.0/3, -0.1, 1.1, false)
		if math.Abs(float64(z.Data[i])-want) > 1e-6 {
			t.Fatalf("test gate %d: %g, want %g", i, z.Data[i], want)
		}
		if want > 0 {
			nz++
		}
	}
	if h.NonZero() != nz || nz == 0 || nz == len(h.LogAlpha.Data) {
		t.Fatalf("NonZero = %d, want %d (some but not all)", h.NonZero(), nz)
	}
	// Penalty: Σ sigmoid(log α − β log(−γ/ζ)).
	var want float64
	for _, la := range h.LogAlpha.Data {
		want += 1 / (1 + math.Exp(-(float64(la) - 2.0/3*math.Log(0.1/1.1))))
	}
	if got := float64(h.Penalty(nil).Item()); math.Abs(got-want) > 1e-5 {
		t.Fatalf("Penalty = %g, want %g", got, want)
	}
	if ps := h.Params(); len(ps) != 1 || ps[0].Name != "log_alpha" || h.Buffers() != nil {
		t.Fatalf("Params %v", ps)
	}
}

func TestHardConcreteGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := NewHardConcrete(rng, 2, 5)
	for i := range h.LogAlpha.Data {
		h.LogAlpha.Data[i] = float32(rng.NormFloat64())
	}
	w := autograd.RandN(rng, 2, 5).RequireGrad()
	// Pick a noise seed whose pre-clamp gates stay away from the kinks at
	// 0 and 1, where finite differences are not meaningful.
	var seed uint64
	for seed = 1; ; seed++ {
		r := rand.New(rand.NewPCG(seed, 9))
		ok := true
		for _, la := range h.LogAlpha.Data {
			u := 1e-6 + (1-2e-6)*r.Float64()
			pre := (math.Log(u) - math.Log(1-u) + float64(la)) / h.Beta
			s := 1/(1+math.Exp(-pre))*(h.Zeta-h.Gamma) + h.Gamma
			if math.Abs(s) < 0.05 || math.Abs(s-1) < 0.05 {
				ok = false
			}
		}
		if ok {
			break
		}
	}
	f := func() *autograd.Tensor {
		h.rng = rand.New(rand.NewPCG(seed, 9))
		return h.Forward(w)
	}
	if err := gradcheck.Check(f, []*autograd.Tensor{w, h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
	if err := gradcheck.Check(func() *autograd.Tensor { return h.Penalty(nil) }, []*autograd.Tensor{h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
	h.SetTraining(false)
	if err := gradcheck.Check(func() *autograd.Tensor { return h.Forward(w) }, []*autograd.Tensor{w, h.LogAlpha}, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
}

func TestHardConcreteShapePanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on shape mismatch")
		}
	}()
	NewHardConcrete(rand.New(rand.NewPCG(1, 1)), 2, 3).Forward(autograd.New(3, 2))
}

// zTest is the deterministic hard-concrete gate, written out.
func zTest(a float32) float32 {
	z := 1/(1+math.Exp(-float64(a)))*(1.1+0.1) - 0.1
	return float32(math.Min(math.Max(z, 0), 1))
}

func TestHardConcreteGatesLayers(t *testing.T) {
	for _, name := range []string{"convnet", "nested"} {
		rng := rand.New(rand.NewPCG(1, 1))
		var m Module = NewSequential(NewConv2d(3, 4, 3, ConvOpts{Padding: 1, Bias: true}, rng), ReLU{}, NewBatchNorm2d(4),
			NewConv2d(4, 2, 1, ConvOpts{}, rng), Flatten{}, NewLinear(2*32*32, 10, true, rng))
		if name == "nested" {
			m = NewSequential(m, ReLU{}, NewSequential(NewLinear(10, 5, false, rng)))
		}
		// Every weight but the 1×1 convolution's (a shortcut of a binary run).
		regularized := func(n string, w *autograd.Tensor) bool {
			return (w.Rank() == 2 || w.Rank() == 4) && !(w.Rank() == 4 && w.Dim(2) == 1)
		}
		h, err := NewHardConcreteGates(m, regularized, 0.1, 3)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range m.Params() {
			if regularized(p.Name, p.T) {
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
		pen := h.Begin(noGrad).Item()
		for _, l := range h.layers {
			if *l.slot == l.w {
				t.Fatalf("%s: layer %s not gated during the step", name, l.name)
			}
		}
		if m.Forward(x).RequiresGrad() {
			t.Fatalf("%s: forward pass in a NoGrad context recorded the graph", name)
		}
		h.End()
		if math.Abs(float64(pen)-h.Penalty()) > 1e-4*h.Penalty() {
			t.Fatalf("%s: penalty %v, want %v", name, pen, h.Penalty())
		}
		l := h.layers[0]
		if *l.slot != l.w {
			t.Fatalf("%s: end did not restore the weights", name)
		}

		// Test-time weights.
		orig := l.w.Data
		la := l.gate.LogAlpha.Data
		la[0], la[1] = -5, 5
		h.UseEffective()
		for j := range 3 {
			if want := orig[j] * zTest(la[j]); math.Abs(float64(l.w.Data[j]-want)) > 1e-6*math.Abs(float64(want)) {
				t.Fatalf("%s: effective weight %d = %v, want %v", name, j, l.w.Data[j], want)
			}
		}
		if l.w.Data[0] != 0 || l.w.Data[1] != orig[1] {
			t.Fatalf("%s: closed/open gates give %v, %v", name, l.w.Data[0], l.w.Data[1])
		}
		h.Restore()
		if &l.w.Data[0] != &orig[0] {
			t.Fatalf("%s: restore did not give the trained weights back", name)
		}
	}
	if _, err := NewHardConcreteGates(NewSequential(), func(string, *autograd.Tensor) bool { return true }, 1, 1); err == nil {
		t.Fatal("a model without weights was accepted")
	}
}

// TestHardConcreteGatesStepGradients checks by finite differences the gradients
// that a training step's substitution gives the weights and log α: the
// output of a small network with gated weights plus λ·E[L0], with the
// gate noise replayed from a saved random state on every evaluation.
func TestHardConcreteGatesStepGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	m := NewSequential(NewLinear(4, 3, true, rng), ReLU{}, NewLinear(3, 2, false, rng))
	h, err := NewHardConcreteGates(m, func(_ string, w *autograd.Tensor) bool { return w.Rank() == 2 }, 0.3, 9)
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
		pen := h.Begin(nil)
		out := autograd.Add(autograd.Sum(m.Forward(x)), pen)
		h.End()
		return out
	}
	inputs := []*autograd.Tensor{h.layers[0].w, h.layers[0].gate.LogAlpha, h.layers[1].w, h.layers[1].gate.LogAlpha}
	if err := gradcheck.Check(f, inputs, gradcheck.Options{Step: 1e-3}); err != nil {
		t.Fatal(err)
	}
}
