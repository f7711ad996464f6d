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
