package experiment_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
)

// record is one line of the run's metrics.jsonl.
type record struct {
	Epoch    int     `json:"epoch"`
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Zero     float64 `json:"zero_ratio"` // exact zeros among the regularized weights
}

// blobs returns n points in 8 dimensions from two Gaussian blobs and
// their labels (0 or 1).
func blobs(rng *rand.Rand, n int) ([]float32, []int) {
	x, y := make([]float32, n*8), make([]int, n)
	for i := range n {
		y[i] = rng.IntN(2)
		for j := range 8 {
			x[i*8+j] = float32(rng.NormFloat64() + 1.5*float64(2*y[i]-1)*float64(j%2))
		}
	}
	return x, y
}

// trainMLP trains a two-layer perceptron on the blobs with the named
// method and regularizer in the run folder dir (a third training program:
// data, model, method, loop).
func trainMLP(dir, optimizer, reg string, epochs int) ([]record, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := blobs(rng, 256)
	model := nn.NewSequential(nn.NewLinear(8, 32, true, rng), nn.ReLU{}, nn.NewLinear(32, 2, true, rng))
	r, err := prox.Parse(reg)
	if err != nil {
		return nil, err
	}
	const batch, steps = 32, 8
	m, err := experiment.NewMethod(model, experiment.MethodConfig{
		Optimizer: optimizer, Reg: r, Lambda: 2e-3, LR: 1e-2,
		Regularized: func(_ string, t *autograd.Tensor) bool { return optim.IsWeight(t) },
		Hyper:       experiment.Hyper{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
	})
	if err != nil {
		return nil, err
	}
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	correct := 0
	loop := &train.Loop{
		Dir: dir, Epochs: epochs, StepsPerEpoch: steps, Model: model, Optimizer: m.Opt,
		BeginEpoch: func(_ context.Context, epoch, _ int) error { m.SetEpoch(epoch); correct = 0; return nil },
		Step: func(_, step int) (float64, int, error) {
			m.Opt.ZeroGrad()
			ctx.Arena.Reset()
			lo := step * batch
			logits := model.Forward(autograd.FromSlice(x[lo*8:(lo+batch)*8], batch, 8).In(ctx))
			loss := autograd.CrossEntropy(logits, y[lo:lo+batch])
			loss.Backward()
			for i := range batch {
				if (logits.Data[2*i+1] > logits.Data[2*i]) == (y[lo+i] == 1) {
					correct++
				}
			}
			return float64(loss.Item()), batch, nil
		},
		Update: func() error { m.Opt.Step(); return nil },
		EndEpoch: func(_ context.Context, epoch int, s train.EpochStats) (any, error) {
			ws := experiment.ComputeWeightStats(m.Weights)
			return record{Epoch: epoch + 1, Loss: s.MeanLoss(), Accuracy: float64(correct) / float64(s.Samples), Zero: ws.Zero}, nil
		},
	}
	res, err := loop.Run(context.Background())
	if err != nil {
		return nil, err
	}
	return experiment.DecodeHistory[record](res.History)
}

// Example trains a small perceptron on synthetic data with ProxGen and
// an ℓ1 regularizer, and with Adam for comparison: a whole training
// program on cmd/internal/experiment and nn/train, with a checkpointed run folder.
func Example() {
	dir, err := os.MkdirTemp("", "experiment-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	for _, m := range []struct{ optimizer, reg string }{{"proxgen", "l1"}, {"adam", "none"}} {
		h, err := trainMLP(filepath.Join(dir, m.optimizer), m.optimizer, m.reg, 6)
		if err != nil {
			panic(err)
		}
		first, last := h[0], h[len(h)-1]
		fmt.Printf("%s: %d epochs, loss fell %v, accuracy above 90%% %v, some weights exactly zero %v\n",
			m.optimizer, last.Epoch, last.Loss < first.Loss, last.Accuracy > 0.9, last.Zero > 0)
	}
	// Output:
	// proxgen: 6 epochs, loss fell true, accuracy above 90% true, some weights exactly zero true
	// adam: 6 epochs, loss fell true, accuracy above 90% true, some weights exactly zero false
}
