package models_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// infer runs m on x without recording a graph.
func infer(m nn.Module, x *autograd.Tensor) *autograd.Tensor {
	return m.Forward(x.Detach().In(&autograd.Context{NoGrad: true}))
}

// randomizeBN gives the batch-norm layers of m non-trivial running
// statistics, so that evaluation mode does more than scale by 1/sqrt(1+ε).
func randomizeBN(m nn.Module, rng *rand.Rand) {
	for _, p := range m.Buffers() {
		if p.Int64 {
			continue
		}
		for i := range p.T.Data {
			p.T.Data[i] = float32(0.5 + rng.Float64())
		}
	}
}

// maxRelDiff returns max |a−b| / (1 + max|b|).
func maxRelDiff(a, b *autograd.Tensor) float64 {
	var d, s float64
	for i := range b.Data {
		d = max(d, math.Abs(float64(a.Data[i]-b.Data[i])))
		s = max(s, math.Abs(float64(b.Data[i])))
	}
	return d / (1 + s)
}

// TestPrepareInferenceMatchesDense prepares narrow ResNet-20 (options A
// and B) and VGG-16 models at several zero fractions and compares their
// evaluation-mode outputs with the dense path at batch 1 and 8.
func TestPrepareInferenceMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name string
		opts []models.Option
	}{
		{"resnet20", []models.Option{models.WithWidth(0.5)}},
		{"resnet20", []models.Option{models.WithWidth(0.25), models.WithShortcut(models.ShortcutB)}},
		{"vgg16", []models.Option{models.WithWidth(0.125)}},
	} {
		for _, zeros := range []float64{0, 0.5, 0.7, 0.95, 1} {
			m, err := models.New(tc.name, 10, rng, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			nntest.ZeroWeights(m, rng, zeros)
			randomizeBN(m, rng)
			m.SetTraining(false)
			for _, batch := range []int{1, 8} {
				name := fmt.Sprintf("%s/zeros%g/batch%d", tc.name, zeros, batch)
				x := autograd.RandN(rng, batch, 3, 32, 32)
				nn.PrepareInferenceWith(m, nn.InferenceOptions{Dense: true})
				want := infer(m, x)
				r := nn.PrepareInferenceWith(m, nn.InferenceOptions{MinZeros: 0.4})
				got := infer(m, x)
				if zeros >= 0.5 && len(r.SparseLayers()) != len(r.Layers) {
					t.Errorf("%s: sparse layers %v of %d", name, r.SparseLayers(), len(r.Layers))
				}
				if zeros == 0 && len(r.SparseLayers()) != 0 {
					t.Errorf("%s: dense weights made sparse: %v", name, r.SparseLayers())
				}
				if d := maxRelDiff(got, want); d > 1e-5 {
					t.Errorf("%s: sparse and dense outputs differ by %g (relative)", name, d)
				}
			}
		}
	}
}

// TestPrepareInferenceReport checks the report of a hand-made model: the
// names, zero counts, the threshold and the zero ratio.
func TestPrepareInferenceReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	conv := nn.NewConv2d(2, 4, 3, nn.ConvOpts{Padding: 1}, rng)
	lin := nn.NewLinear(4, 3, true, rng)
	clear(conv.Weight.Data[:54]) // 54 of 72 zero: 75 %
	lin.Weight.Data[0] = 0       // 1 of 12 zero
	m := nn.NewSequential(conv, nn.ReLU{}, nn.GlobalAvgPool2d{}, nn.Flatten{}, lin)
	r := nn.PrepareInference(m)
	if len(r.Layers) != 2 || r.MinZeros != nn.DefaultMinZeros {
		t.Fatalf("report %+v", r)
	}
	c, l := r.Layers[0], r.Layers[1]
	if c.Name != "0" || c.Kind != "Conv2d" || c.Zeros != 54 || c.Numel != 72 || !c.Sparse || !slices.Equal(c.Shape, []int{4, 2, 3, 3}) {
		t.Errorf("conv layer report %+v", c)
	}
	if l.Name != "4" || l.Kind != "Linear" || l.Zeros != 1 || l.Numel != 12 || l.Sparse {
		t.Errorf("linear layer report %+v", l)
	}
	if got, want := r.ZeroRatio(), 55.0/84; math.Abs(got-want) > 1e-12 {
		t.Errorf("ZeroRatio = %v, want %v", got, want)
	}
	if !slices.Equal(r.SparseLayers(), []string{"0"}) {
		t.Errorf("SparseLayers = %v", r.SparseLayers())
	}
	if r.String() == "" {
		t.Error("empty String")
	}
	if r := nn.PrepareInferenceWith(m, nn.InferenceOptions{MinZeros: 2}); len(r.SparseLayers()) != 0 {
		t.Errorf("threshold above 1 left sparse layers %v", r.SparseLayers())
	}
}

// TestPreparedModelTrains checks that training a prepared model is the
// same as training an unprepared one: a Forward that records a graph
// drops the sparse weights, so that the next inference after the weights
// changed uses the new weights.
func TestPreparedModelTrains(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	nntest.ZeroWeights(m, rng, 0.9)
	x := autograd.RandN(rng, 2, 3, 16, 16)
	r := nn.PrepareInference(m)
	if len(r.SparseLayers()) == 0 {
		t.Fatal("no sparse layers at 90 % zeros")
	}
	// A training step: the graph is recorded, the gradient reaches the
	// weights (the sparse path would record nothing).
	loss := autograd.CrossEntropy(m.Forward(x), []int{1, 2})
	loss.Backward()
	conv := m.(*models.ResNet).Conv1
	if conv.Weight.Grad == nil {
		t.Fatal("no gradient for the first convolution of a prepared model")
	}
	for _, p := range m.Params() {
		for i := range p.T.Data {
			p.T.Data[i] += 0.01 // every former zero becomes nonzero
		}
	}
	m.SetTraining(false)
	got := infer(m, x)
	nn.PrepareInferenceWith(m, nn.InferenceOptions{Dense: true})
	want := infer(m, x)
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("output %d after training: %v, dense %v: stale sparse weights were used", i, got.Data[i], want.Data[i])
		}
	}
}

// TestPreparedModelConcurrent runs one prepared model on eight goroutines
// at once; each result must equal the sequential one bit for bit (run
// with -race to check the sharing of the sparse weights and their offset
// caches).
func TestPreparedModelConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	nntest.ZeroWeights(m, rng, 0.8)
	m.SetTraining(false)
	if r := nn.PrepareInference(m); len(r.SparseLayers()) != len(r.Layers) {
		t.Fatalf("sparse layers %v", r.SparseLayers())
	}
	const workers = 8
	xs := make([]*autograd.Tensor, workers)
	want := make([]*autograd.Tensor, workers)
	for i := range xs {
		xs[i] = autograd.RandN(rng, 1+i%3, 3, 16, 16)
		want[i] = infer(m, xs[i])
	}
	got := make([]*autograd.Tensor, workers)
	done := make(chan int)
	for i := range xs {
		go func() {
			got[i] = infer(m, xs[i])
			done <- i
		}()
	}
	for range xs {
		<-done
	}
	for i := range xs {
		if !slices.Equal(got[i].Data, want[i].Data) {
			t.Errorf("goroutine %d: result differs from the sequential run", i)
		}
	}
}
