package autograd_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// Example is a linear classifier's loss on a batch and its gradient (the
// README shows the same as a whole program, run by internal/readme).
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	x := autograd.RandN(rng, 4, 784) // a batch of 4 flattened 28×28 images
	labels := []int{3, 1, 4, 1}
	w := autograd.RandU(rng, -0.05, 0.05, 10, 784).RequireGrad()
	logits := autograd.Linear(x, w, nil)
	loss := autograd.CrossEntropy(logits, labels)
	loss.Backward() // w.Grad now holds ∂loss/∂w
	fmt.Printf("loss %.3f, ∂loss/∂w has %d entries\n", loss.Item(), len(w.Grad))
	// Output:
	// loss 2.368, ∂loss/∂w has 7840 entries
}

// Example_graph builds a small graph, y = Σ tanh(W·x + b)², and reads the
// gradients of both leaves after one backward pass.
func Example_graph() {
	x := autograd.FromSlice([]float32{1, -2, 0.5}, 1, 3) // a batch of one input
	w := autograd.FromSlice([]float32{0.1, 0.2, -0.3, 0.4, 0, 0.5}, 2, 3).RequireGrad()
	b := autograd.FromSlice([]float32{0.05, -0.1}, 2).RequireGrad()
	h := autograd.Tanh(autograd.Linear(x, w, b)) // shape [1 2]
	y := autograd.Sum(autograd.Mul(h, h))
	y.Backward()
	fmt.Printf("y = %.4f\n", y.Item())
	fmt.Printf("∂y/∂W = %.4f\n", w.Grad)
	fmt.Printf("∂y/∂b = %.4f\n", b.Grad)
	fmt.Println("x needs no gradient:", x.Grad == nil)
	// Output:
	// y = 0.3949
	// ∂y/∂W = [-0.6502 1.3004 -0.3251 0.7503 -1.5005 0.3751]
	// ∂y/∂b = [-0.6502 0.7503]
	// x needs no gradient: true
}

// ExampleTensor_Backward shows that gradients accumulate over backward
// passes until ZeroGrad, as in PyTorch.
func ExampleTensor_Backward() {
	x := autograd.FromSlice([]float32{3}, 1).RequireGrad()
	for range 2 {
		y := autograd.Mul(x, x) // y = x², ∂y/∂x = 2x = 6
		y.Backward()
		fmt.Println(x.Grad)
	}
	x.ZeroGrad()
	fmt.Println(x.Grad)
	// Output:
	// [6]
	// [12]
	// [0]
}
