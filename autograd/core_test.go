package autograd_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 42)) }

// param returns a random leaf tensor that requires a gradient.
func param(rng *rand.Rand, shape ...int) *autograd.Tensor {
	return autograd.RandN(rng, shape...).RequireGrad()
}

// mustPanic runs f and checks that it panics with a message containing all
// of the given fragments.
func mustPanic(t *testing.T, f func(), fragments ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want one mentioning %q", fragments)
		}
		msg, _ := r.(string)
		if err, ok := r.(error); ok {
			msg = err.Error()
		}
		for _, f := range fragments {
			if !strings.Contains(msg, f) {
				t.Fatalf("panic %q does not mention %q", msg, f)
			}
		}
	}()
	f()
}

func TestElementwiseGradients(t *testing.T) {
	rng := newRNG(1)
	cases := []struct {
		name   string
		shapeA []int
		shapeB []int
		op     func(a, b *autograd.Tensor) *autograd.Tensor
	}{
		{"Add same", []int{3, 4}, []int{3, 4}, autograd.Add},
		{"Sub same", []int{2, 3, 4}, []int{2, 3, 4}, autograd.Sub},
		{"Mul same", []int{5}, []int{5}, autograd.Mul},
		{"Add row bias", []int{4, 3}, []int{3}, autograd.Add},
		{"Mul column", []int{4, 3}, []int{4, 1}, autograd.Mul},
		{"Sub both broadcast", []int{4, 1}, []int{1, 3}, autograd.Sub},
		{"Mul scalar", []int{2, 3}, []int{1}, autograd.Mul},
		{"Add channel", []int{2, 3, 2, 2}, []int{3, 1, 1}, autograd.Add},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := param(rng, c.shapeA...), param(rng, c.shapeB...)
			if err := gradcheck.Check(func() *autograd.Tensor { return c.op(a, b) }, []*autograd.Tensor{a, b}, gradcheck.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBroadcastValues(t *testing.T) {
	a := autograd.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := autograd.FromSlice([]float32{10, 20, 30}, 3)
	c := autograd.FromSlice([]float32{100, 200}, 2, 1)
	if got, want := autograd.Add(a, b).Data, []float32{11, 22, 33, 14, 25, 36}; !equal(got, want) {
		t.Errorf("Add row = %v, want %v", got, want)
	}
	if got, want := autograd.Mul(a, c).Data, []float32{100, 200, 300, 800, 1000, 1200}; !equal(got, want) {
		t.Errorf("Mul column = %v, want %v", got, want)
	}
	if got := autograd.Sub(c, b).Shape(); !equal(got, []int{2, 3}) {
		t.Errorf("Sub shape = %v, want [2 3]", got)
	}
	mustPanic(t, func() { autograd.Add(a, autograd.New(2)) }, "autograd.Add", "[2 3]", "[2]")
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestUnaryGradients(t *testing.T) {
	rng := newRNG(2)
	x := param(rng, 3, 5)
	// Keep ReLU inputs away from the kink at 0.
	for i, v := range x.Data {
		if v > -0.05 && v < 0.05 {
			x.Data[i] = 0.3
		}
	}
	ops := map[string]func(*autograd.Tensor) *autograd.Tensor{
		"ReLU":      autograd.ReLU,
		"Sigmoid":   autograd.Sigmoid,
		"Tanh":      autograd.Tanh,
		"Scale":     func(x *autograd.Tensor) *autograd.Tensor { return autograd.Scale(x, -2.5) },
		"AddScalar": func(x *autograd.Tensor) *autograd.Tensor { return autograd.AddScalar(x, 3) },
		"Sum":       autograd.Sum,
		"Mean":      autograd.Mean,
		"Reshape":   func(x *autograd.Tensor) *autograd.Tensor { return autograd.Reshape(x, 5, -1) },
		"Flatten":   func(x *autograd.Tensor) *autograd.Tensor { return autograd.Flatten(autograd.Reshape(x, 3, 5, 1)) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			if err := gradcheck.Check(func() *autograd.Tensor { return op(x) }, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMatMulGradients(t *testing.T) {
	rng := newRNG(3)
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			m, k, n := 3, 4, 5
			sa, sb := []int{m, k}, []int{k, n}
			if ta {
				sa = []int{k, m}
			}
			if tb {
				sb = []int{n, k}
			}
			a, b := param(rng, sa...), param(rng, sb...)
			f := func() *autograd.Tensor { return autograd.MatMul(a, b, ta, tb) }
			if err := gradcheck.Check(f, []*autograd.Tensor{a, b}, gradcheck.Options{}); err != nil {
				t.Errorf("transA=%v transB=%v: %v", ta, tb, err)
			}
		}
	}
	mustPanic(t, func() { autograd.MatMul(autograd.New(2, 3), autograd.New(2, 3), false, false) }, "autograd.MatMul", "[2 3]")
}

func TestMatMulValues(t *testing.T) {
	a := autograd.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := autograd.FromSlice([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	if got, want := autograd.MatMul(a, b, false, false).Data, []float32{4, 5, 10, 11}; !equal(got, want) {
		t.Errorf("MatMul = %v, want %v", got, want)
	}
	if got, want := autograd.MatMul(a, a, false, true).Data, []float32{14, 32, 32, 77}; !equal(got, want) {
		t.Errorf("MatMul a·aᵀ = %v, want %v", got, want)
	}
}

func TestLinearGradients(t *testing.T) {
	rng := newRNG(4)
	x, w, b := param(rng, 6, 4), param(rng, 3, 4), param(rng, 3)
	f := func() *autograd.Tensor { return autograd.Linear(x, w, b) }
	if err := gradcheck.Check(f, []*autograd.Tensor{x, w, b}, gradcheck.Options{}); err != nil {
		t.Fatal(err)
	}
	noBias := func() *autograd.Tensor { return autograd.Linear(x, w, nil) }
	if err := gradcheck.Check(noBias, []*autograd.Tensor{x, w}, gradcheck.Options{}); err != nil {
		t.Fatal(err)
	}
	mustPanic(t, func() { autograd.Linear(autograd.New(2, 5), w, b) }, "autograd.Linear", "[2 5]", "[3 4]")
}

// TestLinearBiasWorkerIndependent checks the parallel bias passes of
// Linear at a size where they split into several chunks of rows (forward)
// and columns (bias gradient): the output and every gradient are the same
// for 1, 2 and 8 workers, and the bias gradient equals the upstream rows
// added one after another, as the serial loop adds them.
func TestLinearBiasWorkerIndependent(t *testing.T) {
	rng := newRNG(6)
	const batch, in, out = 37, 5, 1100 // 5 row chunks, 5 column chunks
	x, w, b := param(rng, batch, in), param(rng, out, in), param(rng, out)
	up := param(rng, batch, out)
	run := func(workers int) [][]float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		x.Grad, w.Grad = nil, nil
		b.Grad = make([]float32, out)
		copy(b.Grad, up.Data[:out]) // accumulates into an existing gradient
		y := autograd.Linear(x, w, b)
		autograd.Sum(autograd.Mul(y, up)).Backward()
		return [][]float32{slices.Clone(y.Data), x.Grad, w.Grad, b.Grad}
	}
	want := run(1)
	wantBias := slices.Clone(up.Data[:out])
	for i := range batch {
		for j, v := range up.Data[i*out : (i+1)*out] {
			wantBias[j] += v
		}
	}
	if !slices.Equal(want[3], wantBias) {
		t.Error("bias gradient differs from the rows added in order")
	}
	for _, workers := range []int{2, 8} {
		got := run(workers)
		for i, name := range []string{"output", "grad x", "grad w", "grad bias"} {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s differs between 1 and %d workers", name, workers)
			}
		}
	}
}

func TestGradientAccumulatesAndNoGrad(t *testing.T) {
	w := autograd.FromSlice([]float32{1, 2}, 2).RequireGrad()
	for i := 0; i < 2; i++ {
		autograd.Sum(autograd.Mul(w, w)).Backward()
	}
	if got, want := w.Grad, []float32{4, 8}; !equal(got, want) {
		t.Fatalf("accumulated grad = %v, want %v", got, want)
	}
	w.ZeroGrad()
	if got := w.Grad; !equal(got, []float32{0, 0}) {
		t.Fatalf("after ZeroGrad grad = %v", got)
	}
	noGrad := &autograd.Context{NoGrad: true}
	if y := autograd.Mul(autograd.FromSlice([]float32{3, 4}, 2).In(noGrad), w); y.RequiresGrad() || !y.IsLeaf() {
		t.Fatal("op result in a NoGrad context requires a gradient")
	}
	// A tensor used twice receives both contributions (diamond graph).
	w.Grad = nil
	y := autograd.Mul(w, w)
	autograd.Sum(autograd.Add(y, y)).Backward()
	if got, want := w.Grad, []float32{4, 8}; !equal(got, want) {
		t.Fatalf("diamond grad = %v, want %v", got, want)
	}
}

// TestElementwiseAndReduceWorkerIndependent checks bit-identical results
// for 1, 2 and 8 workers at a size where the element-wise loops
// (32768-element chunks) and the Sum/Mean reductions (16384-element
// chunks) split into several chunks.
func TestElementwiseAndReduceWorkerIndependent(t *testing.T) {
	rng := newRNG(5)
	const rows, cols = 9, 8192 // 73728 elements
	a, b, bias := param(rng, rows, cols), param(rng, rows, cols), param(rng, cols)
	run := func(workers int) [][]float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		a.Grad, b.Grad, bias.Grad = nil, nil, nil
		h := autograd.Mul(autograd.Tanh(autograd.Add(a, b)), autograd.Sigmoid(autograd.Sub(b, bias)))
		loss := autograd.Add(autograd.Sum(h), autograd.Mean(autograd.ReLU(autograd.Scale(a, 3))))
		loss.Backward()
		return [][]float32{slices.Clone(h.Data), slices.Clone(loss.Data), a.Grad, b.Grad, bias.Grad}
	}
	want := run(1)
	for _, workers := range []int{2, 8} {
		got := run(workers)
		for i, name := range []string{"product", "loss", "grad a", "grad b", "grad bias"} {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s differs between 1 and %d workers", name, workers)
			}
		}
	}
}

func TestReshapePanics(t *testing.T) {
	x := autograd.New(3, 5)
	mustPanic(t, func() { autograd.Reshape(x, 4, 4) }, "autograd.Reshape", "[3 5]", "[4 4]")
	mustPanic(t, func() { autograd.Reshape(x, 2, -1) }, "autograd.Reshape", "[3 5]", "[2 7]")
	mustPanic(t, func() { autograd.Reshape(x, -1, -1) }, "autograd.Reshape", "[3 5]", "[-1 -1]")
	mustPanic(t, func() { autograd.Reshape(autograd.New(0, 5), 0, -1) }, "autograd.Reshape", "[0 5]")
	mustPanic(t, func() { autograd.Flatten(autograd.New()) }, "autograd.Flatten", "scalar")
	y := autograd.Reshape(param(newRNG(6), 3, 5), 15)
	mustPanic(t, func() { y.BackwardWith(make([]float32, 14)) }, "autograd.BackwardWith", "14", "[15]")
}
