package nn

import (
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// Linear is a fully connected layer y = x·Wᵀ + b, as torch.nn.Linear.
type Linear struct {
	// Weight has shape (out, in).
	Weight *autograd.Tensor
	// Bias has shape (out); nil when the layer has no bias.
	Bias *autograd.Tensor
}

// NewLinear returns a Linear layer from in to out features with PyTorch's
// default initialisation drawn from rng: weight and bias uniform in
// ±1/sqrt(in).
func NewLinear(in, out int, bias bool, rng *rand.Rand) *Linear {
	l := &Linear{Weight: autograd.New(out, in).RequireGrad()}
	KaimingUniform(l.Weight, rng, sqrt5)
	if bias {
		l.Bias = autograd.New(out).RequireGrad()
		b := biasBound(in)
		Uniform(l.Bias, rng, -b, b)
	}
	return l
}

// Forward maps x of shape (N, in) to (N, out).
func (l *Linear) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.Linear(x, l.Weight, l.Bias)
}

// Params returns weight and, if present, bias.
func (l *Linear) Params() []Param { return weightBias(l.Weight, l.Bias) }

// Buffers returns nil: Linear has no buffers.
func (l *Linear) Buffers() []Param { return nil }

// SetTraining does nothing: Linear behaves the same in both modes.
func (l *Linear) SetTraining(bool) {}

// sqrt5 is the a of PyTorch's default kaiming_uniform_ initialisation.
const sqrt5 = 2.23606797749979

func weightBias(w, b *autograd.Tensor) []Param {
	ps := []Param{{Name: "weight", T: w}}
	if b != nil {
		ps = append(ps, Param{Name: "bias", T: b})
	}
	return ps
}
