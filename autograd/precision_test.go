package autograd_test

import (
	"math"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
)

// relErr returns ‖got − want‖ / ‖want‖.
func relErr(got []float32, want []float64) float64 {
	var d, n float64
	for i, w := range want {
		d += (float64(got[i]) - w) * (float64(got[i]) - w)
		n += w * w
	}
	return math.Sqrt(d / n)
}

// bf16Tol is the tolerance of a bfloat16 product against the float64
// one, relative in the 2-norm: each operand is rounded by at most 2⁻⁸
// relatively, so each product by about 2⁻⁷, and the rounding errors of a
// sum of many terms largely cancel (measured on these cases: 2.2e-3 to
// 3.8e-3).
const bf16Tol = 1e-2

// runIn runs a forward and backward pass of f on x in ctx with the given
// number of workers and returns the output and the gradients of params.
func runIn(ctx *autograd.Context, workers int, f func(x *autograd.Tensor) *autograd.Tensor, x *autograd.Tensor, p []float32, params ...*autograd.Tensor) [][]float32 {
	defer parallel.SetWorkers(parallel.SetWorkers(workers))
	for _, t := range params {
		t.Grad = nil
	}
	out := f(x.In(ctx))
	out.BackwardWith(p)
	res := [][]float32{out.Data}
	for _, t := range params {
		res = append(res, t.Grad)
	}
	x.In(nil)
	return res
}

