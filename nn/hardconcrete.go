package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/proxgen/proxgen/autograd"
)

// HardConcrete is a per-weight ℓ0 gate (Louizos, Welling and Kingma 2018,
// "Learning Sparse Neural Networks through L0 Regularization"): Forward(w)
// returns w ⊙ z with one gate z per element of w. In training mode
//
//	z = clamp(sigmoid((log u − log(1−u) + log α)/β)·(ζ−γ) + γ, 0, 1),  u ~ U(1e-6, 1−1e-6),
//
// with fresh noise u on every call, and in evaluation mode
// z = clamp(sigmoid(log α)·(ζ−γ) + γ, 0, 1). Penalty returns the expected
// number of non-zero gates, Σ sigmoid(log α − β·log(−γ/ζ)), the ℓ0 term of
// the objective loss + λ·Penalty(). Gates are built from autograd ops, so
// gradients reach both w and log α.
type HardConcrete struct {
	// LogAlpha holds log α, one per gated weight; it is the module's only
	// parameter ("log_alpha").
	LogAlpha *autograd.Tensor
	// Beta is the temperature β; Gamma and Zeta the stretch interval
	// (γ, ζ). NewHardConcrete sets the paper's 2/3, −0.1 and 1.1.
	Beta, Gamma, Zeta float64

	training bool
	rng      *rand.Rand
}

// NewHardConcrete returns gates for a weight of the given shape with
// log α ~ N(log(1−p) − log p, 0.01²) for the initial drop rate p = 0.5,
// drawn from rng; rng also supplies the gate noise during training.
func NewHardConcrete(rng *rand.Rand, shape ...int) *HardConcrete {
	h := &HardConcrete{
		LogAlpha: autograd.New(shape...).RequireGrad(),
		Beta:     2.0 / 3, Gamma: -0.1, Zeta: 1.1,
		training: true,
		rng:      rng,
	}
	const p = 0.5
	Normal(h.LogAlpha, rng, math.Log(1-p)-math.Log(p), 0.01)
	return h
}

// logAlpha returns a view of LogAlpha bound to the context c, so that the
// ops computed from it run in c while the parameter itself stays unbound.
func (h *HardConcrete) logAlpha(c *autograd.Context) *autograd.Tensor {
	return autograd.Reshape(h.LogAlpha, h.LogAlpha.Shape()...).In(c)
}

// Gate returns the gates z (shape of LogAlpha), computed in the context c
// (nil is the default): sampled in training mode, deterministic in
// evaluation mode.
func (h *HardConcrete) Gate(c *autograd.Context) *autograd.Tensor {
	la := h.logAlpha(c)
	pre := la
	if h.training {
		noise := c.New(la.Shape()...)
		for i := range noise.Data {
			u := 1e-6 + (1-2e-6)*h.rng.Float64()
			noise.Data[i] = float32(math.Log(u) - math.Log(1-u))
		}
		pre = autograd.Scale(autograd.Add(la, noise), float32(1/h.Beta))
	}
	s := autograd.AddScalar(autograd.Scale(autograd.Sigmoid(pre), float32(h.Zeta-h.Gamma)), float32(h.Gamma))
	// clamp(s, 0, 1) = relu(s) − relu(s − 1).
	return autograd.Sub(autograd.ReLU(s), autograd.ReLU(autograd.AddScalar(s, -1)))
}

// Forward returns w ⊙ z for w of the shape of LogAlpha, in the context of w.
func (h *HardConcrete) Forward(w *autograd.Tensor) *autograd.Tensor {
	if !slices.Equal(w.Shape(), h.LogAlpha.Shape()) {
		panic(fmt.Sprintf("nn.HardConcrete.Forward: weight shape %v, gates %v", w.Shape(), h.LogAlpha.Shape()))
	}
	return autograd.Mul(w, h.Gate(w.Context()))
}

// Penalty returns the expected ℓ0 norm of the gated weight,
// Σ sigmoid(log α − β·log(−γ/ζ)), as a differentiable scalar computed in
// the context c (nil is the default).
func (h *HardConcrete) Penalty(c *autograd.Context) *autograd.Tensor {
	shift := h.Beta * math.Log(-h.Gamma/h.Zeta)
	return autograd.Sum(autograd.Sigmoid(autograd.AddScalar(h.logAlpha(c), float32(-shift))))
}

// NonZero returns the number of gates that are non-zero in evaluation
// mode (sigmoid(log α)·(ζ−γ) + γ > 0).
func (h *HardConcrete) NonZero() int {
	n := 0
	for _, v := range h.LogAlpha.Data {
		s := 1 / (1 + math.Exp(-float64(v)))
		if s*(h.Zeta-h.Gamma)+h.Gamma > 0 {
			n++
		}
	}
	return n
}

// Params returns log_alpha.
func (h *HardConcrete) Params() []Param { return []Param{{Name: "log_alpha", T: h.LogAlpha}} }

// Buffers returns nil: the gates keep no buffers.
func (h *HardConcrete) Buffers() []Param { return nil }

// SetTraining switches between sampled (true) and deterministic gates.
func (h *HardConcrete) SetTraining(training bool) { h.training = training }

