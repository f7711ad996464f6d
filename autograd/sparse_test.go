package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
)

// sparsify sets a fraction zeros of the elements of t to exactly zero,
// chosen at random.
func sparsify(rng *rand.Rand, t *Tensor, zeros float64) {
	for i := range t.Data {
		if rng.Float64() < zeros {
			t.Data[i] = 0
		}
	}
}

// closeTo fails unless got and want agree to float32 rounding of sums of
// k products of unit-size numbers.
func closeTo(t *testing.T, name string, got, want *Tensor, k int) {
	t.Helper()
	if !sameShape(got.shape, want.shape) {
		t.Fatalf("%s: shape %v, want %v", name, got.shape, want.shape)
	}
	tol := 1e-6 * float64(k+1)
	for i := range want.Data {
		g, w := float64(got.Data[i]), float64(want.Data[i])
		if math.Abs(g-w) > tol*(1+math.Abs(w)) || math.IsNaN(g) != math.IsNaN(w) {
			t.Fatalf("%s: element %d = %v, dense %v (tolerance %g)", name, i, g, w, tol)
		}
	}
}

// TestConv2dSparseMatchesDense compares the sparse convolution with
// Conv2dWith for many geometries (every path: 1×1 direct, the widened
// grid, im2col with single images and groups), batch 1 and 64 and zero
// fractions from 0 to 1, and checks that the result does not depend on the
// number of workers.
func TestConv2dSparseMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type geom struct {
		cin, cout, h, w, k int
		cfg                ConvConfig
	}
	geoms := []geom{
		{3, 8, 9, 9, 3, ConvConfig{Padding: [2]int{1, 1}}},   // wide
		{4, 6, 12, 10, 3, ConvConfig{Padding: [2]int{1, 1}}}, // wide, non-square
		{5, 7, 6, 6, 3, ConvConfig{Padding: [2]int{1, 1}}},   // im2col (wo < 8)
		{4, 5, 11, 11, 3, ConvConfig{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{4, 5, 10, 13, 1, ConvConfig{}},                                              // 1×1 direct
		{4, 5, 10, 10, 1, ConvConfig{Stride: [2]int{2, 2}}},                          // 1×1 strided shortcut
		{3, 4, 12, 12, 3, ConvConfig{Padding: [2]int{2, 2}, Dilation: [2]int{2, 2}}}, // dilated, wide
		{2, 3, 9, 14, 2, ConvConfig{Stride: [2]int{1, 2}, Padding: [2]int{0, 1}}},    // per-axis
		{6, 4, 4, 4, 3, ConvConfig{Padding: [2]int{1, 1}}},
	}
	for _, batch := range []int{1, 64} {
		for gi, gm := range geoms {
			for _, zeros := range []float64{0, 0.5, 0.9, 0.97, 1} {
				name := fmt.Sprintf("batch%d/geom%d/zeros%g", batch, gi, zeros)
				x := RandN(rng, batch, gm.cin, gm.h, gm.w)
				w := RandN(rng, gm.cout, gm.cin, gm.k, gm.k)
				sparsify(rng, w, zeros)
				var b *Tensor
				if gi%2 == 0 {
					b = RandN(rng, gm.cout)
				}
				s := NewSparseWeight(w)
				want := Conv2dWith(x, w, b, gm.cfg)
				got := Conv2dSparse(x, w, s, b, gm.cfg)
				closeTo(t, name, got, want, gm.cin*gm.k*gm.k)
				prev := parallel.SetWorkers(1)
				one := Conv2dSparse(x, w, s, b, gm.cfg)
				parallel.SetWorkers(prev)
				for i := range one.Data {
					if math.Float32bits(one.Data[i]) != math.Float32bits(got.Data[i]) {
						t.Fatalf("%s: element %d differs between 1 worker (%v) and %d (%v)", name, i, one.Data[i], prev, got.Data[i])
					}
				}
			}
		}
	}
}

// TestLinearSparseMatchesDense compares LinearSparse with Linear.
func TestLinearSparseMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, batch := range []int{1, 3, 64} {
		for _, zeros := range []float64{0, 0.5, 0.9, 1} {
			for _, bias := range []bool{false, true} {
				x := RandN(rng, batch, 37)
				w := RandN(rng, 11, 37)
				sparsify(rng, w, zeros)
				var b *Tensor
				if bias {
					b = RandN(rng, 11)
				}
				closeTo(t, fmt.Sprintf("batch%d/zeros%g/bias%v", batch, zeros, bias),
					LinearSparse(x, w, NewSparseWeight(w), b), Linear(x, w, b), 37)
			}
		}
	}
}

