package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
)

// cellReference runs l over x from state step by step with
// autograd.LSTMCell, applying inter-layer dropout as l does (same mask
// order, masks from rng), and returns the outputs and final states.
func cellReference(l *nn.LSTM, x *autograd.Tensor, state nn.LSTMState, rng *rand.Rand, training bool) (*autograd.Tensor, nn.LSTMState) {
	steps, batch := x.Dim(0), x.Dim(1)
	seq := autograd.Reshape(x, steps*batch, l.InputSize)
	final := nn.LSTMState{H: make([]*autograd.Tensor, l.NumLayers), C: make([]*autograd.Tensor, l.NumLayers)}
	for i := range l.NumLayers {
		if i > 0 && l.Dropout > 0 {
			seq = autograd.Dropout(seq, l.Dropout, rng, training)
		}
		h, c := state.H[i], state.C[i]
		outs := make([]*autograd.Tensor, steps)
		for t := range steps {
			xt := autograd.Slice(seq, 0, t*batch, (t+1)*batch)
			h, c = autograd.LSTMCell(xt, h, c, l.WeightIH[i], l.WeightHH[i], l.BiasIH[i], l.BiasHH[i])
			outs[t] = h
		}
		final.H[i], final.C[i] = h, c
		seq = autograd.Concat(0, outs...)
	}
	return autograd.Reshape(seq, steps, batch, l.HiddenSize), final
}

// TestLSTMRunMatchesCells checks the fused nn.LSTM against LSTMCell
// applied step by step, with two layers and inter-layer dropout in
// training mode: outputs, final states and the gradients of the input,
// the initial states and every parameter.
func TestLSTMRunMatchesCells(t *testing.T) {
	rng := newRng(40)
	const steps, batch, in, hid, layers = 5, 3, 4, 6, 3
	l := nn.NewLSTM(in, hid, layers, 0.4, rng)
	x := autograd.RandN(rng, steps, batch, in).RequireGrad()
	state := l.ZeroState(nil, batch)
	for i := range layers {
		state.H[i] = autograd.RandN(rng, batch, hid).RequireGrad()
		state.C[i] = autograd.RandN(rng, batch, hid).RequireGrad()
	}
	w := autograd.RandN(rng, steps, batch, hid)
	leaves := append([]*autograd.Tensor{x}, paramTensors(l)...)
	leaves = append(append(leaves, state.H...), state.C...)
	run := func(fused bool) [][]float32 {
		for _, v := range leaves {
			v.Grad = nil
		}
		dropRng := rand.New(rand.NewPCG(7, 8))
		var out *autograd.Tensor
		var final nn.LSTMState
		if fused {
			l.Rng = dropRng
			out, final = l.Run(x, state)
		} else {
			out, final = cellReference(l, x, state, dropRng, true)
		}
		loss := autograd.Sum(autograd.Mul(out, w))
		for i := range layers {
			loss = autograd.Add(loss, autograd.Sum(autograd.Mul(final.C[i], final.H[i])))
		}
		loss.Backward()
		res := [][]float32{out.Data}
		for i := range layers {
			res = append(res, final.H[i].Data, final.C[i].Data)
		}
		for _, v := range leaves {
			res = append(res, v.Grad)
		}
		return res
	}
	want, got := run(false), run(true)
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("value %d: %d elements, want %d", i, len(got[i]), len(want[i]))
		}
		for k := range want[i] {
			if d := math.Abs(float64(got[i][k] - want[i][k])); d > 1e-5*math.Max(1, math.Abs(float64(want[i][k]))) {
				t.Fatalf("value %d [%d] = %v, step by step %v", i, k, got[i][k], want[i][k])
			}
		}
	}
}

// TestLSTMRunWorkers checks bit-identical results of a training step for
// one and several workers at a size where the GEMMs split.
func TestLSTMRunWorkers(t *testing.T) {
	rng := newRng(41)
	l := nn.NewLSTM(24, 40, 2, 0.3, rng)
	x := autograd.RandN(rng, 7, 16, 24).RequireGrad()
	run := func(workers int) []float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		l.Rng = rand.New(rand.NewPCG(1, 2))
		nn.ZeroGrad(l)
		x.Grad = nil
		out, final := l.Run(x, nn.LSTMState{})
		autograd.Add(autograd.Sum(autograd.Mul(out, out)), autograd.Sum(final.C[1])).Backward()
		res := append([]float32(nil), out.Data...)
		for _, p := range paramTensors(l) {
			res = append(res, p.Grad...)
		}
		return append(res, x.Grad...)
	}
	one := run(1)
	for _, w := range []int{2, 3} {
		got := run(w)
		for i := range one {
			if got[i] != one[i] {
				t.Fatalf("%d workers: element %d = %v, one worker %v", w, i, got[i], one[i])
			}
		}
	}
}

// BenchmarkLSTMRun times forward and backward of the paper's PTB LSTM
// (one layer, 300 units, input 300) over a window of 35 steps × 20
// streams.
func BenchmarkLSTMRun(b *testing.B) {
	rng := newRng(42)
	l := nn.NewLSTM(300, 300, 1, 0, rng)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x := autograd.RandN(rng, 35, 20, 300).RequireGrad().In(ctx)
	for b.Loop() {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		out, final := l.Run(x, nn.LSTMState{})
		autograd.Add(autograd.Sum(out), autograd.Sum(final.C[0])).Backward()
	}
	b.ReportMetric(float64(35*20*b.N)/b.Elapsed().Seconds(), "tok/s")
}
