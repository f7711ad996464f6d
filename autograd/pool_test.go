package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
)

// poolOp applies one of the pooling ops by name.
func poolOp(op string, x *autograd.Tensor, kernel, stride, padding int) *autograd.Tensor {
	switch op {
	case "max":
		return autograd.MaxPool2d(x, kernel, stride, padding)
	case "avg":
		return autograd.AvgPool2d(x, kernel, stride, padding)
	}
	return autograd.GlobalAvgPool2d(x)
}

func TestPoolMatchesPyTorch(t *testing.T) {
	// The same table as POOL_CASES in testdata/gen_conv_pool.py.
	cases := []struct {
		name                    string
		op                      string
		kernel, stride, padding int
	}{
		{"maxpool_k3_s2_p1", "max", 3, 2, 1},
		{"maxpool_k2_s2_p0_odd", "max", 2, 2, 0},
		{"maxpool_k3_s1_p1", "max", 3, 1, 1},
		{"avgpool_k3_s2_p1", "avg", 3, 2, 1},
		{"avgpool_k2_s2_p0_odd", "avg", 2, 2, 0},
		{"avgpool_k3_s1_p1", "avg", 3, 1, 1},
		{"avgpool_k4_s4_p2", "avg", 4, 4, 2},
		{"globalavg", "global", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := loadFixture(t, c.name)
			if got, want := f.Metadata["op"]+" "+f.Metadata["kernel"]+" "+f.Metadata["stride"]+" "+f.Metadata["padding"],
				fmt.Sprintf("%s %d %d %d", c.op, c.kernel, c.stride, c.padding); got != want {
				t.Fatalf("fixture says %q, table says %q", got, want)
			}
			x := fixtureTensor(t, f, "x", false).RequireGrad()
			out := poolOp(c.op, x, c.kernel, c.stride, c.padding)
			want := fixtureTensor(t, f, "out", false)
			if !slices.Equal(out.Shape(), want.Shape()) {
				t.Fatalf("output shape %v, want %v", out.Shape(), want.Shape())
			}
			closeTo(t, "out", out.Data, want.Data, 1e-6, 1e-6)
			out.BackwardWith(fixtureTensor(t, f, "p", false).Data)
			closeTo(t, "grad x", x.Grad, fixtureTensor(t, f, "gx", false).Data, 1e-6, 1e-6)
		})
	}
}

// distinctInput returns a tensor whose elements are a random permutation of
// well-separated values, so that max-pool has no ties even after a
// finite-difference step.
func distinctInput(rng *rand.Rand, shape ...int) *autograd.Tensor {
	x := autograd.New(shape...)
	for i, j := range rng.Perm(x.Numel()) {
		x.Data[i] = 0.1*float32(j) - 0.05*float32(x.Numel())
	}
	return x.RequireGrad()
}

