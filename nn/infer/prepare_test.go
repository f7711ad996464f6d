package infer_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// evalForward runs m on x without recording a graph.
func evalForward(m nn.Module, x *autograd.Tensor) *autograd.Tensor {
	return m.Forward(x.Detach().In(&autograd.Context{NoGrad: true}))
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

// TestPrepareMatchesForward checks that a network prepared dense, run
// node by node through its layer graph (models.NewGraph), computes its
// Forward bit for bit, for every network models.New builds (both
// shortcuts, compacted widths).
func TestPrepareMatchesForward(t *testing.T) {
	rng := newRng(41)
	w := &models.Widths{Stem: 3, Stages: [][]models.BlockWidths{
		{{Inner: 2, Out: 3}}, {{Inner: 5, Out: 4, Pad: []int{-1, 0, 3}}}, {{Inner: 6, Out: 7, Pad: []int{6, 1, 2, -1}}}}}
	for _, c := range []struct {
		name string
		opts []models.Option
	}{
		{"resnet20", []models.Option{models.WithWidth(0.25)}},
		{"resnet20", []models.Option{models.WithWidth(0.25), models.WithShortcut(models.ShortcutB)}},
		{"resnet18", []models.Option{models.WithWidth(1.0 / 16)}},
		{"resnet34", []models.Option{models.WithWidth(1.0 / 16)}},
		{"vgg16", []models.Option{models.WithWidth(1.0 / 16)}},
		{"resnet8", []models.Option{models.WithWidths(w)}},
	} {
		m, err := models.New(c.name, 7, rng, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, rng)
		m.SetTraining(false)
		x := autograd.RandN(rng, 2, 3, 32, 32)
		p, rep := infer.Prepare(m, infer.Dense())
		if len(rep.Layers) == 0 || len(rep.SparseLayers()) != 0 {
			t.Fatalf("%s: report %v", c.name, rep)
		}
		if got, want := evalForward(p, x), evalForward(m, x); !slices.Equal(got.Data, want.Data) {
			t.Errorf("%s: the prepared network computes other logits than Forward", c.name)
		}
	}
}

// TestPrepareMatchesDense prepares narrow ResNet-20 (options A and B) and
// VGG-16 models at several zero fractions and compares their
// evaluation-mode outputs with the dense path at batch 1 and 8.
func TestPrepareMatchesDense(t *testing.T) {
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
			randomize(m, rng)
			m.SetTraining(false)
			for _, batch := range []int{1, 8} {
				name := fmt.Sprintf("%s/zeros%g/batch%d", tc.name, zeros, batch)
				x := autograd.RandN(rng, batch, 3, 32, 32)
				want := evalForward(m, x)
				p, r := infer.Prepare(m, infer.MinZeros(0.4))
				got := evalForward(p, x)
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

// TestPrepareReport checks the report of a hand-made model: the names,
// zero counts, the threshold and the zero ratio.
func TestPrepareReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	conv := nn.NewConv2d(3, 4, 3, nn.ConvOpts{Padding: 1}, rng)
	lin := nn.NewLinear(4, 3, true, rng)
	clear(conv.Weight.Data[:81]) // 81 of 108 zero: 75 %
	lin.Weight.Data[0] = 0       // 1 of 12 zero
	m := nn.NewSequential(conv, nn.ReLU{}, nn.GlobalAvgPool2d{}, nn.Flatten{}, lin)
	p, r := infer.Prepare(m)
	if len(r.Layers) != 2 || r.MinZeros != infer.EagerMinZeros {
		t.Fatalf("report %+v", r)
	}
	c, l := r.Layers[0], r.Layers[1]
	if c.Name != "0" || c.Kind != "Conv2d" || c.Zeros != 81 || c.Numel != 108 || !c.Sparse || !slices.Equal(c.Shape, []int{4, 3, 3, 3}) {
		t.Errorf("conv layer report %+v", c)
	}
	if l.Name != "4" || l.Kind != "Linear" || l.Zeros != 1 || l.Numel != 12 || l.Sparse {
		t.Errorf("linear layer report %+v", l)
	}
	if got, want := r.ZeroRatio(), 82.0/120; math.Abs(got-want) > 1e-12 {
		t.Errorf("ZeroRatio = %v, want %v", got, want)
	}
	if !slices.Equal(r.SparseLayers(), []string{"0"}) {
		t.Errorf("SparseLayers = %v", r.SparseLayers())
	}
	if r.String() == "" {
		t.Error("empty String")
	}
	x := autograd.RandN(rng, 2, 3, 32, 32)
	if d := maxRelDiff(evalForward(p, x), evalForward(m, x)); d > 1e-5 {
		t.Errorf("the prepared hand-made network differs from Forward by %g (relative)", d)
	}
	if _, r := infer.Prepare(m, infer.MinZeros(2)); len(r.SparseLayers()) != 0 {
		t.Errorf("threshold above 1 left sparse layers %v", r.SparseLayers())
	}
	// A network without a layer graph runs as its Forward, densely.
	if _, r := infer.Prepare(nn.NewSequential(conv, unknownLayer{})); len(r.Layers) != 1 || len(r.SparseLayers()) != 0 {
		t.Errorf("a network without a graph: report %+v, want its layer, dense", r)
	}
}

// unknownLayer is a module that models.NewGraph does not know.
type unknownLayer struct{ nn.ReLU }

// TestPreparedNetworkTrains checks that a prepared network computes
// densely, and its gradient reaches the weights, when it records a graph,
// and that preparing leaves the network's own layers as they were.
func TestPreparedNetworkTrains(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	nntest.ZeroWeights(m, rng, 0.9)
	m.SetTraining(false)
	x := autograd.RandN(rng, 2, 3, 32, 32)
	before := evalForward(m, x)
	p, r := infer.Prepare(m)
	if len(r.SparseLayers()) == 0 {
		t.Fatal("no sparse layers at 90 % zeros")
	}
	if after := evalForward(m, x); !slices.Equal(after.Data, before.Data) {
		t.Fatal("preparing changed what the network computes")
	}
	loss := autograd.CrossEntropy(p.Forward(x), []int{1, 2})
	loss.Backward()
	for _, q := range m.Params() {
		if q.T.Grad == nil {
			t.Fatalf("no gradient for %s through the prepared network", q.Name)
		}
	}
}

// TestPreparedNetworkConcurrent runs one prepared network on eight
// goroutines at once; each result must equal the sequential one bit for
// bit (run with -race to check the sharing of the sparse weights and
// their offset caches).
func TestPreparedNetworkConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	nntest.ZeroWeights(m, rng, 0.8)
	m.SetTraining(false)
	p, r := infer.Prepare(m)
	if len(r.SparseLayers()) != len(r.Layers) {
		t.Fatalf("sparse layers %v", r.SparseLayers())
	}
	const workers = 8
	xs := make([]*autograd.Tensor, workers)
	want := make([]*autograd.Tensor, workers)
	for i := range xs {
		xs[i] = autograd.RandN(rng, 1+i%3, 3, 32, 32)
		want[i] = evalForward(p, xs[i])
	}
	got := make([]*autograd.Tensor, workers)
	done := make(chan int)
	for i := range xs {
		go func() {
			got[i] = evalForward(p, xs[i])
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
