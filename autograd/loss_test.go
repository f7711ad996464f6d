package autograd_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// refLogSoftmax computes log-softmax of each row in float64.
func refLogSoftmax(x []float32, rows, cols int) []float64 {
	out := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		row := x[i*cols : (i+1)*cols]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		for j, v := range row {
			out[i*cols+j] = float64(v) - m - math.Log(s)
		}
	}
	return out
}

func randLabels(rng *rand.Rand, n, classes int) []int {
	labels := make([]int, n)
	for i := range labels {
		labels[i] = rng.IntN(classes)
	}
	return labels
}

func TestLogSoftmaxValues(t *testing.T) {
	rng := newRNG(20)
	x := autograd.RandN(rng, 4, 7)
	// Large logits must not overflow.
	x.Data[0], x.Data[1], x.Data[8] = 1000, 999, -1000
	y := autograd.LogSoftmax(x)
	want := refLogSoftmax(x.Data, 4, 7)
	for i, v := range y.Data {
		if math.Abs(float64(v)-want[i]) > 1e-5*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("element %d = %v, want %v", i, v, want[i])
		}
	}
}

func TestLogSoftmaxGradients(t *testing.T) {
	rng := newRNG(21)
	x := param(rng, 5, 6)
	big := param(rng, 3, 4)
	for i := range big.Data {
		big.Data[i] += 1000
	}
	for _, in := range []*autograd.Tensor{x, big} {
		f := func() *autograd.Tensor { return autograd.LogSoftmax(in) }
		if err := gradcheck.Check(f, []*autograd.Tensor{in}, gradcheck.Options{}); err != nil {
			t.Error(err)
		}
	}
	mustPanic(t, func() { autograd.LogSoftmax(autograd.New(2, 3, 4)) }, "autograd.LogSoftmax", "[2 3 4]")
}

func TestCrossEntropyValues(t *testing.T) {
	rng := newRNG(22)
	const n, k = 9, 5
	x := autograd.RandN(rng, n, k)
	x.Data[0], x.Data[k+1] = 1000, -1000 // stability
	labels := randLabels(rng, n, k)
	labels[1] = 1 // the -1000 logit is the label: loss about 1000
	lsm := refLogSoftmax(x.Data, n, k)
	want := 0.0
	for i, l := range labels {
		want -= lsm[i*k+l]
	}
	if got := float64(autograd.CrossEntropySum(x, labels).Item()); math.Abs(got-want) > 1e-6*math.Abs(want) {
		t.Errorf("CrossEntropySum = %v, want %v", got, want)
	}
	if got := float64(autograd.CrossEntropy(x, labels).Item()); math.Abs(got-want/n) > 1e-6*math.Abs(want/n) {
		t.Errorf("CrossEntropy = %v, want %v", got, want/n)
	}
	if got := autograd.CrossEntropy(x, labels).Rank(); got != 0 {
		t.Errorf("CrossEntropy rank = %d, want 0", got)
	}
}

