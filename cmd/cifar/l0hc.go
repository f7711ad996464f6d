package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// hardConcrete is the ℓ0 hard-concrete baseline (Louizos, Welling and
// Kingma 2018) with one gate per weight: every gated layer computes with
// w ⊙ z, z drawn by an nn.HardConcrete in training and its deterministic
// test-time gate otherwise, and the loss gains λ times the expected number
// of non-zero gates. All gates share one random stream, whose state is
// checkpointed, so a resumed run draws the same gates.
type hardConcrete struct {
	layers []hcLayer
	pcg    *rand.PCG // draws log α at start and the gate noise; checkpointed
	lambda float64   // per-step λ
	saved  [][]float32
}

// hcLayer is one gated weight.
type hcLayer struct {
	name string
	slot **autograd.Tensor // the layer's Weight field
	w    *autograd.Tensor  // the weight parameter itself
	gate *nn.HardConcrete
	eff  []float32 // test-time effective weights
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
	rng := rand.New(h.pcg)
	params := map[string]*autograd.Tensor{}
	for _, p := range model.Params() {
		params[p.Name] = p.T
	}
	var err error
	findWeights(model, "", func(name string, slot **autograd.Tensor) {
		w := *slot
		if params[name] != w {
			err = fmt.Errorf("l0hc: layer weight %q is not the model parameter of that name", name)
			return
		}
		if !gated(name, w) {
			return
		}
		g := nn.NewHardConcrete(rng, w.Shape()...)
		g.LogAlpha.RequireGrad()
		h.layers = append(h.layers, hcLayer{name: name, slot: slot, w: w, gate: g, eff: make([]float32, len(w.Data))})
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
		ps[i] = nn.Param{Name: l.name + "_log_alpha", T: l.gate.LogAlpha}
	}
	return ps
}

// expectedL0 returns the expected number of non-zero gates of all layers
// as a graph node computed in the context c.
func (h *hardConcrete) expectedL0(c *autograd.Context) *autograd.Tensor {
	var total *autograd.Tensor
	for _, l := range h.layers {
		if p := l.gate.Penalty(c); total == nil {
			total = p
		} else {
			total = autograd.Add(total, p)
		}
	}
	return total
}

// penalty returns λ times the expected number of non-zero gates.
func (h *hardConcrete) penalty() float64 {
	var s float64
	noGrad := &autograd.Context{NoGrad: true}
	for _, l := range h.layers {
		s += float64(l.gate.Penalty(noGrad).Item())
	}
	return h.lambda * s
}

// begin draws fresh gates, makes every gated layer compute with w ⊙ z and
// returns the penalty λ·E[L0] as a graph node, all computed in the step's
// context c; end undoes the substitution.
func (h *hardConcrete) begin(c *autograd.Context) *autograd.Tensor {
	for _, l := range h.layers {
		l.gate.SetTraining(true)
		*l.slot = autograd.Mul(l.w, l.gate.Gate(c)) // w ⊙ z, as l.gate.Forward(l.w) in c
	}
	return autograd.Scale(h.expectedL0(c), float32(h.lambda))
}

// end gives the layers their weight parameters back.
func (h *hardConcrete) end() {
	for _, l := range h.layers {
		*l.slot = l.w
	}
}

// useEffective replaces every gated weight's data by w ⊙ z_test until
// restore is called.
func (h *hardConcrete) useEffective() {
	if h.saved != nil {
		return
	}
	h.saved = make([][]float32, len(h.layers))
	for i, l := range h.layers {
		l.gate.SetTraining(false)
		z := l.gate.Gate(&autograd.Context{NoGrad: true}).Data
		for j, w := range l.w.Data {
			l.eff[j] = w * z[j]
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