// HardConcreteGates is the ℓ0 hard-concrete method (Louizos, Welling and
// Kingma 2018) over a whole model, with one gate per weight: between
// Begin and End every gated layer computes with w ⊙ z, z drawn by a
// HardConcrete, and the loss gains λ times the expected number of
// non-zero gates; between UseEffective and Restore the weights hold
// w ⊙ z_test, the deterministic test-time gates. All gates share one
// random stream, whose state (MarshalBinary) a checkpoint keeps, so that
// a resumed run draws the same gates.
type HardConcreteGates struct {
	layers []gatedWeight
	pcg    *rand.PCG // draws log α at start and the gate noise
	lambda float64   // per-step λ
	saved  [][]float32
}

// gatedWeight is one gated weight.
type gatedWeight struct {
	name string
	slot **autograd.Tensor // the layer's Weight field
	w    *autograd.Tensor  // the weight parameter itself
	gate *HardConcrete
	eff  []float32 // test-time effective weights
}

// layerWeights calls visit for the Weight field of every convolution and
// linear layer in m, with the weight's state_dict name.
func layerWeights(m Module, prefix string, visit func(name string, slot **autograd.Tensor)) {
	switch l := m.(type) {
	case *Conv2d:
		visit(prefix+"weight", &l.Weight)
		return
	case *Linear:
		visit(prefix+"weight", &l.Weight)
		return
	}
	if c, ok := m.(Container); ok {
		for _, ch := range c.Children() {
			layerWeights(ch.Module, prefix+ch.Name+".", visit)
		}
	}
}

// NewHardConcreteGates gates the convolution and linear weights of model
// for which gated returns true, with per-step strength lambda, drawing the
// initial log α and later the gate noise from seed. It fails when no
// weight is gated.
func NewHardConcreteGates(model Module, gated func(name string, t *autograd.Tensor) bool, lambda float64, seed uint64) (*HardConcreteGates, error) {
	h := &HardConcreteGates{pcg: rand.NewPCG(seed, 0x6c30686367617465), lambda: lambda}
	rng := rand.New(h.pcg)
	params := map[string]*autograd.Tensor{}
	for _, p := range model.Params() {
		params[p.Name] = p.T
	}
	var err error
	layerWeights(model, "", func(name string, slot **autograd.Tensor) {
		w := *slot
		if params[name] != w {
			err = fmt.Errorf("l0hc: layer weight %q is not the model parameter of that name", name)
			return
		}
		if !gated(name, w) {
			return
		}
		g := NewHardConcrete(rng, w.Shape()...)
		g.LogAlpha.RequireGrad()
		h.layers = append(h.layers, gatedWeight{name: name, slot: slot, w: w, gate: g, eff: make([]float32, len(w.Data))})
	})
	if err != nil {
		return nil, err
	}
	if len(h.layers) == 0 {
		return nil, fmt.Errorf("l0hc: the model has no convolution or linear weights to gate")
	}
	return h, nil
}

// Params returns the log α tensors, named after their weights with the
// suffix "_log_alpha", for the optimizer and the training state.
func (h *HardConcreteGates) Params() []Param {
	ps := make([]Param, len(h.layers))
	for i, l := range h.layers {
		ps[i] = Param{Name: l.name + "_log_alpha", T: l.gate.LogAlpha}
	}
	return ps
}

// expectedL0 returns the expected number of non-zero gates of all layers
// as a graph node computed in the context c.
func (h *HardConcreteGates) expectedL0(c *autograd.Context) *autograd.Tensor {
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

// Penalty returns λ times the expected number of non-zero gates.
func (h *HardConcreteGates) Penalty() float64 {
	var s float64
	noGrad := &autograd.Context{NoGrad: true}
	for _, l := range h.layers {
		s += float64(l.gate.Penalty(noGrad).Item())
	}
	return h.lambda * s
}

// Begin draws fresh gates, makes every gated layer compute with w ⊙ z and
// returns the penalty λ·E[L0] as a graph node, all computed in the step's
// context c; End undoes the substitution.
func (h *HardConcreteGates) Begin(c *autograd.Context) *autograd.Tensor {
	for _, l := range h.layers {
		l.gate.SetTraining(true)
		*l.slot = autograd.Mul(l.w, l.gate.Gate(c)) // w ⊙ z, as l.gate.Forward(l.w) in c
	}
	return autograd.Scale(h.expectedL0(c), float32(h.lambda))
}

// End gives the layers their weight parameters back.
func (h *HardConcreteGates) End() {
	for _, l := range h.layers {
		*l.slot = l.w
	}
}

// UseEffective replaces every gated weight's data by w ⊙ z_test until
// Restore is called.
func (h *HardConcreteGates) UseEffective() {
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

// Restore puts the trained weights back after UseEffective.
func (h *HardConcreteGates) Restore() {
	if h.saved == nil {
		return
	}
	for i, l := range h.layers {
		l.w.Data = h.saved[i]
	}
	h.saved = nil
}

// MarshalBinary returns the state of the gates' random stream.
func (h *HardConcreteGates) MarshalBinary() ([]byte, error) { return h.pcg.MarshalBinary() }

// UnmarshalBinary restores a state returned by MarshalBinary.
func (h *HardConcreteGates) UnmarshalBinary(b []byte) error { return h.pcg.UnmarshalBinary(b) }
