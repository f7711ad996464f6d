package nn

import (
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// Conv2d is a 2-D convolution over NCHW input, as torch.nn.Conv2d with
// square kernels and groups = 1.
type Conv2d struct {
	// Weight has shape (Cout, Cin, k, k).
	Weight *autograd.Tensor
	// Bias has shape (Cout); nil when the layer has no bias.
	Bias *autograd.Tensor
	// Stride, Padding and Dilation apply to both spatial dimensions.
	Stride, Padding, Dilation int
}

// ConvOpts holds the optional settings of a convolution. The zero value
// means stride 1, no padding, dilation 1 and no bias.
type ConvOpts struct {
	// Stride, Padding and Dilation apply to both spatial dimensions;
	// zero Stride and Dilation mean 1.
	Stride, Padding, Dilation int
	// Bias adds a learned bias per output channel.
	Bias bool
}

// NewConv2d returns a convolution from cin to cout channels with a k×k
// kernel and PyTorch's default initialisation drawn from rng: weight and
// bias uniform in ±1/sqrt(cin·k·k).
func NewConv2d(cin, cout, k int, opt ConvOpts, rng *rand.Rand) *Conv2d {
	c := &Conv2d{
		Weight:   autograd.New(cout, cin, k, k).RequireGrad(),
		Stride:   max(opt.Stride, 1),
		Padding:  opt.Padding,
		Dilation: max(opt.Dilation, 1),
	}
	KaimingUniform(c.Weight, rng, sqrt5)
	if opt.Bias {
		c.Bias = autograd.New(cout).RequireGrad()
		b := biasBound(cin * k * k)
		Uniform(c.Bias, rng, -b, b)
	}
	return c
}

// Forward convolves x of shape (N, Cin, H, W).
func (c *Conv2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.Conv2d(x, c.Weight, c.Bias, c.Stride, c.Padding, c.Dilation)
}

// Params returns weight and, if present, bias.
func (c *Conv2d) Params() []Param { return weightBias(c.Weight, c.Bias) }

// Buffers returns nil: Conv2d has no buffers.
func (c *Conv2d) Buffers() []Param { return nil }

// SetTraining does nothing: Conv2d behaves the same in both modes.
func (c *Conv2d) SetTraining(bool) {}
