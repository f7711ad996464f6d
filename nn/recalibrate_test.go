package nn_test

import (
	"fmt"
	"iter"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// recalNet builds the network of testdata/gen_recalibrate.py.
func recalNet() *nn.Sequential {
	rng := newRng(1)
	return nn.NewSequential(
		nn.NewConv2d(3, 6, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng),
		nn.NewBatchNorm2d(6),
		nn.ReLU{},
		nn.NewConv2d(6, 5, 3, nn.ConvOpts{Stride: 2, Padding: 1}, rng),
		nn.NewBatchNorm2d(5),
		nn.ReLU{},
		nn.GlobalAvgPool2d{},
		nn.Flatten{},
		nn.NewLinear(5, 4, true, rng),
	)
}

// fixtureData returns tensor name of f as a tensor.
func fixtureData(t *testing.T, f *safetensors.File, name string) *autograd.Tensor {
	t.Helper()
	if _, ok := f.Tensors[name]; !ok {
		t.Fatalf("fixture has no tensor %s", name)
	}
	data, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return autograd.FromSlice(data, shape...)
}

// sliceSeq yields xs.
func sliceSeq(xs []*autograd.Tensor) iter.Seq[*autograd.Tensor] {
	return func(yield func(*autograd.Tensor) bool) {
		for _, x := range xs {
			if !yield(x) {
				return
			}
		}
	}
}

// loadRecalFixture returns the network with the fixture's initial state,
// the fixture and its batches.
func loadRecalFixture(t *testing.T) (*nn.Sequential, *safetensors.File, []*autograd.Tensor) {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "testdata", "recalibrate", "convbn.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	net := recalNet()
	for _, p := range nn.StateDict(net) {
		copy(p.T.Data, fixtureData(t, f, "state."+p.Name).Data)
	}
	var xs []*autograd.Tensor
	for i := 0; ; i++ {
		if _, ok := f.Tensors[fmt.Sprintf("x.%d", i)]; !ok {
			break
		}
		xs = append(xs, fixtureData(t, f, fmt.Sprintf("x.%d", i)))
	}
	return net, f, xs
}

func TestRecalibrateBatchNormMatchesPyTorch(t *testing.T) {
	net, f, xs := loadRecalFixture(t)
	if len(xs) != 4 {
		t.Fatalf("fixture has %d batches, want 4", len(xs))
	}
	if got := nn.RecalibrateBatchNorm(net, sliceSeq(xs), 0); got != len(xs) {
		t.Fatalf("RecalibrateBatchNorm used %d batches, want %d", got, len(xs))
	}
	for _, p := range nn.StateDict(net) {
		want := fixtureData(t, f, "want."+p.Name).Data
		for i, w := range want {
			g := p.T.Data[i]
			if math.Abs(float64(g-w)) > 1e-5*(1+math.Abs(float64(w))) {
				t.Errorf("%s[%d] = %v, PyTorch %v", p.Name, i, g, w)
			}
		}
	}
	for _, b := range nn.BatchNorms(net) {
		if b.CumulativeAverage || b.Momentum != 0.1 {
			t.Errorf("settings not restored: CumulativeAverage %v, Momentum %v", b.CumulativeAverage, b.Momentum)
		}
	}
	// Left in evaluation mode: the output is PyTorch's in eval mode.
	x := fixtureData(t, f, "eval_x")
	out := net.Forward(x.In(&autograd.Context{NoGrad: true}))
	for i, w := range fixtureData(t, f, "eval_out").Data {
		if math.Abs(float64(out.Data[i]-w)) > 1e-4*(1+math.Abs(float64(w))) {
			t.Errorf("eval output[%d] = %v, PyTorch %v", i, out.Data[i], w)
		}
	}
}

func TestRecalibrateBatchNormLimitAndEmpty(t *testing.T) {
	net, _, xs := loadRecalFixture(t)
	before := stateCopy(net)
	if got := nn.RecalibrateBatchNorm(net, sliceSeq(nil), 0); got != 0 {
		t.Fatalf("no batches: used %d", got)
	}
	if !slices.EqualFunc(before, stateCopy(net), slices.Equal) {
		t.Error("RecalibrateBatchNorm changed the state without batches")
	}
	// n = 2 stops the sequence after two batches: the result is that of
	// the first two batches alone.
	pulled := 0
	seq := func(yield func(*autograd.Tensor) bool) {
		for _, x := range xs {
			pulled++
			if !yield(x) {
				return
			}
		}
	}
	if got := nn.RecalibrateBatchNorm(net, seq, 2); got != 2 || pulled != 2 {
		t.Fatalf("n = 2: used %d batches, pulled %d", got, pulled)
	}
	two := stateCopy(net)
	net2, _, _ := loadRecalFixture(t)
	nn.RecalibrateBatchNorm(net2, sliceSeq(xs[:2]), 0)
	if !slices.EqualFunc(two, stateCopy(net2), slices.Equal) {
		t.Error("n = 2 differs from the first two batches alone")
	}
	if got := nn.BatchNorms(net)[0].BatchesTracked(); got != 2 {
		t.Errorf("num_batches_tracked %d, want 2", got)
	}
}

// stateCopy returns a copy of the state tensors of m.
func stateCopy(m nn.Module) [][]float32 {
	var out [][]float32
	for _, p := range nn.StateDict(m) {
		out = append(out, slices.Clone(p.T.Data))
	}
	return out
}

func TestRecalibrateBatchNormDeterministicAcrossWorkers(t *testing.T) {
	rng := newRng(7)
	var xs []*autograd.Tensor
	for _, n := range []int{9, 16, 5} {
		xs = append(xs, autograd.RandN(rng, n, 3, 16, 16))
	}
	var want [][]float32
	for _, workers := range []int{1, 2, 3, 8} {
		prev := parallel.SetWorkers(workers)
		net := recalNet()
		nn.RecalibrateBatchNorm(net, sliceSeq(xs), 0)
		parallel.SetWorkers(prev)
		got := stateCopy(net)
		if want == nil {
			want = got
			continue
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%d workers: statistics differ from 1 worker", workers)
		}
	}
}

func TestBatchNormCumulativeAverage(t *testing.T) {
	// Without a network around it: the running mean after k batches is the
	// mean of the k batch means, and momentum applies again once the flag
	// is off.
	b := nn.NewBatchNorm2d(2)
	b.ResetRunningStats()
	b.CumulativeAverage = true
	rng := newRng(3)
	var sum [2]float64
	for k := 1; k <= 5; k++ {
		x := autograd.RandN(rng, 3, 2, 4, 4)
		for i, v := range x.Data {
			x.Data[i] = v + float32(k) // batch means near k
		}
		b.Forward(x.In(&autograd.Context{NoGrad: true}))
		for c := range 2 {
			var s float64
			for n := range 3 {
				for _, v := range x.Data[(n*2+c)*16 : (n*2+c+1)*16] {
					s += float64(v)
				}
			}
			sum[c] += s / 48
		}
	}
	for c := range 2 {
		if got, want := float64(b.RunningMean.Data[c]), sum[c]/5; math.Abs(got-want) > 1e-5 {
			t.Errorf("running mean[%d] = %v, want the mean of the batch means %v", c, got, want)
		}
	}
	if b.BatchesTracked() != 5 {
		t.Errorf("num_batches_tracked %d, want 5", b.BatchesTracked())
	}
}
