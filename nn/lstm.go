package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// LSTM is a multi-layer long short-term memory network over sequences of
// shape (T, B, In), as torch.nn.LSTM with its defaults (biases on, not
// batch-first, not bidirectional). Layer l's tensors are named
// weight_ih_l<l> (4H, In or H), weight_hh_l<l> (4H, H), bias_ih_l<l> (4H)
// and bias_hh_l<l> (4H), gates in PyTorch's order i, f, g, o.
type LSTM struct {
	// InputSize and HiddenSize are the feature sizes of the input and of
	// each layer's state; NumLayers is the number of stacked layers.
	InputSize, HiddenSize, NumLayers int
	// WeightIH, WeightHH, BiasIH and BiasHH hold one tensor per layer.
	WeightIH, WeightHH, BiasIH, BiasHH []*autograd.Tensor
	// Dropout is the probability of dropping outputs of every layer but
	// the last in training mode (PyTorch's dropout argument).
	Dropout float32
	// Rng draws the dropout masks.
	Rng *rand.Rand

	training bool
}

// LSTMState is the hidden and cell state of an LSTM: one (B, H) tensor
// per layer in H and in C. The zero value stands for all-zero states.
type LSTMState struct {
	H, C []*autograd.Tensor
}

// Detach returns a copy of the state cut off from the graph, for
// truncated backpropagation through time. It copies the data to the heap
// and binds the copy to no context, so the result stays valid after the
// arena of the context that produced s is reset, and the next window may
// run in any context.
func (s LSTMState) Detach() LSTMState {
	d := LSTMState{H: make([]*autograd.Tensor, len(s.H)), C: make([]*autograd.Tensor, len(s.C))}
	for i, t := range s.H {
		d.H[i] = t.Clone()
	}
	for i, t := range s.C {
		d.C[i] = t.Clone()
	}
	return d
}

// NewLSTM returns an LSTM with PyTorch's default initialisation drawn from
// rng: every tensor uniform in ±1/sqrt(hidden), drawn layer by layer in
// the order weight_ih, weight_hh, bias_ih, bias_hh. dropout applies between
// layers in training mode, with masks drawn from rng.
func NewLSTM(inputSize, hiddenSize, numLayers int, dropout float32, rng *rand.Rand) *LSTM {
	if inputSize < 1 || hiddenSize < 1 || numLayers < 1 {
		panic(fmt.Sprintf("nn.NewLSTM: sizes must be positive, got input %d hidden %d layers %d", inputSize, hiddenSize, numLayers))
	}
	l := &LSTM{InputSize: inputSize, HiddenSize: hiddenSize, NumLayers: numLayers, Dropout: dropout, Rng: rng, training: true}
	b := 1 / math.Sqrt(float64(hiddenSize))
	for i := range numLayers {
		in := inputSize
		if i > 0 {
			in = hiddenSize
		}
		ts := []*autograd.Tensor{
			autograd.New(4*hiddenSize, in).RequireGrad(),
			autograd.New(4*hiddenSize, hiddenSize).RequireGrad(),
			autograd.New(4 * hiddenSize).RequireGrad(),
			autograd.New(4 * hiddenSize).RequireGrad(),
		}
		for _, t := range ts {
			Uniform(t, rng, -b, b)
		}
		l.WeightIH = append(l.WeightIH, ts[0])
		l.WeightHH = append(l.WeightHH, ts[1])
		l.BiasIH = append(l.BiasIH, ts[2])
		l.BiasHH = append(l.BiasHH, ts[3])
	}
	return l
}

// ZeroState returns all-zero states for a batch of b sequences, bound to
// the context c (nil: from the heap, valid for as long as they are used).
func (l *LSTM) ZeroState(c *autograd.Context, b int) LSTMState {
	s := LSTMState{H: make([]*autograd.Tensor, l.NumLayers), C: make([]*autograd.Tensor, l.NumLayers)}
	for i := range l.NumLayers {
		s.H[i] = c.New(b, l.HiddenSize)
		s.C[i] = c.New(b, l.HiddenSize)
	}
	return s
}

// Run feeds the sequence x of shape (T, B, In) through every layer,
// starting from state (the zero value means zeros, taken from the context
// of x), and returns the last layer's outputs, shape (T, B, H), and the
// final state of every layer.
func (l *LSTM) Run(x *autograd.Tensor, state LSTMState) (*autograd.Tensor, LSTMState) {
	if x.Rank() != 3 || x.Dim(2) != l.InputSize {
		panic(fmt.Sprintf("nn.LSTM: input must have shape (T, B, %d), got %v", l.InputSize, x.Shape()))
	}
	batch := x.Dim(1)
	if state.H == nil && state.C == nil {
		state = l.ZeroState(x.Context(), batch)
	}
	if len(state.H) != l.NumLayers || len(state.C) != l.NumLayers {
		panic(fmt.Sprintf("nn.LSTM: state has %d hidden and %d cell tensors for %d layers", len(state.H), len(state.C), l.NumLayers))
	}
	for i := range l.NumLayers {
		for _, t := range []*autograd.Tensor{state.H[i], state.C[i]} {
			if t.Rank() != 2 || t.Dim(0) != batch || t.Dim(1) != l.HiddenSize {
				panic(fmt.Sprintf("nn.LSTM: layer %d state has shape %v, want (%d, %d)", i, t.Shape(), batch, l.HiddenSize))
			}
		}
	}
	final := LSTMState{H: make([]*autograd.Tensor, l.NumLayers), C: make([]*autograd.Tensor, l.NumLayers)}
	seq := x
	for i := range l.NumLayers {
		if i > 0 && l.Dropout > 0 {
			seq = autograd.Dropout(seq, l.Dropout, l.Rng, l.training)
		}
		// One fused op per layer: the input projections of all steps
		// are one GEMM and the recurrence runs inside the op.
		seq, final.H[i], final.C[i] = autograd.LSTM(seq, state.H[i], state.C[i], l.WeightIH[i], l.WeightHH[i], l.BiasIH[i], l.BiasHH[i])
	}
	return seq, final
}

// Forward runs the LSTM over x of shape (T, B, In) from zero states and
// returns the outputs, shape (T, B, H).
func (l *LSTM) Forward(x *autograd.Tensor) *autograd.Tensor {
	out, _ := l.Run(x, LSTMState{})
	return out
}

// Params returns the tensors of each layer in PyTorch's order.
func (l *LSTM) Params() []Param {
	var ps []Param
	for i := range l.NumLayers {
		ps = append(ps,
			Param{Name: fmt.Sprintf("weight_ih_l%d", i), T: l.WeightIH[i]},
			Param{Name: fmt.Sprintf("weight_hh_l%d", i), T: l.WeightHH[i]},
			Param{Name: fmt.Sprintf("bias_ih_l%d", i), T: l.BiasIH[i]},
			Param{Name: fmt.Sprintf("bias_hh_l%d", i), T: l.BiasHH[i]},
		)
	}
	return ps
}

// Buffers returns nil: LSTM has no buffers.
func (l *LSTM) Buffers() []Param { return nil }

// SetTraining turns the dropout between layers on (true) or off (false).
func (l *LSTM) SetTraining(training bool) { l.training = training }
