package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// Example builds a small multilayer perceptron as torch.nn.Sequential
// would, lists its parameters under PyTorch's state_dict names, and
// computes the gradient of a loss with respect to all of them.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	mlp := nn.NewSequential(
		nn.NewLinear(4, 8, true, rng),
		nn.ReLU{},
		nn.NewLinear(8, 3, true, rng),
	)
	for _, p := range mlp.Params() {
		fmt.Println(p.Name, p.T.Shape())
	}
	fmt.Println("parameters:", nn.NumParams(mlp))

	x := autograd.RandN(rng, 5, 4) // a batch of 5 inputs
	logits := mlp.Forward(x)
	loss := autograd.CrossEntropy(logits, []int{0, 1, 2, 1, 0})
	nn.ZeroGrad(mlp)
	loss.Backward()
	fmt.Println("logits:", logits.Shape())
	for _, p := range mlp.Params() {
		fmt.Println("∂loss/∂"+p.Name, "has", len(p.T.Grad), "entries")
	}
	// Output:
	// 0.weight [8 4]
	// 0.bias [8]
	// 2.weight [3 8]
	// 2.bias [3]
	// parameters: 67
	// logits: [5 3]
	// ∂loss/∂0.weight has 32 entries
	// ∂loss/∂0.bias has 8 entries
	// ∂loss/∂2.weight has 24 entries
	// ∂loss/∂2.bias has 3 entries
}

// ExampleConv2d applies a 3×3 convolution with padding 1 to a batch of
// two 3-channel 8×8 images (NCHW).
func ExampleConv2d() {
	rng := rand.New(rand.NewPCG(3, 4))
	conv := nn.NewConv2d(3, 16, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng)
	y := conv.Forward(autograd.RandN(rng, 2, 3, 8, 8))
	fmt.Println("output:", y.Shape(), "fan-in:", nn.FanIn(conv.Weight))
	// Output:
	// output: [2 16 8 8] fan-in: 27
}

// ExampleRecalibrateBatchNorm re-estimates the batch-norm statistics of a
// network whose weights changed (here: set to their signs, as a hard
// quantisation does) over three batches of inputs.
func ExampleRecalibrateBatchNorm() {
	rng := rand.New(rand.NewPCG(1, 2))
	conv := nn.NewConv2d(3, 4, 3, nn.ConvOpts{Padding: 1}, rng)
	bn := nn.NewBatchNorm2d(4)
	net := nn.NewSequential(conv, bn, nn.ReLU{})
	for i, w := range conv.Weight.Data {
		if w < 0 {
			conv.Weight.Data[i] = -1
		} else {
			conv.Weight.Data[i] = 1
		}
	}
	batches := func(yield func(*autograd.Tensor) bool) {
		for range 5 {
			if !yield(autograd.RandN(rng, 8, 3, 6, 6)) {
				return
			}
		}
	}
	used := nn.RecalibrateBatchNorm(net, batches, 3) // at most 3 batches
	fmt.Println("batches:", used, "tracked:", bn.BatchesTracked())
	fmt.Println("variance above 1:", bn.RunningVar.Data[0] > 1)
	// Output:
	// batches: 3 tracked: 3
	// variance above 1: true
}
