package conv_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/internal/parallel"
)

// sparsify sets a fraction zeros of the elements of t to exactly zero,
// chosen at random.
func sparsify(rng *rand.Rand, t *autograd.Tensor, zeros float64) {
	for i := range t.Data {
		if rng.Float64() < zeros {
			t.Data[i] = 0
		}
	}
}

// closeTo fails unless got and want agree to float32 rounding of sums of
// k products of unit-size numbers.
func closeTo(t *testing.T, name string, got, want []float32, k int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	tol := 1e-6 * float64(k+1)
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.Abs(g-w) > tol*(1+math.Abs(w)) || math.IsNaN(g) != math.IsNaN(w) {
			t.Fatalf("%s: element %d = %v, dense %v (tolerance %g)", name, i, g, w, tol)
		}
	}
}

// data returns t.Data, or nil for a nil t.
func data(t *autograd.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Data
}

// forwardSparse returns conv.ForwardSparse's convolution of x with the
// sparse form s of a weight of shape (Cout, Cin, k, k).
func forwardSparse(x *autograd.Tensor, s *conv.SparseWeight, b *autograd.Tensor, cfg conv.Config) []float32 {
	sh := s.Shape()
	g, err := conv.NewGeom(x.Dim(1), x.Dim(2), x.Dim(3), sh[2], sh[3], cfg)
	if err != nil {
		panic(err)
	}
	ho, wo := g.Out()
	out := make([]float32, x.Dim(0)*sh[0]*ho*wo)
	conv.ForwardSparse(g, s, x.Dim(0), x.Data, data(b), out)
	return out
}

// TestForwardSparseMatchesDense compares the sparse convolution with
// autograd.Conv2dWith for many geometries (every path: 1×1 direct, the
// widened grid, im2col with single images and groups), batch 1 and 64
// and zero fractions from 0 to 1, and checks that the result does not
// depend on the number of workers.
func TestForwardSparseMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type geom struct {
		cin, cout, h, w, k int
		cfg                conv.Config
	}
	geoms := []geom{
		{3, 8, 9, 9, 3, conv.Config{Padding: [2]int{1, 1}}},   // wide
		{4, 6, 12, 10, 3, conv.Config{Padding: [2]int{1, 1}}}, // wide, non-square
		{5, 7, 6, 6, 3, conv.Config{Padding: [2]int{1, 1}}},   // im2col (wo < 8)
		{4, 5, 11, 11, 3, conv.Config{Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{4, 5, 10, 13, 1, conv.Config{}},                                              // 1×1 direct
		{4, 5, 10, 10, 1, conv.Config{Stride: [2]int{2, 2}}},                          // 1×1 strided shortcut
		{3, 4, 12, 12, 3, conv.Config{Padding: [2]int{2, 2}, Dilation: [2]int{2, 2}}}, // dilated, wide
		{2, 3, 9, 14, 2, conv.Config{Stride: [2]int{1, 2}, Padding: [2]int{0, 1}}},    // per-axis
		{6, 4, 4, 4, 3, conv.Config{Padding: [2]int{1, 1}}},
	}
	for _, batch := range []int{1, 64} {
		for gi, gm := range geoms {
			for _, zeros := range []float64{0, 0.5, 0.9, 0.97, 1} {
				name := fmt.Sprintf("batch%d/geom%d/zeros%g", batch, gi, zeros)
				x := autograd.RandN(rng, batch, gm.cin, gm.h, gm.w)
				w := autograd.RandN(rng, gm.cout, gm.cin, gm.k, gm.k)
				sparsify(rng, w, zeros)
				var b *autograd.Tensor
				if gi%2 == 0 {
					b = autograd.RandN(rng, gm.cout)
				}
				s := conv.NewSparseWeight(w.Data, w.Shape())
				want := autograd.Conv2dWith(x, w, b, gm.cfg)
				got := forwardSparse(x, s, b, gm.cfg)
				closeTo(t, name, got, want.Data, gm.cin*gm.k*gm.k)
				prev := parallel.SetWorkers(1)
				one := forwardSparse(x, s, b, gm.cfg)
				parallel.SetWorkers(prev)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%s: element %d differs between 1 worker (%v) and %d (%v)", name, i, one[i], prev, got[i])
					}
				}
			}
		}
	}
}

// TestLinearMatchesDense compares SparseWeight.Linear with
// autograd.Linear.
func TestLinearMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, batch := range []int{1, 3, 64} {
		for _, zeros := range []float64{0, 0.5, 0.9, 1} {
			for _, bias := range []bool{false, true} {
				x := autograd.RandN(rng, batch, 37)
				w := autograd.RandN(rng, 11, 37)
				sparsify(rng, w, zeros)
				var b *autograd.Tensor
				if bias {
					b = autograd.RandN(rng, 11)
				}
				got := make([]float32, batch*11)
				conv.NewSparseWeight(w.Data, w.Shape()).Linear(batch, x.Data, data(b), got)
				closeTo(t, fmt.Sprintf("batch%d/zeros%g/bias%v", batch, zeros, bias),
					got, autograd.Linear(x, w, b).Data, 37)
			}
		}
	}
}

// TestSparseWeightMatches checks the snapshot check and the stored count.
func TestSparseWeightMatches(t *testing.T) {
	w := []float32{0, 1, 0, 2, float32(math.Copysign(0, -1)), 3}
	shape := []int{2, 3}
	s := conv.NewSparseWeight(w, shape)
	if s.NNZ() != 3 || !s.Matches(w, shape) || !slices.Equal(s.Shape(), shape) {
		t.Fatalf("NNZ %d, Matches %v, Shape %v; want 3, true, %v", s.NNZ(), s.Matches(w, shape), s.Shape(), shape)
	}
	w[0] = 5
	if s.Matches(w, shape) {
		t.Error("Matches after a zero became nonzero")
	}
	w[0], w[1] = 0, 1.5
	if s.Matches(w, shape) {
		t.Error("Matches after a nonzero changed")
	}
	if s.Matches(make([]float32, 6), []int{3, 2}) {
		t.Error("Matches a weight of another shape")
	}
	for name, f := range map[string]func(){
		"rank 3":       func() { conv.NewSparseWeight(make([]float32, 8), []int{2, 2, 2}) },
		"short weight": func() { conv.NewSparseWeight(make([]float32, 5), []int{2, 3}) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "conv.NewSparseWeight: ") {
					t.Errorf("%s: panic %v, want one of conv.NewSparseWeight", name, r)
				}
			}()
			f()
		}()
	}
}

// TestForwardSparseShapeMismatch checks that a sparse weight that does
// not fit the geometry or the operands panics naming them.
func TestForwardSparseShapeMismatch(t *testing.T) {
	g, err := conv.NewGeom(3, 5, 5, 3, 3, conv.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"channels": func() {
			conv.ForwardSparse(g, conv.NewSparseWeight(make([]float32, 36), []int{2, 2, 3, 3}), 1, make([]float32, 75), nil, make([]float32, 18))
		},
		"output": func() {
			conv.ForwardSparse(g, conv.NewSparseWeight(make([]float32, 54), []int{2, 3, 3, 3}), 1, make([]float32, 75), nil, make([]float32, 36))
		},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "conv.ForwardSparse: ") {
					t.Errorf("%s: panic %v, want one of conv.ForwardSparse", name, r)
				}
			}()
			f()
		}()
	}
}
