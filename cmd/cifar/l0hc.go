package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// Constants of the hard-concrete distribution (Louizos, Welling and
// Kingma 2018): the stretch interval (γ, ζ) and the temperature β.
const (
	hcGamma = -0.1
	hcZeta  = 1.1
	hcBeta  = 2.0 / 3
)

// hardConcrete is the ℓ0 hard-concrete baseline with one gate per weight:
// each gated layer computes with w ⊙ z, where in training
//
//	z = clamp(sigmoid((log u − log(1−u) + log α)/β)·(ζ−γ) + γ, 0, 1),  u ~ U(1e-6, 1−1e-6),
//
// and at test time z = clamp(sigmoid(log α)·(ζ−γ) + γ, 0, 1). The penalty
// is λ times the expected number of non-zero gates,
// Σ sigmoid(log α − β·log(−γ/ζ)). log α starts at N(log(1−p) − log p, 0.01²)
// with p = 0.5. The gates are built from autograd ops, so gradients reach
// both w and log α.
type hardConcrete struct {
	layers []hcLayer
	pcg    *rand.PCG // draws u; its state is checkpointed
	rng    *rand.Rand
	lambda float64 // per-step λ
	saved  [][]float32
}

// hcLayer is one gated weight.
type hcLayer struct {
	name     string
	slot     **autograd.Tensor // the layer's Weight field
	w        *autograd.Tensor  // the weight parameter itself
	logAlpha *autograd.Tensor
	eff      []float32 // test-time effective weights
}

// findWeights calls visit for the Weight field of every convolution and
// linear layer in m, with the layer's state_dict name of the weight.
func findWeights(m nn.Module, prefix string, visit func(name string, slot **autograd.Tensor)) {
	switch l := m.(type) {
	case *nn.Conv2d:
		visit(prefix+"weight", &l.Weight)
		return
	case *nn.Linear:
		visit(prefix+"weight", &l.Weight)
		return
	}
	if c, ok := m.(nn.Container); ok {
		for _, ch := range c.Children() {
			findWeights(ch.Module, prefix+ch.Name+".", visit)
		}
	}
}

// newHardConcrete gates the weights of model for which gated returns true,
// drawing the initial log α and later the gate noise from seed.
func newHardConcrete(model nn.Module, gated func(name string, t *autograd.Tensor) bool, lambda float64, seed uint64) (*hardConcrete, error) {
	h := &hardConcrete{pcg: rand.NewPCG(seed, 0x6c30686367617465), lambda: lambda}
	h.rng = rand.New(h.pcg)
	params := map[string]*autograd.Tensor{}
	for _, p := range model.Params() {
		params[p.Name] = p.T
	}
	var err error
	mu := math.Log(1-0.5) - math.Log(0.5)
	findWeights(model, "", func(name string, slot **autograd.Tensor) {
		w := *slot
		if params[name] != w {
			err = fmt.Errorf("l0hc: layer weight %q is not the model parameter of that name", name)
			return
		}
		if !gated(name, w) {
			return
		}
		la := autograd.New(w.Shape()...)
		for i := range la.Data {
			la.Data[i] = float32(mu + 0.01*h.rng.NormFloat64())
		}
		la.RequireGrad()
		h.layers = append(h.layers, hcLayer{name: name, slot: slot, w: w, logAlpha: la, eff: make([]float32, len(w.Data))})
	})
	if err != nil {
		return nil, err
	}
	if len(h.layers) == 0 {
		return nil, fmt.Errorf("l0hc: the model has no convolution or linear weights to gate")
	}
	return h, nil
}

// gates returns the log α tensors with their names, for the optimizer and
// the training-state file.
func (h *hardConcrete) gates() []nn.Param {
	ps := make([]nn.Param, len(h.layers))
	for i, l := range h.layers {
		ps[i] = nn.Param{Name: l.name + "_log_alpha", T: l.logAlpha}
	}
	return ps
}

// trainGate returns the training gate for log α and the fixed logistic
// noise log u − log(1−u).
func trainGate(logAlpha, noise *autograd.Tensor) *autograd.Tensor {
	s := autograd.Sigmoid(autograd.Scale(autograd.Add(noise, logAlpha), 1/hcBeta))
	zbar := autograd.AddScalar(autograd.Scale(s, hcZeta-hcGamma), hcGamma)
	// clamp(zbar, 0, 1) = relu(zbar) − relu(zbar − 1).
	return autograd.Sub(autograd.ReLU(zbar), autograd.ReLU(autograd.AddScalar(zbar, -1)))
}

// expectedL0 returns Σ sigmoid(log α − β·log(−γ/ζ)) over all gates as a
// graph node.
func (h *hardConcrete) expectedL0() *autograd.Tensor {
	shift := float32(-hcBeta * math.Log(-hcGamma/hcZeta))
	var total *autograd.Tensor
	for _, l := range h.layers {
		s := autograd.Sum(autograd.Sigmoid(autograd.AddScalar(l.logAlpha, shift)))
		if total == nil {
			total = s
		} else {
			total = autograd.Add(total, s)
		}
	}
	return total
}

// penalty returns λ times the expected number of non-zero gates.
func (h *hardConcrete) penalty() float64 {
	shift := -hcBeta * math.Log(-hcGamma/hcZeta)
	var s float64
	for _, l := range h.layers {
		for _, a := range l.logAlpha.Data {
			s += 1 / (1 + math.Exp(-(float64(a) + shift)))
		}
	}
	return h.lambda * s
}

// begin draws fresh gates, makes every gated layer compute with w ⊙ z and
// returns the penalty λ·E[L0] as a graph node. It must run inside the
// step's arena; end undoes the substitution.
func (h *hardConcrete) begin() *autograd.Tensor {
	for _, l := range h.layers {
		noise := autograd.New(l.w.Shape()...)
		for i := range noise.Data {
			u := 1e-6 + (1-2e-6)*h.rng.Float64()
			noise.Data[i] = float32(math.Log(u) - math.Log(1-u))
		}
		*l.slot = autograd.Mul(l.w, trainGate(l.logAlpha, noise))
	}
	return autograd.Scale(h.expectedL0(), float32(h.lambda))
}

// end gives the layers their weight parameters back.
func (h *hardConcrete) end() {
	for _, l := range h.layers {
		*l.slot = l.w
	}
}

// testGate is the deterministic test-time gate of log α.
func testGate(a float32) float32 {
	z := float32(1/(1+math.Exp(-float64(a))))*(hcZeta-hcGamma) + hcGamma
	return min(max(z, 0), 1)
}

// useEffective replaces every gated weight's data by w ⊙ z_test until
// restore is called.
func (h *hardConcrete) useEffective() {
	if h.saved != nil {
		return
	}
	h.saved = make([][]float32, len(h.layers))
	for i, l := range h.layers {
		for j, w := range l.w.Data {
			l.eff[j] = w * testGate(l.logAlpha.Data[j])
		}
		h.saved[i] = l.w.Data
		l.w.Data = l.eff
	}
}

// restore puts the trained weights back after useEffective.
func (h *hardConcrete) restore() {
	if h.saved == nil {
		return
	}
	for i, l := range h.layers {
		l.w.Data = h.saved[i]
	}
	h.saved = nil
}