func TestPoolGradients(t *testing.T) {
	cases := []struct {
		op                      string
		shape                   []int
		kernel, stride, padding int
	}{
		{"max", []int{2, 3, 6, 6}, 2, 2, 0},
		{"max", []int{2, 2, 7, 9}, 3, 2, 1},    // padding, overlapping windows, odd sizes
		{"max", []int{1, 2, 5, 6}, 3, 1, 1},    // heavy overlap
		{"max", []int{1, 3, 7, 7}, 3, 0, 0},    // zero stride means kernel
		{"avg", []int{2, 3, 6, 6}, 2, 2, 0},    //
		{"avg", []int{2, 2, 7, 9}, 3, 2, 1},    // padding counts toward the divisor
		{"avg", []int{1, 2, 5, 6}, 3, 1, 1},    // heavy overlap
		{"avg", []int{2, 1, 8, 8}, 4, 4, 2},    // padding of half the kernel
		{"global", []int{3, 4, 5, 3}, 0, 0, 0}, // adaptive average to 1×1
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s %v k%d s%d p%d", c.op, c.shape, c.kernel, c.stride, c.padding), func(t *testing.T) {
			x := distinctInput(newRNG(uint64(200+i)), c.shape...)
			f := func() *autograd.Tensor { return poolOp(c.op, x, c.kernel, c.stride, c.padding) }
			if err := gradcheck.Check(f, []*autograd.Tensor{x}, gradcheck.Options{Seed: uint64(i + 1)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMaxPoolTiesGoToFirstMax(t *testing.T) {
	// A constant 4×4 plane with 2×2 windows at stride 2: each window's
	// gradient goes to its top-left element, as on PyTorch's CPU.
	x := autograd.Full(1, 1, 1, 4, 4).RequireGrad()
	out := autograd.MaxPool2d(x, 2, 2, 0)
	out.BackwardWith([]float32{1, 2, 3, 4})
	want := []float32{
		1, 0, 2, 0,
		0, 0, 0, 0,
		3, 0, 4, 0,
		0, 0, 0, 0,
	}
	if !slices.Equal(x.Grad, want) {
		t.Fatalf("grad = %v, want %v", x.Grad, want)
	}
	// With padding, the first window's first valid element wins.
	y := autograd.Full(-2, 1, 1, 3, 3).RequireGrad()
	out = autograd.MaxPool2d(y, 3, 2, 1)
	if !slices.Equal(out.Data, []float32{-2, -2, -2, -2}) {
		t.Fatalf("padded max = %v, want all -2 (padding must be -inf)", out.Data)
	}
	out.BackwardWith([]float32{1, 1, 1, 1})
	if want := []float32{1, 1, 0, 1, 1, 0, 0, 0, 0}; !slices.Equal(y.Grad, want) {
		t.Fatalf("padded grad = %v, want %v", y.Grad, want)
	}
}

func TestMaxPoolNaNPropagates(t *testing.T) {
	x := autograd.FromSlice([]float32{1, float32(math.NaN()), 3, 2}, 1, 1, 2, 2)
	if v := autograd.MaxPool2d(x, 2, 2, 0).Data[0]; !math.IsNaN(float64(v)) {
		t.Fatalf("max of a window holding NaN = %g, want NaN", v)
	}
}

func TestAvgPoolValues(t *testing.T) {
	// 3×3 window, stride 1, padding 1 on a 2×2 plane: every window holds
	// all four values plus five padding zeros, divided by 9.
	x := autograd.FromSlice([]float32{1, 2, 3, 4}, 1, 1, 2, 2)
	out := autograd.AvgPool2d(x, 3, 1, 1)
	for i, v := range out.Data {
		if math.Abs(float64(v)-10.0/9) > 1e-6 {
			t.Fatalf("out[%d] = %g, want 10/9", i, v)
		}
	}
	g := autograd.GlobalAvgPool2d(autograd.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 1, 1, 3))
	if !slices.Equal(g.Shape(), []int{2, 1, 1, 1}) || !slices.Equal(g.Data, []float32{2, 5}) {
		t.Fatalf("GlobalAvgPool2d = %v, want shape [2 1 1 1] values [2 5]", g)
	}
}

func TestPoolDeterministicAcrossWorkers(t *testing.T) {
	rng := newRNG(77)
	x := param(rng, 6, 5, 13, 11)
	for _, op := range []string{"max", "avg", "global"} {
		var want [][]float32
		for _, workers := range []int{1, 2, 8} {
			prev := parallel.SetWorkers(workers)
			x.Grad = nil
			out := poolOp(op, x, 3, 2, 1)
			out.BackwardWith(autograd.Full(0.5, out.Shape()...).Data)
			parallel.SetWorkers(prev)
			got := [][]float32{out.Data, x.Grad}
			if want == nil {
				want = got
				continue
			}
			if !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
				t.Errorf("%s pool with %d workers differs from 1 worker", op, workers)
			}
		}
	}
}

func TestPoolShapeErrors(t *testing.T) {
	mustPanic(t, func() { autograd.MaxPool2d(autograd.New(3, 8, 8), 2, 2, 0) }, "autograd.MaxPool2d", "[3 8 8]")
	mustPanic(t, func() { autograd.MaxPool2d(autograd.New(1, 1, 4, 4), 2, 2, 2) }, "autograd.MaxPool2d", "padding 2", "[1 1 4 4]")
	mustPanic(t, func() { autograd.AvgPool2d(autograd.New(1, 1, 2, 2), 3, 1, 0) }, "autograd.AvgPool2d", "too small", "[1 1 2 2]")
	mustPanic(t, func() { autograd.AvgPool2d(autograd.New(1, 1, 4, 4), 0, 1, 0) }, "autograd.AvgPool2d", "kernel 0")
	mustPanic(t, func() { autograd.GlobalAvgPool2d(autograd.New(2, 3)) }, "autograd.GlobalAvgPool2d", "[2 3]")
}
