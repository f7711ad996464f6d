package nn_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
)

// quadrants returns n noisy 8×8 images, each with one bright 4×4 quadrant,
// and the index of that quadrant as its label.
func quadrants(n int, seed uint64) (*autograd.Tensor, []int) {
	rng := newRng(seed)
	x := autograd.New(n, 1, 8, 8)
	labels := make([]int, n)
	for i := range n {
		q := rng.IntN(4)
		labels[i] = q
		r0, c0 := 4*(q/2), 4*(q%2)
		for r := range 8 {
			for c := range 8 {
				v := 0.5 * rng.NormFloat64()
				if r >= r0 && r < r0+4 && c >= c0 && c < c0+4 {
					v += 1
				}
				x.Data[i*64+r*8+c] = float32(v)
			}
		}
	}
	return x, labels
}

// adam is a minimal Adam optimizer (Kingma & Ba) for the test.
type adam struct {
	params []nn.Param
	m, v   [][]float64
	t      int
}

func (a *adam) step(lr float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	if a.m == nil {
		for _, p := range a.params {
			a.m = append(a.m, make([]float64, p.T.Numel()))
			a.v = append(a.v, make([]float64, p.T.Numel()))
		}
	}
	a.t++
	c1, c2 := 1-math.Pow(b1, float64(a.t)), 1-math.Pow(b2, float64(a.t))
	for i, p := range a.params {
		for j, g := range p.T.Grad {
			a.m[i][j] = b1*a.m[i][j] + (1-b1)*float64(g)
			a.v[i][j] = b2*a.v[i][j] + (1-b2)*float64(g)*float64(g)
			p.T.Data[j] -= float32(lr * a.m[i][j] / c1 / (math.Sqrt(a.v[i][j]/c2) + eps))
		}
	}
}

// quadrantNet is the two-convolution network of TestTrainQuadrants for
// 1×8×8 images and 4 classes.
func quadrantNet(rng *rand.Rand) *nn.Sequential {
	return nn.NewSequential(
		nn.NewConv2d(1, 4, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng),
		nn.NewBatchNorm2d(4),
		nn.ReLU{},
		nn.MaxPool2d{Kernel: 2, Stride: 2},
		nn.NewConv2d(4, 8, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng),
		nn.ReLU{},
		nn.AvgPool2d{Kernel: 2, Stride: 2},
		nn.Flatten{},
		nn.NewLinear(32, 4, true, rng),
	)
}

// TestTrainQuadrants trains a two-convolution network end to end with Adam
// and requires the loss to fall at least 5× within 40 full-batch steps and
// the trained network to classify fresh images.
func TestTrainQuadrants(t *testing.T) {
	net := quadrantNet(newRng(21))
	x, labels := quadrants(64, 22)
	opt := &adam{params: net.Params()}
	const steps = 40
	var first, last float32
	for i := range steps {
		nn.ZeroGrad(net)
		loss := autograd.CrossEntropy(net.Forward(x), labels)
		loss.Backward()
		opt.step(0.02)
		if i == 0 {
			first = loss.Item()
		}
		last = loss.Item()
	}
	t.Logf("loss %.4g -> %.4g after %d steps", first, last, steps)
	if !(last*5 <= first) {
		t.Errorf("loss fell from %.4f to %.4f in %d steps, want at least 5x", first, last, steps)
	}

	net.SetTraining(false)
	xt, lt := quadrants(200, 23)
	logits := net.Forward(xt.In(&autograd.Context{NoGrad: true}))
	correct := 0
	for i, want := range lt {
		row := logits.Data[4*i : 4*i+4]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best == want {
			correct++
		}
	}
	if acc := float64(correct) / float64(len(lt)); acc < 0.95 {
		t.Errorf("test accuracy %.3f, want >= 0.95", acc)
	}
}

// TestTrainStepsWorkerIndependent trains the quadrant network for a few
// steps with 1, 2 and 8 workers (what GOMAXPROCS=1, 2 and 8 give) and
// requires bit-identical losses, parameters and batch-norm buffers.
func TestTrainStepsWorkerIndependent(t *testing.T) {
	x, labels := quadrants(96, 24)
	run := func(workers int) [][]float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		net := quadrantNet(newRng(25))
		opt := &adam{params: net.Params()}
		var out [][]float32
		for range 3 {
			nn.ZeroGrad(net)
			loss := autograd.CrossEntropy(net.Forward(x), labels)
			loss.Backward()
			opt.step(0.02)
			out = append(out, slices.Clone(loss.Data))
		}
		for _, p := range nn.StateDict(net) {
			out = append(out, slices.Clone(p.T.Data))
		}
		return out
	}
	want := run(1)
	for _, workers := range []int{2, 8} {
		got := run(workers)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("result %d (3 losses, then the state dict) differs between 1 and %d workers", i, workers)
			}
		}
	}
}
