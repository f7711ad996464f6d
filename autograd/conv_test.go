package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// convCfg builds a ConvConfig from (height, width) pairs.
func convCfg(sh, sw, ph, pw, dh, dw int) autograd.ConvConfig {
	return autograd.ConvConfig{Stride: [2]int{sh, sw}, Padding: [2]int{ph, pw}, Dilation: [2]int{dh, dw}}
}

// loadFixture reads testdata/conv_pool/name.safetensors.
func loadFixture(t *testing.T, name string) *safetensors.File {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "testdata", "conv_pool", name+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fixtureTensor returns the fixture tensor called name, or nil if absent
// and optional.
func fixtureTensor(t *testing.T, f *safetensors.File, name string, optional bool) *autograd.Tensor {
	t.Helper()
	if _, ok := f.Tensors[name]; !ok && optional {
		return nil
	}
	data, shape, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return autograd.FromSlice(data, shape...)
}

// closeTo fails the test if got and want (same length) differ by more than
// atol + rtol·|want| anywhere.
func closeTo(t *testing.T, what string, got, want []float32, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.7g, want %.7g", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(got))
	}
}

func TestConv2dMatchesPyTorch(t *testing.T) {
	// The same table as CONV_CASES in testdata/gen_conv_pool.py.
	cases := []struct {
		name string
		cfg  autograd.ConvConfig
	}{
		{"conv_3x3_s1_p1", convCfg(1, 1, 1, 1, 1, 1)},
		{"conv_3x3_s2_p0_odd", convCfg(2, 2, 0, 0, 1, 1)},
		{"conv_3x3_dil2", convCfg(1, 1, 2, 2, 2, 2)},
		{"conv_1x1", convCfg(1, 1, 0, 0, 1, 1)},
		{"conv_1x1_s2_nobias", convCfg(2, 2, 0, 0, 1, 1)},
		{"conv_2x5_mixed_nobias", convCfg(2, 1, 1, 2, 1, 2)},
		{"conv_5x5_s3_p2", convCfg(3, 3, 2, 2, 1, 1)},
		{"conv_resnet_16ch", convCfg(1, 1, 1, 1, 1, 1)},
	}
	for _, algo := range autograd.ConvAlgos {
		for _, c := range cases {
			c.cfg = autograd.WithConvAlgo(c.cfg, algo)
			t.Run(algo+"/"+c.name, func(t *testing.T) {
				testConvFixture(t, c.name, c.cfg)
			})
		}
	}
}

// testConvFixture compares Conv2dWith and its gradients with the PyTorch
// fixture called name.
func testConvFixture(t *testing.T, name string, cfg autograd.ConvConfig) {
	f := loadFixture(t, name)
	want := fmt.Sprintf("%d,%d", cfg.Stride[0], cfg.Stride[1])
	if got := f.Metadata["stride"]; got != want {
		t.Fatalf("fixture stride %q, table says %q", got, want)
	}
	x := fixtureTensor(t, f, "x", false).RequireGrad()
	w := fixtureTensor(t, f, "w", false).RequireGrad()
	b := fixtureTensor(t, f, "b", true)
	if b != nil {
		b.RequireGrad()
	}
	out := autograd.Conv2dWith(x, w, b, cfg)
	wantOut := fixtureTensor(t, f, "out", false)
	if !slices.Equal(out.Shape(), wantOut.Shape()) {
		t.Fatalf("output shape %v, want %v", out.Shape(), wantOut.Shape())
	}
	closeTo(t, "out", out.Data, wantOut.Data, 1e-5, 1e-5)
	out.BackwardWith(fixtureTensor(t, f, "p", false).Data)
	closeTo(t, "grad x", x.Grad, fixtureTensor(t, f, "gx", false).Data, 1e-5, 1e-5)
	closeTo(t, "grad w", w.Grad, fixtureTensor(t, f, "gw", false).Data, 1e-5, 1e-5)
	if b != nil {
		closeTo(t, "grad b", b.Grad, fixtureTensor(t, f, "gb", false).Data, 1e-5, 1e-5)
	}
}