func TestCrossEntropyGradients(t *testing.T) {
	rng := newRNG(23)
	x := param(rng, 6, 5)
	labels := randLabels(rng, 6, 5)
	labels[2] = labels[3] // repeated labels
	ce := func() *autograd.Tensor { return autograd.CrossEntropy(x, labels) }
	ceSum := func() *autograd.Tensor { return autograd.CrossEntropySum(x, labels) }
	for name, f := range map[string]func() *autograd.Tensor{"mean": ce, "sum": ceSum} {
		if err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Large logits: 1000 + O(1) offsets.
	big := param(rng, 4, 3)
	for i := range big.Data {
		big.Data[i] = 1000 + 2*big.Data[i]
	}
	bigLabels := []int{0, 2, 1, 2}
	f := func() *autograd.Tensor { return autograd.CrossEntropy(big, bigLabels) }
	if err := gradcheck.Check(f, []*autograd.Tensor{big}, gradcheck.Options{}); err != nil {
		t.Errorf("large logits: %v", err)
	}
	// The analytic gradient is (softmax − onehot)/N.
	x.Grad = nil
	autograd.CrossEntropy(x, labels).Backward()
	lsm := refLogSoftmax(x.Data, 6, 5)
	for i := 0; i < 6; i++ {
		for j := 0; j < 5; j++ {
			want := math.Exp(lsm[i*5+j]) / 6
			if j == labels[i] {
				want -= 1.0 / 6
			}
			if got := float64(x.Grad[i*5+j]); math.Abs(got-want) > 1e-6 {
				t.Fatalf("grad[%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
}

func TestCrossEntropyMatchesLogSoftmax(t *testing.T) {
	rng := newRNG(24)
	x := param(rng, 7, 4)
	labels := randLabels(rng, 7, 4)
	loss := autograd.CrossEntropy(x, labels)
	loss.Backward()
	fused := append([]float32(nil), x.Grad...)
	x.Grad = nil
	// −mean of the picked log-probabilities, through LogSoftmax and a mask.
	mask := autograd.New(7, 4)
	for i, l := range labels {
		mask.Data[i*4+l] = -1.0 / 7
	}
	loss2 := autograd.Sum(autograd.Mul(autograd.LogSoftmax(x), mask))
	loss2.Backward()
	if math.Abs(float64(loss.Item()-loss2.Item())) > 1e-6 {
		t.Errorf("CrossEntropy = %v, via LogSoftmax = %v", loss.Item(), loss2.Item())
	}
	for i := range fused {
		if math.Abs(float64(fused[i]-x.Grad[i])) > 1e-6 {
			t.Fatalf("grad %d: fused %v, via LogSoftmax %v", i, fused[i], x.Grad[i])
		}
	}
}

func TestCrossEntropyPanics(t *testing.T) {
	x := autograd.New(3, 4)
	mustPanic(t, func() { autograd.CrossEntropy(x, []int{0, 4, 1}) }, "autograd.CrossEntropy", "label 4", "index 1")
	mustPanic(t, func() { autograd.CrossEntropySum(x, []int{0, -1, 1}) }, "autograd.CrossEntropySum", "label -1", "index 1")
	mustPanic(t, func() { autograd.CrossEntropy(x, []int{0, 1}) }, "autograd.CrossEntropy", "2 labels", "[3 4]")
	mustPanic(t, func() { autograd.CrossEntropy(autograd.New(12), []int{0}) }, "autograd.CrossEntropy", "[12]")
}

// TestCrossEntropyWorkerIndependent checks bit-identical loss and gradient
// for different worker counts.
func TestCrossEntropyWorkerIndependent(t *testing.T) {
	rng := newRNG(25)
	x := param(rng, 300, 97)
	labels := randLabels(rng, 300, 97)
	run := func(workers int) (float32, []float32, []float32) {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		x.Grad = nil
		loss := autograd.CrossEntropy(x, labels)
		loss.Backward()
		return loss.Item(), x.Grad, autograd.LogSoftmax(x).Data
	}
	l1, g1, s1 := run(1)
	l4, g4, s4 := run(4)
	if l1 != l4 || !equal(g1, g4) || !equal(s1, s4) {
		t.Errorf("results differ between 1 and 4 workers: loss %v vs %v", l1, l4)
	}
}

func benchmarkCrossEntropy(b *testing.B, n, k int) {
	rng := newRNG(26)
	// Steady state of a training loop: op buffers come from an arena.
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x := param(rng, n, k).In(ctx)
	labels := randLabels(rng, n, k)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		autograd.CrossEntropy(x, labels).Backward()
	}
}

// BenchmarkCrossEntropy measures the fused forward and backward pass.
func BenchmarkCrossEntropy(b *testing.B) {
	b.Run("128x10", func(b *testing.B) { benchmarkCrossEntropy(b, 128, 10) })
	b.Run("700x10000", func(b *testing.B) { benchmarkCrossEntropy(b, 700, 10000) })
}

// opsFix is a PyTorch fixture from testdata/ops, written by
// testdata/gen_ops.py.
type opsFix struct {
	t    *testing.T
	name string
	f    *safetensors.File
}

func loadOpsFixture(t *testing.T, name string) opsFix {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "testdata", "ops", name+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return opsFix{t, name, f}
}

// tensor returns the fixture tensor called name.
func (o opsFix) tensor(name string) *autograd.Tensor {
	o.t.Helper()
	data, shape, err := o.f.Float32(name)
	if err != nil {
		o.t.Fatalf("%s: %v", o.name, err)
	}
	return autograd.FromSlice(data, shape...)
}

// param returns the fixture tensor called name as a leaf requiring a
// gradient.
func (o opsFix) param(name string) *autograd.Tensor {
	o.t.Helper()
	return o.tensor(name).RequireGrad()
}

// ints returns the integer fixture tensor called name.
func (o opsFix) ints(name string) []int {
	o.t.Helper()
	v, err := o.f.Tensors[name].Int64()
	if err != nil {
		o.t.Fatalf("%s: tensor %q: %v", o.name, name, err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// float returns the metadata entry key as a number.
func (o opsFix) float(key string) float32 {
	o.t.Helper()
	v, err := strconv.ParseFloat(o.f.Metadata[key], 64)
	if err != nil {
		o.t.Fatalf("%s: metadata %q: %v", o.name, key, err)
	}
	return float32(v)
}

// check compares got (of the given shape) with the fixture tensor want
// within atol + rtol·|want|.
func (o opsFix) check(want string, got []float32, shape []int, rtol, atol float64) {
	o.t.Helper()
	w := o.tensor(want)
	if !equal(w.Shape(), shape) {
		o.t.Errorf("%s: %s has shape %v, want %v", o.name, want, shape, w.Shape())
		return
	}
	for i, v := range w.Data {
		if d := math.Abs(float64(got[i]) - float64(v)); !(d <= atol+rtol*math.Abs(float64(v))) {
			o.t.Errorf("%s: %s[%d] = %v, PyTorch %v", o.name, want, i, got[i], v)
			return
		}
	}
}

func TestLossesMatchPyTorch(t *testing.T) {
	for _, name := range []string{"cross_entropy", "cross_entropy_large"} {
		fx := loadOpsFixture(t, name)
		x, labels := fx.param("logits"), fx.ints("labels")
		loss := autograd.CrossEntropy(x, labels)
		loss.Backward()
		fx.check("loss", loss.Data, loss.Shape(), 1e-5, 1e-6)
		fx.check("glogits", x.Grad, x.Shape(), 1e-4, 1e-6)

		x.Grad = nil
		loss = autograd.CrossEntropySum(x, labels)
		loss.Backward()
		fx.check("loss_sum", loss.Data, loss.Shape(), 1e-5, 1e-6)
		fx.check("glogits_sum", x.Grad, x.Shape(), 1e-4, 1e-6)

		x.Grad = nil
		lsm := autograd.LogSoftmax(x)
		lsm.BackwardWith(fx.tensor("p").Data)
		fx.check("log_softmax", lsm.Data, lsm.Shape(), 1e-5, 1e-5)
		fx.check("glog_softmax", x.Grad, x.Shape(), 1e-4, 1e-5)
	}
}
