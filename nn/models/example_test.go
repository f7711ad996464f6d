package models_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
)

// Example builds the ResNet-20 of the paper's CIFAR-10 experiments (paper
// Section 4; akamaster's resnet20 with option-A shortcuts), counts its
// parameters and classifies a batch of two images in evaluation mode.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := models.New("resnet20", 10, rng)
	if err != nil {
		log.Fatal(err)
	}
	params := m.Params()
	fmt.Println("parameters:", nn.NumParams(m), "in", len(params), "tensors")
	fmt.Println("first:", params[0].Name, params[0].T.Shape(), "last:", params[len(params)-1].Name, params[len(params)-1].T.Shape())

	m.SetTraining(false) // batch norm uses its running statistics
	eval := &autograd.Context{NoGrad: true}
	logits := m.Forward(autograd.RandN(rng, 2, 3, 32, 32).In(eval))
	fmt.Println("logits:", logits.Shape(), "graph recorded:", logits.RequiresGrad())
	// Output:
	// parameters: 269722 in 59 tensors
	// first: conv1.weight [16 3 3 3] last: linear.bias [10]
	// logits: [2 10] graph recorded: false
}

// ExampleNewLanguageModel builds a small word-level LSTM language model
// (PyTorch's word_language_model RNNModel, the paper's LSTM experiment) and
// runs it over 3 time steps of 2 parallel streams.
func ExampleNewLanguageModel() {
	rng := rand.New(rand.NewPCG(1, 2))
	lm := models.NewLanguageModel(50, 8, 16, 2, 0.2, rng) // 50 words, 2 LSTM layers
	for _, p := range lm.Params() {
		fmt.Println(p.Name, p.T.Shape())
	}
	lm.SetTraining(false)
	eval := &autograd.Context{NoGrad: true} // record no graph, as torch.no_grad()
	ids := []int{1, 2, 3, 4, 5, 6}          // time-major: step t of stream b is ids[t*2+b]
	logits, state := lm.Run(eval, ids, 3, 2, nn.LSTMState{})
	fmt.Println("logits:", logits.Shape(), "hidden states:", len(state.H), "of", state.H[0].Shape())
	// Output:
	// encoder.weight [50 8]
	// rnn.weight_ih_l0 [64 8]
	// rnn.weight_hh_l0 [64 16]
	// rnn.bias_ih_l0 [64]
	// rnn.bias_hh_l0 [64]
	// rnn.weight_ih_l1 [64 16]
	// rnn.weight_hh_l1 [64 16]
	// rnn.bias_ih_l1 [64]
	// rnn.bias_hh_l1 [64]
	// decoder.weight [50 16]
	// decoder.bias [50]
	// logits: [6 50] hidden states: 2 of [2 16]
}

// Example_context is a training and evaluation loop with an
// autograd.Context: two ProxGen steps of a ResNet-20 on random batches
// with an arena that recycles the buffers of every step, then inference
// without recording the graph.
func Example_context() {
	rng := rand.New(rand.NewPCG(1, 2))
	model, err := models.New("resnet20", 10, rng)
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	var params []*autograd.Tensor
	for _, p := range model.Params() {
		names = append(names, p.Name)
		params = append(params, p.T)
	}
	opt := optim.New(optim.DefaultGroups(names, params, prox.L1(), 1e-4, 0, 1e-3), optim.ProxGenAdam(0.9, 0.999, 1e-8))
	batches := make([]cifar10.Batch, 2)
	for i := range batches {
		batches[i] = cifar10.Batch{X: autograd.RandN(rng, 4, 3, 32, 32).Data, Y: []int{0, 1, 2, 3}, N: 4}
	}
	img := autograd.RandN(rng, 3, 32, 32).Data

	train := &autograd.Context{Arena: autograd.NewArena()} // buffers recycled every step
	for _, b := range batches {
		train.Arena.Reset()
		opt.ZeroGrad()
		x := autograd.FromSlice(b.X, b.N, 3, 32, 32).In(train)
		autograd.CrossEntropy(model.Forward(x), b.Y).Backward()
		opt.Step()
	}

	model.SetTraining(false)                // batch norm uses its running statistics
	eval := &autograd.Context{NoGrad: true} // as torch.no_grad(); one per goroutine if it has an arena
	logits := model.Forward(autograd.FromSlice(img, 1, 3, 32, 32).In(eval))

	fmt.Println("updates:", opt.Steps(), "logits:", logits.Shape(), "graph recorded:", logits.RequiresGrad())
	// Output:
	// updates: 2 logits: [1 10] graph recorded: false
}
