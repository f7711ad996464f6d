package gradcheck_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
)

// ExampleCheck verifies the gradients of a small layer, tanh(x·Wᵀ + b),
// with respect to all three inputs, then shows a mistake Check reports:
// a function that draws fresh randomness on every call.
func ExampleCheck() {
	rng := rand.New(rand.NewPCG(1, 1))
	x := autograd.RandN(rng, 3, 4).RequireGrad()
	w := autograd.RandN(rng, 2, 4).RequireGrad()
	b := autograd.RandN(rng, 2).RequireGrad()
	layer := func() *autograd.Tensor { return autograd.Tanh(autograd.Linear(x, w, b)) }
	fmt.Println("layer:", gradcheck.Check(layer, []*autograd.Tensor{x, w, b}, gradcheck.Options{}))

	drop := rand.New(rand.NewPCG(2, 2)) // not reseeded inside f: every call drops other units
	noisy := func() *autograd.Tensor { return autograd.Dropout(layer(), 0.5, drop, true) }
	fmt.Println("dropout without reseeding fails:", gradcheck.Check(noisy, []*autograd.Tensor{x}, gradcheck.Options{}) != nil)

	reseeded := func() *autograd.Tensor {
		return autograd.Dropout(layer(), 0.5, rand.New(rand.NewPCG(2, 2)), true)
	}
	fmt.Println("reseeded dropout:", gradcheck.Check(reseeded, []*autograd.Tensor{x}, gradcheck.Options{}))
	// Output:
	// layer: <nil>
	// dropout without reseeding fails: true
	// reseeded dropout: <nil>
}
