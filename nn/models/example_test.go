package models_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
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
	logits := m.Forward(autograd.RandN(rng, 2, 3, 32, 32))
	fmt.Println("logits:", logits.Shape())
	// Output:
	// parameters: 269722 in 59 tensors
	// first: conv1.weight [16 3 3 3] last: linear.bias [10]
	// logits: [2 10]
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
	ids := []int{1, 2, 3, 4, 5, 6} // time-major: step t of stream b is ids[t*2+b]
	logits, state := lm.Run(ids, 3, 2, nn.LSTMState{})
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