// refConv computes the convolution and the gradients of Σ p·out directly
// from the definition, in float64.
func refConv(x, w, b *autograd.Tensor, cfg autograd.ConvConfig, p []float32) (out, gx, gw, gb []float64) {
	n, cin, h, wd := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	cout, kh, kw := w.Dim(0), w.Dim(2), w.Dim(3)
	sh, sw := max(cfg.Stride[0], 1), max(cfg.Stride[1], 1)
	dh, dw := max(cfg.Dilation[0], 1), max(cfg.Dilation[1], 1)
	ph, pw := cfg.Padding[0], cfg.Padding[1]
	ho := (h+2*ph-dh*(kh-1)-1)/sh + 1
	wo := (wd+2*pw-dw*(kw-1)-1)/sw + 1
	out = make([]float64, n*cout*ho*wo)
	gx = make([]float64, len(x.Data))
	gw = make([]float64, len(w.Data))
	gb = make([]float64, cout)
	for i := 0; i < n; i++ {
		for o := 0; o < cout; o++ {
			for oh := 0; oh < ho; oh++ {
				for ow := 0; ow < wo; ow++ {
					oi := ((i*cout+o)*ho+oh)*wo + ow
					s := 0.0
					if b != nil {
						s = float64(b.Data[o])
					}
					g := float64(p[oi])
					gb[o] += g
					for c := 0; c < cin; c++ {
						for ki := 0; ki < kh; ki++ {
							ih := oh*sh - ph + ki*dh
							if ih < 0 || ih >= h {
								continue
							}
							for kj := 0; kj < kw; kj++ {
								iw := ow*sw - pw + kj*dw
								if iw < 0 || iw >= wd {
									continue
								}
								xi := ((i*cin+c)*h+ih)*wd + iw
								wi := ((o*cin+c)*kh+ki)*kw + kj
								s += float64(x.Data[xi]) * float64(w.Data[wi])
								gx[xi] += g * float64(w.Data[wi])
								gw[wi] += g * float64(x.Data[xi])
							}
						}
					}
					out[oi] = s
				}
			}
		}
	}
	return out, gx, gw, gb
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// TestConv2dMatchesDirect compares many random configurations, forward and
// backward, with the direct definition, under every algorithm.
func TestConv2dMatchesDirect(t *testing.T) {
	for _, algo := range autograd.ConvAlgos {
		t.Run(algo, func(t *testing.T) { testConvMatchesDirect(t, algo) })
	}
}

func testConvMatchesDirect(t *testing.T, algo string) {
	rng := newRNG(7)
	// Large images are multiplied one at a time, small ones in groups.
	large := []struct {
		n, cin, cout, h, w, kh, kw int
		cfg                        autograd.ConvConfig
	}{
		{3, 2, 3, 24, 24, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{2, 3, 2, 25, 23, 1, 1, convCfg(1, 1, 0, 0, 1, 1)},
		{3, 2, 2, 48, 40, 3, 3, convCfg(2, 2, 1, 1, 1, 1)},
		{2, 2, 3, 26, 24, 3, 2, convCfg(1, 1, 2, 0, 2, 1)},
		// 32 filters and more: the weight gradient in the transposed layout.
		{2, 3, 33, 10, 9, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{3, 2, 40, 7, 8, 3, 2, convCfg(1, 1, 2, 0, 2, 1)},
		// Winograd's shapes: tiles past the edge, padding 0 to 2, one
		// tile, several images per GEMM, more filters than inputs.
		{3, 5, 6, 11, 13, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{2, 3, 4, 9, 6, 3, 3, convCfg(1, 1, 0, 2, 1, 1)},
		{4, 4, 3, 3, 3, 3, 3, convCfg(1, 1, 0, 0, 1, 1)},
		{5, 6, 7, 5, 4, 3, 3, convCfg(1, 1, 2, 1, 1, 1)},
		{2, 17, 35, 8, 8, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{1, 2, 3, 30, 27, 3, 3, convCfg(1, 1, 1, 0, 1, 1)},
		{2, 3, 4, 5, 6, 3, 3, convCfg(1, 1, 3, 0, 1, 1)}, // input gradient with negative padding
		// Large enough for the automatic choice to take Winograd.
		{2, 64, 64, 16, 16, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		// Output widths of whole runs of 16, where gatherConv applies:
		// filters in a full and a partial tile of rows, one image split
		// between the workers, dilation, an output of one run per row, a
		// forward pass without it but an input gradient with it (width
		// 16, no padding), and enough input channels for two blocks of K.
		{2, 3, 13, 7, 32, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{1, 4, 5, 16, 48, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{2, 3, 2, 9, 20, 3, 5, convCfg(1, 1, 1, 2, 1, 2)},
		{3, 2, 3, 5, 16, 5, 5, convCfg(1, 1, 2, 2, 1, 1)},
		{2, 3, 4, 6, 16, 3, 3, convCfg(1, 1, 0, 0, 1, 1)},
		{2, 40, 6, 4, 16, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		// Outputs as wide as the input but not of whole runs, where
		// gatherConv takes the flat layout: 8×8 (whole runs per image),
		// 9×10, a 5×5 kernel, dilation 2.
		{3, 4, 6, 8, 8, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{2, 3, 5, 9, 10, 3, 3, convCfg(1, 1, 1, 1, 1, 1)},
		{2, 2, 3, 12, 11, 5, 5, convCfg(1, 1, 2, 2, 1, 1)},
		{2, 3, 2, 8, 9, 3, 3, convCfg(1, 1, 2, 2, 2, 2)},
		// Strides above 1 with output rows of whole runs: the phase
		// layout (an odd number of rows, a 1×1 kernel, stride 3).
		{2, 3, 5, 32, 32, 3, 3, convCfg(2, 2, 1, 1, 1, 1)},
		{2, 4, 3, 33, 64, 3, 3, convCfg(2, 2, 1, 1, 1, 1)},
		{2, 4, 6, 32, 32, 1, 1, convCfg(2, 2, 0, 0, 1, 1)},
		{2, 2, 3, 48, 48, 5, 5, convCfg(3, 3, 2, 2, 1, 1)},
	}
	for trial := 0; trial < 40+len(large); trial++ {
		kh, kw := 1+rng.IntN(4), 1+rng.IntN(4)
		cfg := convCfg(1+rng.IntN(3), 1+rng.IntN(3), rng.IntN(3), rng.IntN(3), 1+rng.IntN(2), 1+rng.IntN(2))
		if trial%5 == 0 { // exercise the direct 1×1 path
			kh, kw, cfg = 1, 1, convCfg(1, 1, 0, 0, 1+rng.IntN(2), 1)
		}
		n, cin, cout := 1+rng.IntN(4), 1+rng.IntN(5), 1+rng.IntN(6)
		h := cfg.Dilation[0]*(kh-1) + 1 + rng.IntN(9)
		wd := cfg.Dilation[1]*(kw-1) + 1 + rng.IntN(9)
		if trial >= 40 {
			l := large[trial-40]
			n, cin, cout, h, wd, kh, kw, cfg = l.n, l.cin, l.cout, l.h, l.w, l.kh, l.kw, l.cfg
		}
		x := param(rng, n, cin, h, wd)
		w := param(rng, cout, cin, kh, kw)
		var b *autograd.Tensor
		if rng.IntN(2) == 0 {
			b = param(rng, cout)
		}
		name := fmt.Sprintf("trial %d: x %v w %v cfg %+v bias %v", trial, x.Shape(), w.Shape(), cfg, b != nil)
		cfg = autograd.WithConvAlgo(cfg, algo)
		out := autograd.Conv2dWith(x, w, b, cfg)
		p := autograd.RandN(rng, out.Shape()...).Data
		refOut, refGx, refGw, refGb := refConv(x, w, b, cfg, p)
		closeTo(t, name+" out", out.Data, toF32(refOut), 1e-4, 1e-4)
		out.BackwardWith(p)
		closeTo(t, name+" grad x", x.Grad, toF32(refGx), 1e-4, 1e-4)
		closeTo(t, name+" grad w", w.Grad, toF32(refGw), 1e-4, 1e-4)
		if b != nil {
			closeTo(t, name+" grad b", b.Grad, toF32(refGb), 1e-4, 1e-4)
		}
	}
}

// convGradCase is one case of TestConv2dGradients.
type convGradCase struct {
	name    string
	x, w    []int
	bias    bool
	cfg     autograd.ConvConfig
	frozenX bool // x does not require a gradient
	frozenW bool // w does not require a gradient
}

func TestConv2dGradients(t *testing.T) {
	cases := []convGradCase{
		{"3x3 s1 p1", []int{2, 3, 6, 6}, []int{4, 3, 3, 3}, true, convCfg(1, 1, 1, 1, 1, 1), false, false},
		{"3x3 s2 p0 odd", []int{2, 2, 7, 9}, []int{3, 2, 3, 3}, true, convCfg(2, 2, 0, 0, 1, 1), false, false},
		{"dilation 2", []int{1, 2, 8, 7}, []int{3, 2, 3, 3}, true, convCfg(1, 1, 2, 2, 2, 2), false, false},
		{"1x1", []int{3, 4, 4, 5}, []int{5, 4, 1, 1}, true, convCfg(1, 1, 0, 0, 1, 1), false, false},
		{"1x1 s2", []int{2, 4, 5, 5}, []int{3, 4, 1, 1}, false, convCfg(2, 2, 0, 0, 1, 1), false, false},
		{"no bias", []int{2, 3, 5, 5}, []int{2, 3, 3, 3}, false, convCfg(1, 1, 1, 1, 1, 1), false, false},
		{"non-square mixed", []int{2, 2, 7, 8}, []int{3, 2, 2, 4}, true, convCfg(2, 1, 1, 2, 1, 2), false, false},
		{"frozen input", []int{2, 3, 5, 5}, []int{2, 3, 3, 3}, true, convCfg(1, 1, 1, 1, 1, 1), true, false},
		{"frozen weight", []int{2, 3, 5, 5}, []int{2, 3, 3, 3}, false, convCfg(2, 2, 1, 1, 1, 1), false, true},
		{"frozen weight 1x1", []int{2, 3, 4, 4}, []int{2, 3, 1, 1}, false, convCfg(1, 1, 0, 0, 1, 1), false, true},
		{"3x3 s1 p0 one tile", []int{2, 3, 5, 6}, []int{2, 3, 3, 3}, true, convCfg(1, 1, 0, 0, 1, 1), false, false},
		{"3x3 s1 p2 frozen weight", []int{1, 2, 5, 4}, []int{3, 2, 3, 3}, false, convCfg(1, 1, 2, 1, 1, 1), false, true},
		{"3x3 s1 p1 width 16", []int{2, 2, 3, 16}, []int{3, 2, 3, 3}, true, convCfg(1, 1, 1, 1, 1, 1), false, false},
		{"3x3 s1 p1 8x8 flat", []int{1, 2, 8, 8}, []int{3, 2, 3, 3}, false, convCfg(1, 1, 1, 1, 1, 1), false, false},
		{"3x3 s2 p1 phase", []int{1, 2, 5, 32}, []int{3, 2, 3, 3}, true, convCfg(2, 2, 1, 1, 1, 1), false, false},
		{"3x3 s1 p1 16 channels", []int{1, 16, 3, 5}, []int{16, 16, 3, 3}, false, convCfg(1, 1, 1, 1, 1, 1), false, false}, // outer products of the blocked layout
	}
	for _, algo := range autograd.ConvAlgos {
		for i, c := range cases {
			c.cfg = autograd.WithConvAlgo(c.cfg, algo)
			t.Run(algo+"/"+c.name, func(t *testing.T) { testConvGradient(t, i, c) })
		}
	}
}

// testConvGradient checks the gradients of case i by finite differences.
func testConvGradient(t *testing.T, i int, c convGradCase) {
	rng := newRNG(uint64(100 + i))
	x := autograd.RandN(rng, c.x...)
	w := autograd.RandN(rng, c.w...)
	var inputs []*autograd.Tensor
	if !c.frozenX {
		inputs = append(inputs, x.RequireGrad())
	}
	if !c.frozenW {
		inputs = append(inputs, w.RequireGrad())
	}
	var b *autograd.Tensor
	if c.bias {
		b = param(rng, c.w[0])
		inputs = append(inputs, b)
	}
	f := func() *autograd.Tensor { return autograd.Conv2dWith(x, w, b, c.cfg) }
	if err := gradcheck.Check(f, inputs, gradcheck.Options{Seed: uint64(i + 1)}); err != nil {
		t.Fatal(err)
	}
}

func TestConv2dScalarArguments(t *testing.T) {
	rng := newRNG(3)
	x := autograd.RandN(rng, 2, 3, 9, 9)
	w := autograd.RandN(rng, 4, 3, 3, 3)
	a := autograd.Conv2d(x, w, nil, 2, 1, 2)
	b := autograd.Conv2dWith(x, w, nil, convCfg(2, 2, 1, 1, 2, 2))
	if !slices.Equal(a.Shape(), []int{2, 4, 4, 4}) || !slices.Equal(a.Data, b.Data) {
		t.Fatalf("Conv2d(stride 2, pad 1, dil 2) = %v, Conv2dWith = %v", a, b)
	}
	// Zero stride and dilation mean 1.
	c := autograd.Conv2d(x, w, nil, 0, 1, 0)
	d := autograd.Conv2d(x, w, nil, 1, 1, 1)
	if !slices.Equal(c.Data, d.Data) {
		t.Fatal("Conv2d with zero stride and dilation differs from stride 1, dilation 1")
	}
}

// runConv runs a forward and backward pass with the given number of
// workers and returns the output and the gradients.
func runConv(workers int, x, w, b *autograd.Tensor, cfg autograd.ConvConfig, p []float32) [][]float32 {
	prev := parallel.SetWorkers(workers)
	defer parallel.SetWorkers(prev)
	for _, t := range []*autograd.Tensor{x, w, b} {
		t.Grad = nil
	}
	out := autograd.Conv2dWith(x, w, b, cfg)
	out.BackwardWith(p)
	return [][]float32{out.Data, x.Grad, w.Grad, b.Grad}
}

func TestConv2dDeterministicAcrossWorkers(t *testing.T) {
	cases := []struct {
		x, w []int
		cfg  autograd.ConvConfig
	}{
		{[]int{11, 8, 12, 12}, []int{8, 8, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},  // one image per chunk
		{[]int{21, 6, 6, 6}, []int{7, 6, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},    // several images per chunk
		{[]int{13, 16, 5, 5}, []int{12, 16, 1, 1}, convCfg(1, 1, 0, 0, 1, 1)}, // direct 1×1 path
		{[]int{9, 4, 24, 24}, []int{5, 4, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},   // one image per GEMM
		{[]int{7, 3, 24, 24}, []int{4, 3, 3, 3}, convCfg(2, 2, 1, 1, 1, 1)},   // stride 2
		{[]int{40, 9, 4, 4}, []int{10, 9, 3, 3}, convCfg(1, 1, 1, 1, 1, 1)},   // Winograd: few chunks, parallel GEMMs
		{[]int{5, 6, 2, 2}, []int{70, 6, 1, 1}, convCfg(1, 1, 0, 0, 1, 1)},    // bias gradient in two chunks of channels
	}
	for _, algo := range autograd.ConvAlgos {
		for i, c := range cases {
			cfg := autograd.WithConvAlgo(c.cfg, algo)
			rng := newRNG(uint64(50 + i))
			x, w, b := param(rng, c.x...), param(rng, c.w...), param(rng, c.w[0])
			outShape := autograd.Conv2dWith(x.Detach(), w.Detach(), nil, cfg).Shape()
			p := autograd.RandN(rng, outShape...).Data
			want := runConv(1, x, w, b, cfg, p)
			for _, workers := range []int{2, 3, 8} {
				got := runConv(workers, x, w, b, cfg, p)
				for j, name := range []string{"output", "grad x", "grad w", "grad b"} {
					if !slices.Equal(got[j], want[j]) {
						t.Errorf("%s case %d: %s with %d workers differs from 1 worker", algo, i, name, workers)
					}
				}
			}
		}
	}
}

func TestConv2dAccumulatesGradients(t *testing.T) {
	for _, algo := range autograd.ConvAlgos {
		t.Run(algo, func(t *testing.T) { testConvAccumulates(t, algo) })
	}
}

func testConvAccumulates(t *testing.T, algo string) {
	rng := newRNG(9)
	x, w, b := param(rng, 2, 3, 5, 5), param(rng, 4, 3, 3, 3), param(rng, 4)
	cfg := autograd.WithConvAlgo(convCfg(1, 1, 1, 1, 1, 1), algo)
	once := func() {
		autograd.Sum(autograd.Conv2dWith(x, w, b, cfg)).Backward()
	}
	once()
	gx, gw, gb := slices.Clone(x.Grad), slices.Clone(w.Grad), slices.Clone(b.Grad)
	once()
	for _, c := range []struct {
		name      string
		got, half []float32
	}{{"x", x.Grad, gx}, {"w", w.Grad, gw}, {"b", b.Grad, gb}} {
		for i := range c.got {
			if math.Abs(float64(c.got[i]-2*c.half[i])) > 1e-4*math.Abs(float64(c.half[i]))+1e-5 {
				t.Fatalf("grad %s[%d] after two passes = %g, want 2·%g", c.name, i, c.got[i], c.half[i])
			}
		}
	}
}

func TestConv2dShapeErrors(t *testing.T) {
	x := autograd.New(2, 3, 8, 8)
	mustPanic(t, func() { autograd.Conv2d(x, autograd.New(4, 5, 3, 3), nil, 1, 1, 1) },
		"autograd.Conv2d", "[2 3 8 8]", "[4 5 3 3]")
	mustPanic(t, func() { autograd.Conv2d(autograd.New(3, 8, 8), autograd.New(4, 3, 3, 3), nil, 1, 1, 1) },
		"autograd.Conv2d", "[3 8 8]", "[4 3 3 3]")
	mustPanic(t, func() { autograd.Conv2d(x, autograd.New(4, 3, 3, 3), autograd.New(5), 1, 1, 1) },
		"autograd.Conv2d", "[5]", "[4 3 3 3]")
	mustPanic(t, func() { autograd.Conv2d(x, autograd.New(4, 3, 5, 5), nil, 1, 0, 3) },
		"autograd.Conv2d", "too small", "[2 3 8 8]", "[4 3 5 5]")
	mustPanic(t, func() { autograd.Conv2d(x, autograd.New(4, 3, 3, 3), nil, -1, 0, 1) },
		"autograd.Conv2d", "stride")
}

// benchConv times a forward and backward pass of one convolution layer
// with 3×3 kernels, padding 1 and stride 1.
func benchConv(b *testing.B, n, c, hw int) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := autograd.RandN(rng, n, c, hw, hw).RequireGrad()
	w := autograd.RandN(rng, c, c, 3, 3).RequireGrad()
	seed := autograd.RandN(rng, n, c, hw, hw).Data
	flops := 3 * 2 * float64(n) * float64(c*hw*hw) * float64(c*9) // forward, dX, dW
	// As many workers as -cpu asks for (the pool otherwise keeps the
	// GOMAXPROCS of the start), and the steady state of a training loop:
	// op buffers come from an arena.
	defer parallel.SetWorkers(parallel.SetWorkers(0))
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x.In(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		autograd.Conv2d(x, w, nil, 1, 1, 1).BackwardWith(seed)
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkConv2dResNet20 times the convolution layers of a ResNet-20
// training step at batch size 128 (forward and backward).
func BenchmarkConv2dResNet20(b *testing.B) {
	b.Run("16ch_32x32", func(b *testing.B) { benchConv(b, 128, 16, 32) })
	b.Run("32ch_16x16", func(b *testing.B) { benchConv(b, 128, 32, 16) })
	b.Run("64ch_8x8", func(b *testing.B) { benchConv(b, 128, 64, 8) })
}

// benchConvAlgo times a forward and backward pass (output, input and
// weight gradients) of a 3×3, padding-1 convolution with the given stride
// from cin to cout channels on n images of hw×hw pixels with the named
// algorithm, and reports the process CPU time per pass beside the wall
// time.
func benchConvAlgo(b *testing.B, n, cin, cout, hw, stride int, algo string) {
	benchConvIn(b, n, cin, cout, hw, stride, algo, autograd.FP32)
}

// benchConvIn is benchConvAlgo with the products in precision prec.
func benchConvIn(b *testing.B, n, cin, cout, hw, stride int, algo string, prec autograd.Precision) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := autograd.RandN(rng, n, cin, hw, hw).RequireGrad()
	w := autograd.RandN(rng, cout, cin, 3, 3).RequireGrad()
	seed := autograd.RandN(rng, n, cout, (hw-1)/stride+1, (hw-1)/stride+1).Data
	cfg := autograd.WithConvAlgo(convCfg(stride, stride, 1, 1, 1, 1), algo)
	defer parallel.SetWorkers(parallel.SetWorkers(0))
	ctx := &autograd.Context{Arena: autograd.NewArena(), Precision: prec}
	x.In(ctx)
	step := func() {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		autograd.Conv2dWith(x, w, nil, cfg).BackwardWith(seed)
	}
	step() // grow the scratch buffers
	b.ResetTimer()
	if ms, ok := procstat.CPUPerOp(b.N, step); ok {
		b.ReportMetric(ms, "cpu-ms/op")
	}
}

// BenchmarkConv2dAlgos times the 3×3 convolution layers of ResNet-20
// (16, 32, 64 channels at 32, 16, 8 pixels), VGG-16 and ResNet-34 (64 to
// 512 channels at 32 down to 2 pixels) at batch size 128 with each
// algorithm in turn, so that the algorithms of one layer alternate; run it
// with -count to repeat the alternation and with -cpu 1,2 for the worker
// counts.
func BenchmarkConv2dAlgos(b *testing.B) {
	layers := []struct{ c, hw int }{
		{16, 32}, {32, 16}, {64, 8}, // ResNet-20
		{32, 8}, {16, 16}, // ResNet-20 at width 0.5, third stage; and at 16 px
		{64, 32}, {128, 16}, {256, 8}, {512, 4}, {512, 2}, // VGG-16, ResNet-34
	}
	for _, l := range layers {
		for _, algo := range autograd.ConvAlgos[1:] {
			b.Run(fmt.Sprintf("%dch_%dpx/%s", l.c, l.hw, algo), func(b *testing.B) {
				benchConvAlgo(b, 128, l.c, l.c, l.hw, 1, algo)
			})
		}
	}
}

// BenchmarkConv2dPrecision times the convolution layers of ResNet-20 at
// batch size 128 (the 3×3 layers of each stage and the two stride-2
// layers) in float32 (each layer's own algorithm) and in bfloat16,
// alternating.
func BenchmarkConv2dPrecision(b *testing.B) {
	layers := []struct{ cin, cout, hw, stride int }{{16, 16, 32, 1}, {32, 32, 16, 1}, {64, 64, 8, 1}, {16, 32, 32, 2}, {32, 64, 16, 2}}
	for _, l := range layers {
		for _, prec := range []autograd.Precision{autograd.FP32, autograd.BF16} {
			b.Run(fmt.Sprintf("%d-%dch_%dpx_s%d/%s", l.cin, l.cout, l.hw, l.stride, prec), func(b *testing.B) {
				benchConvIn(b, 128, l.cin, l.cout, l.hw, l.stride, "auto", prec)
			})
		}
	}
}

// BenchmarkConv2dAlgosBatch times a few layers of BenchmarkConv2dAlgos at
// small batch sizes, where the GEMMs of Winograd get narrow and the filter
// transform is paid for by fewer images.
func BenchmarkConv2dAlgosBatch(b *testing.B) {
	layers := []struct{ c, hw int }{{64, 8}, {128, 16}, {512, 2}}
	for _, l := range layers {
		for _, n := range []int{1, 8, 32} {
			for _, algo := range autograd.ConvAlgos[1:] {
				b.Run(fmt.Sprintf("%dch_%dpx_batch%d/%s", l.c, l.hw, n, algo), func(b *testing.B) {
					benchConvAlgo(b, n, l.c, l.c, l.hw, 1, algo)
				})
			}
		}
	}
}

// TestConvPoolUnderArena checks that convolutions and pools give identical
// results when their outputs and gradients come from an arena whose
// recycled buffers hold stale data.
func TestConvPoolUnderArena(t *testing.T) {
	for _, algo := range autograd.ConvAlgos {
		t.Run(algo, func(t *testing.T) { testConvPoolUnderArena(t, algo) })
	}
}

func testConvPoolUnderArena(t *testing.T, algo string) {
	rng := newRNG(11)
	x := param(rng, 3, 4, 9, 9)
	w1, b1 := param(rng, 5, 4, 3, 3), param(rng, 5)
	w2 := param(rng, 6, 5, 1, 1)
	w3 := param(rng, 6, 6, 3, 3)
	r := autograd.RandN(rng, 3, 6, 2, 2)
	params := []*autograd.Tensor{x, w1, b1, w2, w3}
	step := func(ctx *autograd.Context) [][]float32 {
		for _, p := range params {
			p.Grad = nil
		}
		h := autograd.ReLU(autograd.Conv2dWith(x.In(ctx), w1, b1, autograd.WithConvAlgo(convCfg(1, 1, 1, 1, 1, 1), algo))) // 9×9
		h = autograd.MaxPool2d(h, 3, 2, 1)                                                                                 // 5×5
		h = autograd.Conv2d(h, w2, nil, 1, 0, 1)                                                                           // 1×1 direct
		h = autograd.AvgPool2d(h, 2, 1, 0)                                                                                 // 4×4
		g := autograd.GlobalAvgPool2d(h)                                                                                   // a second consumer of h
		h2 := autograd.Conv2d(h, w3, nil, 2, 1, 1)                                                                         // stride 2: 2×2
		loss := autograd.Add(autograd.Sum(autograd.Mul(h2, r)), autograd.Sum(g))
		loss.Backward()
		out := [][]float32{slices.Clone(loss.Data)}
		for _, p := range params {
			out = append(out, slices.Clone(p.Grad))
		}
		return out
	}
	want := step(nil)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for i := 0; i < 3; i++ {
		ctx.Arena.Reset()
		got := step(ctx)
		for j := range want {
			if !slices.Equal(got[j], want[j]) {
				t.Fatalf("step %d under arena: result %d differs", i, j)
			}
		}
	}
}

// TestConvGatherMatchesIm2col checks that the convolutions gatherConv
// computes (output and input gradient) are bit-identical to the im2col
// GEMM's, whose products it reads in place instead of copying out, and
// that the weight gradients, whose sums are grouped differently, agree
// to rounding, as do the input gradients of stride-2 3×3 convolutions
// (by phases, not by the column matrix and col2im, under the rule of
// the non-forced algorithms).
func TestConvGatherMatchesIm2col(t *testing.T) {
	rng := newRNG(23)
	for _, c := range []struct {
		n, cin, cout, h, w, k, pad, stride int
	}{
		{3, 16, 16, 32, 32, 3, 1, 1}, {2, 5, 13, 8, 16, 3, 1, 1}, {1, 3, 4, 6, 32, 5, 2, 1}, {2, 4, 7, 7, 16, 3, 0, 1},
		{3, 6, 5, 8, 8, 3, 1, 1}, {2, 3, 4, 9, 10, 3, 1, 1}, // flat layout
		{3, 16, 32, 32, 32, 3, 1, 2}, {2, 3, 5, 9, 48, 1, 0, 3}, // phase layout
	} {
		x := param(rng, c.n, c.cin, c.h, c.w)
		w := param(rng, c.cout, c.cin, c.k, c.k)
		b := param(rng, c.cout)
		run := func(algo string) [][]float32 {
			x.Grad, w.Grad, b.Grad = nil, nil, nil
			out := autograd.Conv2dWith(x, w, b, autograd.WithConvAlgo(convCfg(c.stride, c.stride, c.pad, c.pad, 1, 1), algo))
			seed := autograd.RandN(newRNG(5), out.Shape()...).Data
			out.BackwardWith(seed)
			return [][]float32{slices.Clone(out.Data), slices.Clone(x.Grad), slices.Clone(w.Grad), slices.Clone(b.Grad)}
		}
		want, got := run("im2col"), run("gather")
		closeTo(t, fmt.Sprintf("%+v: weight gradient", c), got[2], want[2], 1e-4, 1e-4)
		exact := []string{"output", "input gradient", "", "bias gradient"}
		if c.stride == 2 && c.k > 2 {
			// The input gradient by phases, not by col2im, out of the
			// same products summed in another order.
			closeTo(t, fmt.Sprintf("%+v: input gradient", c), got[1], want[1], 1e-4, 1e-4)
			exact[1] = ""
		}
		for i, what := range exact {
			if what != "" && !slices.Equal(got[i], want[i]) {
				t.Errorf("%+v: %s differs between gather and im2col", c, what)
			}
		}
	}
}

// BenchmarkConv2dStride2 times forward and backward passes of ResNet-20's
// and ResNet-34's stride-2 3×3 convolutions at batch 128 with each
// algorithm.
func BenchmarkConv2dStride2(b *testing.B) {
	for _, l := range []struct{ cin, cout, hw int }{{16, 32, 32}, {32, 64, 16}, {64, 128, 32}} {
		for _, algo := range autograd.ConvAlgos[1:] {
			b.Run(fmt.Sprintf("%d-%dch_%dpx/%s", l.cin, l.cout, l.hw, algo), func(b *testing.B) {
				benchConvAlgo(b, 128, l.cin, l.cout, l.hw, 2, algo)
			})
		}
	}
}
