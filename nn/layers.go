package nn

import (
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// stateless provides the Params, Buffers and SetTraining methods of a
// module without tensors or modes.
type stateless struct{}

// Params returns nil: the module has no parameters.
func (stateless) Params() []Param { return nil }

// Buffers returns nil: the module has no buffers.
func (stateless) Buffers() []Param { return nil }

// SetTraining does nothing: the module behaves the same in both modes.
func (stateless) SetTraining(bool) {}

// ReLU applies max(x, 0) element-wise, as torch.nn.ReLU.
type ReLU struct{ stateless }

// Forward returns max(x, 0).
func (ReLU) Forward(x *autograd.Tensor) *autograd.Tensor { return autograd.ReLU(x) }

// Flatten reshapes (N, ...) to (N, rest), as torch.nn.Flatten.
type Flatten struct{ stateless }

// Forward returns x reshaped to (N, rest).
func (Flatten) Forward(x *autograd.Tensor) *autograd.Tensor { return autograd.Flatten(x) }

// MaxPool2d takes the maximum over windows of NCHW input, as
// torch.nn.MaxPool2d (padding counts as −∞).
type MaxPool2d struct {
	stateless
	// Kernel is the square window size, Stride its step and Padding the
	// border added on every side, as in torch.nn.MaxPool2d.
	Kernel, Stride, Padding int
}

// Forward pools x of shape (N, C, H, W).
func (p MaxPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.MaxPool2d(x, p.Kernel, p.Stride, p.Padding)
}

// AvgPool2d averages over windows of NCHW input, as torch.nn.AvgPool2d
// with its defaults (padding counts as zeros in the average).
type AvgPool2d struct {
	stateless
	// Kernel is the square window size, Stride its step and Padding the
	// border added on every side, as in torch.nn.AvgPool2d.
	Kernel, Stride, Padding int
}

// Forward pools x of shape (N, C, H, W).
func (p AvgPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.AvgPool2d(x, p.Kernel, p.Stride, p.Padding)
}

// GlobalAvgPool2d averages each channel over all positions, mapping
// (N, C, H, W) to (N, C, 1, 1).
type GlobalAvgPool2d struct{ stateless }

// Forward returns the per-channel mean of x.
func (GlobalAvgPool2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.GlobalAvgPool2d(x)
}

// Dropout zeroes each element with probability P in training mode and
// scales the rest by 1/(1−P), as torch.nn.Dropout; in evaluation mode it
// passes x through.
type Dropout struct {
	// P is the probability of dropping an element.
	P float32
	// Rng draws the masks; seed it for reproducible training.
	Rng *rand.Rand

	training bool
}

// NewDropout returns a dropout layer in training mode that draws its masks
// from rng.
func NewDropout(p float32, rng *rand.Rand) *Dropout {
	return &Dropout{P: p, Rng: rng, training: true}
}

// Forward applies dropout to x.
func (d *Dropout) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.Dropout(x, d.P, d.Rng, d.training)
}

// Params returns nil: Dropout has no parameters.
func (d *Dropout) Params() []Param { return nil }

// Buffers returns nil: Dropout has no buffers.
func (d *Dropout) Buffers() []Param { return nil }

// SetTraining turns dropout on (true) or off (false).
func (d *Dropout) SetTraining(training bool) { d.training = training }