// TestSparseRecordsFallsBack checks that with a graph to record the sparse
// ops are the dense ops, gradients included.
func TestSparseRecordsFallsBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := RandN(rng, 2, 3, 8, 8)
	w := RandN(rng, 4, 3, 3, 3)
	sparsify(rng, w, 0.6)
	w.RequireGrad()
	s := NewSparseWeight(w)
	cfg := ConvConfig{Padding: [2]int{1, 1}}
	if !Records(x, w) {
		t.Fatal("Records = false for a weight that requires a gradient")
	}
	y := Conv2dSparse(x, w, s, nil, cfg)
	if !y.RequiresGrad() {
		t.Fatal("Conv2dSparse recorded no graph although the weight requires a gradient")
	}
	Sum(y).Backward()
	g1 := append([]float32(nil), w.Grad...)
	w.ZeroGrad()
	Sum(Conv2dWith(x, w, nil, cfg)).Backward()
	for i := range g1 {
		if g1[i] != w.Grad[i] {
			t.Fatalf("weight gradient %d: %v via Conv2dSparse, %v via Conv2dWith", i, g1[i], w.Grad[i])
		}
	}
	xi := x.Detach().In(&Context{NoGrad: true})
	if Records(xi, w) {
		t.Error("Records = true in a NoGrad context")
	}
	if y := Conv2dSparse(xi, w, s, nil, cfg); y.RequiresGrad() || y.Context() != xi.Context() {
		t.Error("Conv2dSparse recorded a graph in a NoGrad context or lost the context")
	}
}

// TestSparseWeightMatches checks the snapshot check and the stored count.
func TestSparseWeightMatches(t *testing.T) {
	w := FromSlice([]float32{0, 1, 0, 2, float32(math.Copysign(0, -1)), 3}, 2, 3)
	s := NewSparseWeight(w)
	if s.NNZ() != 3 || !s.Matches(w) {
		t.Fatalf("NNZ %d, Matches %v; want 3, true", s.NNZ(), s.Matches(w))
	}
	w.Data[0] = 5
	if s.Matches(w) {
		t.Error("Matches after a zero became nonzero")
	}
	w.Data[0], w.Data[1] = 0, 1.5
	if s.Matches(w) {
		t.Error("Matches after a nonzero changed")
	}
	if s.Matches(FromSlice(make([]float32, 6), 3, 2)) {
		t.Error("Matches a weight of another shape")
	}
	defer func() {
		if recover() == nil {
			t.Error("NewSparseWeight accepted a rank-3 weight")
		}
	}()
	NewSparseWeight(New(2, 2, 2))
}

// TestConv2dSparseShapeMismatch checks that a sparse weight of another
// shape panics naming both shapes.
func TestConv2dSparseShapeMismatch(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		if msg := fmt.Sprint(r); msg != "autograd.Conv2dSparse: sparse weight of shape [2 3 3 3] for weight [4 3 3 3]" {
			t.Errorf("panic %q", msg)
		}
	}()
	Conv2dSparse(New(1, 3, 5, 5), New(4, 3, 3, 3), NewSparseWeight(New(2, 3, 3, 3)), nil, ConvConfig{})
}
