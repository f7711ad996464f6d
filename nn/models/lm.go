package models

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// LanguageModel is the word-level LSTM language model of PyTorch's
// word_language_model example (RNNModel with rnn_type "LSTM", untied):
// Embedding → Dropout → LSTM → Dropout → Linear.
type LanguageModel struct {
	Drop    *nn.Dropout
	Encoder *nn.Embedding
	RNN     *nn.LSTM
	Decoder *nn.Linear
}

// NewLanguageModel returns a language model over vocab words with emb-sized
// embeddings, an LSTM of the given hidden size and layer count, and dropout
// probability dropout (after the embedding, between LSTM layers and before
// the decoder). Initialisation follows the example's init_weights:
// encoder and decoder weights uniform in ±0.1, decoder bias zero, LSTM
// tensors PyTorch's default ±1/sqrt(hidden), all drawn from rng, which
// also draws the dropout masks.
func NewLanguageModel(vocab, emb, hidden, layers int, dropout float32, rng *rand.Rand) *LanguageModel {
	m := &LanguageModel{
		Drop:    nn.NewDropout(dropout, rng),
		Encoder: nn.NewEmbedding(vocab, emb, rng),
		RNN:     nn.NewLSTM(emb, hidden, layers, dropout, rng),
		Decoder: nn.NewLinear(hidden, vocab, true, rng),
	}
	const initRange = 0.1
	nn.Uniform(m.Encoder.Weight, rng, -initRange, initRange)
	nn.Uniform(m.Decoder.Weight, rng, -initRange, initRange)
	nn.Fill(m.Decoder.Bias, 0)
	return m
}

// Run predicts the next word at every position of ids, a (steps, batch)
// block of word ids in row-major order (ids[t*batch+b] is word t of
// column b), starting from state (the zero value means zeros). It returns
// logits of shape (steps·batch, vocab), row t·batch+b for ids[t*batch+b],
// and the final state, which the caller detaches before passing it to the
// next window for truncated backpropagation through time. The window runs
// in the context c: a training step passes one with an arena, evaluation
// one with NoGrad set; nil is the default (record the graph, allocate from
// the heap).
func (m *LanguageModel) Run(c *autograd.Context, ids []int, steps, batch int, state nn.LSTMState) (*autograd.Tensor, nn.LSTMState) {
	if steps*batch != len(ids) {
		panic(fmt.Sprintf("models.LanguageModel: %d ids do not form %d steps × %d columns", len(ids), steps, batch))
	}
	emb := m.Drop.Forward(m.Encoder.Lookup(c, ids))
	out, state := m.RNN.Run(autograd.Reshape(emb, steps, batch, m.RNN.InputSize), state)
	out = m.Drop.Forward(autograd.Reshape(out, steps*batch, m.RNN.HiddenSize))
	return m.Decoder.Forward(out), state
}

// Forward runs the model from zero states over x of shape (steps, batch)
// holding word ids as whole numbers, and returns logits of shape
// (steps·batch, vocab), in the context of x.
func (m *LanguageModel) Forward(x *autograd.Tensor) *autograd.Tensor {
	if x.Rank() != 2 {
		panic(fmt.Sprintf("models.LanguageModel: input must have shape (steps, batch), got %v", x.Shape()))
	}
	ids := nn.TensorIDs("LanguageModel", x, m.Encoder.Weight.Dim(0))
	logits, _ := m.Run(x.Context(), ids, x.Dim(0), x.Dim(1), nn.LSTMState{})
	return logits
}

// Children returns encoder, rnn and decoder (the dropout has no tensors).
func (m *LanguageModel) Children() []nn.Child {
	return []nn.Child{{Name: "encoder", Module: m.Encoder}, {Name: "rnn", Module: m.RNN}, {Name: "decoder", Module: m.Decoder}}
}

// Params returns encoder.weight, the rnn tensors and the decoder's weight
// and bias.
func (m *LanguageModel) Params() []nn.Param { return nn.ChildParams(m.Children()) }

// Buffers returns nil: the model has no buffers.
func (m *LanguageModel) Buffers() []nn.Param { return nil }

// SetTraining turns every dropout on (true) or off (false).
func (m *LanguageModel) SetTraining(training bool) {
	m.Drop.SetTraining(training)
	nn.SetChildrenTraining(m.Children(), training)
}
