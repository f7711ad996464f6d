package train_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/optim"
)

// fitLine is a tiny run: a linear layer fits y = 2x + 1 on 16 points in
// batches of 4 (4 steps per epoch) with Adam.
type fitLine struct {
	model *nn.Linear
	opt   *optim.ProxGen
	x, y  []float32
}

func newFitLine() *fitLine {
	f := &fitLine{model: nn.NewLinear(1, 1, true, rand.New(rand.NewPCG(1, 2)))}
	for i := range 16 {
		x := float32(i)/8 - 1
		f.x, f.y = append(f.x, x), append(f.y, 2*x+1)
	}
	var names []string
	var params []*autograd.Tensor
	for _, p := range f.model.Params() {
		names, params = append(names, p.Name), append(params, p.T)
	}
	f.opt = optim.New([]*optim.Group{{Params: params, Names: names, LR: 0.1}}, optim.AdamConfig(0.9, 0.999, 1e-8))
	return f
}

// loop describes the run; stop, when positive, cancels ctx after that
// many steps (a Ctrl-C).
func (f *fitLine) loop(dir string, cancel func(), stop int) *train.Loop {
	steps := 0
	return &train.Loop{
		Dir: dir, Epochs: 3, StepsPerEpoch: 4,
		Model: f.model, Optimizer: f.opt,
		Step: func(epoch, step int) (float64, int, error) {
			f.opt.ZeroGrad()
			x := autograd.FromSlice(f.x[4*step:4*step+4], 4, 1)
			y := autograd.FromSlice(f.y[4*step:4*step+4], 4, 1)
			d := autograd.Sub(f.model.Forward(x), y)
			loss := autograd.Mean(autograd.Mul(d, d))
			loss.Backward()
			if steps++; steps == stop {
				cancel()
			}
			return float64(loss.Item()), 4, nil
		},
		Update: func() error { f.opt.Step(); return nil },
		EndEpoch: func(ctx context.Context, epoch int, s train.EpochStats) (any, error) {
			return map[string]any{"epoch": epoch + 1, "loss": math.Round(s.MeanLoss()*1e4) / 1e4}, nil
		},
	}
}

// Example trains a tiny model for three epochs, is interrupted in the
// second, and resumes from the checkpoint to the same final weights as an
// uninterrupted run.
func Example() {
	base, err := os.MkdirTemp("", "train-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(base)

	// An uninterrupted run.
	full := newFitLine()
	res, err := full.loop(filepath.Join(base, "full"), nil, 0).Run(context.Background())
	fmt.Println("uninterrupted:", res.Epoch, "epochs, error", err)

	// The same run, cancelled after 6 steps: the checkpoint is saved.
	dir := filepath.Join(base, "part")
	ctx, cancel := context.WithCancel(context.Background())
	part := newFitLine()
	res, err = part.loop(dir, cancel, 6).Run(ctx)
	fmt.Println("interrupted:", errors.Is(err, train.ErrInterrupted), "after", res.Epoch, "epoch")

	// A new process would start here: build the model and the optimizer,
	// read the checkpoint and continue.
	ck, err := train.ReadCheckpoint(dir)
	if err != nil {
		panic(err)
	}
	fmt.Printf("checkpoint at epoch %d, step %d\n", ck.Epoch(), ck.Step())
	resumed := newFitLine()
	l := resumed.loop(dir, nil, 0)
	l.Resume = ck
	res, err = l.Run(context.Background())
	fmt.Println("resumed:", res.Epoch, "epochs, error", err)

	same := true
	for i, p := range full.model.Params() {
		for j, v := range p.T.Data {
			same = same && v == resumed.model.Params()[i].T.Data[j]
		}
	}
	fmt.Println("same weights:", same)
	metrics, _ := os.ReadFile(filepath.Join(dir, train.MetricsName))
	fmt.Print(string(metrics))
	// Output:
	// uninterrupted: 3 epochs, error <nil>
	// interrupted: true after 1 epoch
	// checkpoint at epoch 1, step 2
	// resumed: 3 epochs, error <nil>
	// same weights: true
	// {"epoch":1,"loss":1.7729}
	// {"epoch":2,"loss":1.071}
	// {"epoch":3,"loss":0.5696}
}