// TestConv2dBF16 checks convolutions in a BF16 context against the
// float64 definition (output and all three gradients within bf16Tol),
// that they really ran in bfloat16 where the CPU has it (results differ
// from float32's), and that they are bit-identical for any number of
// workers.
func TestConv2dBF16(t *testing.T) {
	cases := []struct {
		x, w []int
		cfg  autograd.ConvConfig
	}{
		{[]int{11, 8, 12, 12}, []int{8, 8, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},
		{[]int{4, 48, 8, 8}, []int{64, 48, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)}, // K = 432: two blocks of K
		{[]int{13, 16, 5, 5}, []int{12, 16, 1, 1}, convCfg(1, 1, 0, 0, 1, 1)},
		{[]int{7, 3, 24, 24}, []int{16, 3, 3, 3}, convCfg(2, 2, 1, 1, 1, 1)},
		{[]int{6, 16, 16, 16}, []int{32, 16, 1, 1}, convCfg(2, 2, 0, 0, 1, 1)},
		{[]int{5, 3, 10, 10}, []int{8, 3, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},    // odd channel count
		{[]int{4, 5, 12, 11}, []int{6, 5, 3, 2}, convCfg(1, 1, 2, 1, 2, 1)},    // dilation, rectangular
		{[]int{3, 40, 33, 33}, []int{24, 40, 1, 1}, convCfg(1, 1, 0, 0, 1, 1)}, // 1×1, planes not a multiple of 32
		{[]int{5, 6, 15, 13}, []int{10, 6, 3, 3}, convCfg(2, 2, 1, 1, 1, 1)},   // stride 2, odd sizes
		{[]int{4, 8, 12, 14}, []int{9, 8, 3, 3}, convCfg(2, 2, 0, 0, 1, 1)},    // stride 2, no padding
		{[]int{3, 6, 5, 32}, []int{5, 6, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},     // output rows of whole tiles
		{[]int{2, 5, 7, 64}, []int{4, 5, 3, 3}, convCfg(2, 2, 1, 1, 1, 1)},     // the same, stride 2
		{[]int{2, 90, 3, 32}, []int{3, 90, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},   // and two blocks of K
	}
	bf := &autograd.Context{Precision: autograd.BF16}
	for i, c := range cases {
		rng := newRNG(uint64(70 + i))
		x, w, b := param(rng, c.x...), param(rng, c.w...), param(rng, c.w[0])
		f := func(x *autograd.Tensor) *autograd.Tensor { return autograd.Conv2dWith(x, w, b, c.cfg) }
		outShape := autograd.Conv2dWith(x.Detach(), w.Detach(), nil, c.cfg).Shape()
		p := autograd.RandN(rng, outShape...).Data
		out, gx, gw, gb := refConv(x, w, b, c.cfg, p)
		got := runIn(bf, 1, f, x, p, x, w, b)
		for j, ref := range [][]float64{out, gx, gw, gb} {
			if e := relErr(got[j], ref); e > bf16Tol {
				t.Errorf("case %d: %s off by %.3g relative (tolerance %g)", i, []string{"output", "grad x", "grad w", "grad b"}[j], e, bf16Tol)
			}
		}
		fp := runIn(nil, 1, f, x, p, x, w, b)
		if blas.BF16Native() && (slices.Equal(got[0], fp[0]) || slices.Equal(got[1], fp[1]) || slices.Equal(got[2], fp[2])) {
			t.Errorf("case %d: a BF16 product equals the float32 one: not computed in bfloat16", i)
		}
		for _, workers := range []int{2, 3, 8} {
			again := runIn(bf, workers, f, x, p, x, w, b)
			for j := range again {
				if !slices.Equal(again[j], got[j]) {
					t.Errorf("case %d: result %d with %d workers differs from 1 worker", i, j, workers)
				}
			}
		}
	}
}

// TestLinearBF16 is TestConv2dBF16 for Linear and MatMul.
func TestLinearBF16(t *testing.T) {
	rng := newRNG(90)
	x, w, b := param(rng, 37, 300), param(rng, 20, 300), param(rng, 20)
	w2 := param(rng, 20, 9)
	f := func(x *autograd.Tensor) *autograd.Tensor {
		return autograd.MatMul(autograd.Linear(x, w, b), w2, false, false)
	}
	p := autograd.RandN(rng, 37, 9).Data
	// The float64 reference: y = x·wᵀ + b, z = y·w2.
	y := make([]float64, 37*20)
	for i := range 37 {
		for o := range 20 {
			s := float64(b.Data[o])
			for q := range 300 {
				s += float64(x.Data[i*300+q]) * float64(w.Data[o*300+q])
			}
			y[i*20+o] = s
		}
	}
	z := make([]float64, 37*9)
	gw2 := make([]float64, 20*9)
	for i := range 37 {
		for j := range 9 {
			for o := range 20 {
				z[i*9+j] += y[i*20+o] * float64(w2.Data[o*9+j])
				gw2[o*9+j] += y[i*20+o] * float64(p[i*9+j])
			}
		}
	}
	bf := &autograd.Context{Precision: autograd.BF16}
	got := runIn(bf, 1, f, x, p, w2)
	if e := relErr(got[0], z); e > bf16Tol {
		t.Errorf("output off by %.3g relative", e)
	}
	if e := relErr(got[1], gw2); e > bf16Tol {
		t.Errorf("grad w2 off by %.3g relative", e)
	}
	fp := runIn(nil, 1, f, x, p, w2)
	if blas.BF16Native() && slices.Equal(got[0], fp[0]) {
		t.Error("BF16 output equals the float32 one")
	}
	for _, workers := range []int{2, 3} {
		again := runIn(bf, workers, f, x, p, x, w, b, w2)
		ref := runIn(bf, 1, f, x, p, x, w, b, w2)
		for j := range again {
			if !slices.Equal(again[j], ref[j]) {
				t.Errorf("result %d with %d workers differs from 1 worker", j, workers)
			}
		}
	}
}

func TestParsePrecision(t *testing.T) {
	for _, p := range []autograd.Precision{autograd.FP32, autograd.BF16} {
		q, err := autograd.ParsePrecision(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePrecision(%q) = %v, %v", p.String(), q, err)
		}
	}
	if _, err := autograd.ParsePrecision("fp16"); err == nil {
		t.Error("ParsePrecision(fp16) gave no error")
	}
}
