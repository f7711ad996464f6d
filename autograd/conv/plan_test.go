package conv_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/internal/parallel"
)

// TestPlan checks Plan.Run against autograd.Conv2dWith followed by the
// residual add and the ReLU, on geometries that take every algorithm
// (gathered in the wide, flat and phase layouts, im2col, Winograd at the
// larger batch, sparse), and that its results are bit-identical for 1, 2
// and 3 workers (a single image's bands of rows, see gatherBands).
func TestPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		cin, cout, hw, k, stride, pad int
		zeros                         float64 // fraction of zero weights; > 0: sparse
	}{
		{3, 16, 32, 3, 1, 1, 0},    // stem: gathered, wide
		{16, 16, 32, 3, 1, 1, 0},   // gathered, wide
		{8, 16, 32, 5, 1, 2, 0},    // gathered, wide, 5×5
		{16, 32, 32, 3, 2, 1, 0},   // gathered, phase
		{32, 64, 16, 3, 2, 1, 0},   // im2col (8 wide)
		{64, 64, 8, 3, 1, 1, 0},    // flat; Winograd at batch 8
		{32, 32, 16, 3, 1, 1, 0},   // Winograd, in bands of tile rows at batch 1
		{32, 32, 15, 3, 1, 1, 0},   // Winograd, an odd last tile row
		{16, 32, 32, 1, 2, 0, 0},   // 1×1 shortcut, phase
		{32, 64, 16, 1, 2, 0, 0},   // 1×1 shortcut, im2col
		{16, 16, 32, 3, 1, 1, 0.9}, // sparse
		{64, 64, 8, 3, 1, 1, 0.9},  // sparse, wide
		{16, 32, 32, 3, 2, 1, 0.9}, // sparse, phase (stride 2)
		{32, 64, 16, 1, 2, 0, 0.9}, // sparse, phase (1×1 shortcut)
		{64, 64, 8, 3, 2, 1, 0.9},  // sparse, im2col (stride 2, rows under 8)
		{32, 16, 16, 1, 1, 0, 0.9}, // sparse, direct (1×1)
		{64, 64, 4, 3, 1, 1, 0.9},  // sparse, im2col (rows under 8)
	} {
		for _, n := range []int{1, 8} {
			for _, ep := range []struct{ res, relu bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
				res, relu := ep.res, ep.relu
				name := fmt.Sprintf("%dx%d_%d_k%d_s%d_z%g/n=%d/res=%v/relu=%v", tc.cin, tc.cout, tc.hw, tc.k, tc.stride, tc.zeros, n, res, relu)
				t.Run(name, func(t *testing.T) {
					ctx := &autograd.Context{NoGrad: true}
					x := autograd.RandN(rng, n, tc.cin, tc.hw, tc.hw).In(ctx)
					w := autograd.RandN(rng, tc.cout, tc.cin, tc.k, tc.k)
					for i := range w.Data {
						w.Data[i] *= 0.2
						if rng.Float64() < tc.zeros {
							w.Data[i] = 0
						}
					}
					b := autograd.RandN(rng, tc.cout)
					cfg := conv.Config{Stride: [2]int{tc.stride, tc.stride}, Padding: [2]int{tc.pad, tc.pad}}
					want := autograd.Conv2dWith(x, w, b, cfg)
					var r *autograd.Tensor
					if res {
						r = autograd.RandN(rng, want.Shape()...)
						want = autograd.Add(want, r)
					}
					if relu {
						want = autograd.ReLU(want)
					}
					var sw *conv.SparseWeight
					if tc.zeros > 0 {
						sw = conv.NewSparseWeight(w.Data, w.Shape())
					}
					p := conv.NewPlan(w.Data, w.Shape(), b.Data, cfg, tc.hw, tc.hw, sw)
					var rd []float32
					if r != nil {
						rd = r.Data
					}
					var outs [3][]float32
					for wk := range outs {
						prev := parallel.SetWorkers(wk + 1)
						outs[wk] = make([]float32, len(want.Data))
						p.Run(n, x.Data, outs[wk], rd, relu)
						parallel.SetWorkers(prev)
					}
					for wk := 1; wk < len(outs); wk++ {
						if !slices.Equal(outs[0], outs[wk]) {
							t.Fatalf("%s: 1 and %d workers differ", p.Algorithm(n), wk+1)
						}
					}
					for i, v := range want.Data {
						if d := math.Abs(float64(outs[0][i] - v)); d > 1e-4*(1+math.Abs(float64(v))) {
							t.Fatalf("%s: element %d: plan %v, Conv2dWith %v", p.Algorithm(n), i, outs[0][i], v)
						}
					}
					t.Logf("%s", p.Algorithm(n))
				})
			}
		}
	}
}

// BenchmarkPlan times Plan.Run (filters prepared once, bias and
// ReLU in the epilogue) on the 3×3 stride-1 layers of the CIFAR ResNets
// and VGG-16 under each algorithm at batch 1 and 64, 1 and 2 threads, the measurements
// behind the per-layer rule of Plan.Algorithm.
func BenchmarkPlan(b *testing.B) {
	layers := []struct{ c, hw int }{
		{16, 32}, {32, 16}, {64, 8}, // ResNet-20/56
		{64, 32}, {128, 16}, {256, 8}, {512, 4}, {512, 2}, // VGG-16
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, l := range layers {
		for _, n := range []int{1, 64} {
			if n > 1 && l.c*l.hw*l.hw > 64*32*32 {
				continue
			}
			x := autograd.RandN(rng, n, l.c, l.hw, l.hw)
			w := autograd.RandN(rng, l.c, l.c, 3, 3)
			bias := make([]float32, l.c)
			out := make([]float32, n*l.c*l.hw*l.hw)
			for _, algo := range []conv.Algo{conv.AlgoIm2col, conv.AlgoWinograd, conv.AlgoGather} {
				cfg := conv.Config{Padding: [2]int{1, 1}, Algo: algo}
				p := conv.NewPlan(w.Data, w.Shape(), bias, cfg, l.hw, l.hw, nil)
				if p.Algorithm(n) != algo.String() {
					continue
				}
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%dch_%dpx_batch%d/%s/threads=%d", l.c, l.hw, n, algo, threads), func(b *testing.B) {
						defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
						defer parallel.SetWorkers(parallel.SetWorkers(threads))
						for range b.N {
							p.Run(n, x.Data, out, nil, true)
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/img")
					})
				}
			}
		}
	}
}

// TestRunChained checks that RunChained computes bit for bit what the two
// plans' Run calls compute, for the geometries of residual blocks (3×3
// and, with padding 2, 5×5 and dilated 3×3 filters), with and without a
// residual and the final ReLU, for 1 and 2 workers; and that plans that
// cannot chain say so.
func TestRunChained(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	sparseW := func(cout, cin, k int) (*autograd.Tensor, *conv.SparseWeight) {
		w := autograd.RandN(rng, cout, cin, k, k)
		for i := range w.Data {
			w.Data[i] *= 0.2
			if rng.Float64() < 0.9 {
				w.Data[i] = 0
			}
		}
		return w, conv.NewSparseWeight(w.Data, w.Shape())
	}
	for _, tc := range []struct{ c, hw, k, pad, dil int }{
		{16, 32, 3, 1, 1}, {32, 16, 3, 1, 1}, {64, 8, 3, 1, 1}, {8, 12, 5, 2, 1}, {8, 12, 3, 2, 2},
	} {
		cfg := conv.Config{Padding: [2]int{tc.pad, tc.pad}, Dilation: [2]int{tc.dil, tc.dil}}
		w1, s1 := sparseW(tc.c, tc.c, tc.k)
		w2, s2 := sparseW(tc.c, tc.c, tc.k)
		b1, b2 := autograd.RandN(rng, tc.c), autograd.RandN(rng, tc.c)
		p1 := conv.NewPlan(w1.Data, w1.Shape(), b1.Data, cfg, tc.hw, tc.hw, s1)
		p2 := conv.NewPlan(w2.Data, w2.Shape(), b2.Data, cfg, tc.hw, tc.hw, s2)
		if !p1.Chains(p2) {
			t.Fatalf("%+v: sparse plans of a residual block do not chain", tc)
		}
		for _, n := range []int{1, 3} {
			x := autograd.RandN(rng, n, tc.c, tc.hw, tc.hw)
			r := autograd.RandN(rng, n, tc.c, tc.hw, tc.hw)
			for _, ep := range []struct{ res, relu bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
				var rd []float32
				if ep.res {
					rd = r.Data
				}
				mid := make([]float32, len(x.Data))
				want := make([]float32, len(x.Data))
				p1.Run(n, x.Data, mid, nil, true)
				p2.Run(n, mid, want, rd, ep.relu)
				for workers := 1; workers <= 2; workers++ {
					prev := parallel.SetWorkers(workers)
					got := make([]float32, len(want))
					p1.RunChained(p2, n, x.Data, got, rd, ep.relu)
					parallel.SetWorkers(prev)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%+v n=%d res=%v relu=%v workers=%d: element %d: chained %v, Run twice %v",
								tc, n, ep.res, ep.relu, workers, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	// Plans that do not chain: dense, strided, or of other sizes.
	w, s := sparseW(16, 16, 3)
	one := conv.Config{Padding: [2]int{1, 1}}
	two := conv.Config{Padding: [2]int{1, 1}, Stride: [2]int{2, 2}}
	sparse := conv.NewPlan(w.Data, w.Shape(), nil, one, 16, 16, s)
	for name, pair := range map[string][2]*conv.Plan{
		"dense first":  {conv.NewPlan(w.Data, w.Shape(), nil, one, 16, 16, nil), sparse},
		"dense second": {sparse, conv.NewPlan(w.Data, w.Shape(), nil, one, 16, 16, nil)},
		"strided":      {conv.NewPlan(w.Data, w.Shape(), nil, two, 32, 32, s), conv.NewPlan(w.Data, w.Shape(), nil, one, 16, 16, s)},
		"other size":   {sparse, conv.NewPlan(w.Data, w.Shape(), nil, one, 8, 8, s)},
	} {
		if pair[0].Chains(pair[1]) {
			t.Errorf("%s: Chains reports true", name)
		}
	}
}

// TestRunBlockPadded checks that a residual block run in the padded
// layout writes exactly the padded layout of what RunChained computes with
// the identity shortcut (padding zero), for 1 and 2 workers, and that Pad
// and Unpad are inverse copies.
func TestRunBlockPadded(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct{ c, hw, k, pad, dil int }{
		{16, 32, 3, 1, 1}, {64, 8, 3, 1, 1}, {8, 12, 5, 2, 1}, {8, 12, 3, 2, 2},
	} {
		cfg := conv.Config{Padding: [2]int{tc.pad, tc.pad}, Dilation: [2]int{tc.dil, tc.dil}}
		var plans [2]*conv.Plan
		for j := range plans {
			w := autograd.RandN(rng, tc.c, tc.c, tc.k, tc.k)
			for i := range w.Data {
				w.Data[i] *= 0.2
				if rng.Float64() < 0.9 {
					w.Data[i] = 0
				}
			}
			plans[j] = conv.NewPlan(w.Data, w.Shape(), autograd.RandN(rng, tc.c).Data, cfg, tc.hw, tc.hw, conv.NewSparseWeight(w.Data, w.Shape()))
		}
		p1, p2 := plans[0], plans[1]
		if !p1.ChainsResidual(p2) {
			t.Fatalf("%+v: a sparse residual block does not chain in the padded layout", tc)
		}
		for _, n := range []int{1, 3} {
			x := autograd.RandN(rng, n, tc.c, tc.hw, tc.hw).Data
			want := make([]float32, len(x))
			p1.RunChained(p2, n, x, want, x, true)
			ps := p1.PaddedSize()
			xPad, wantPad := make([]float32, n*ps), make([]float32, n*ps)
			for i := range xPad {
				xPad[i] = float32(math.NaN()) // Pad must write every value
			}
			p1.Pad(n, x, xPad)
			p1.Pad(n, want, wantPad)
			back := make([]float32, len(x))
			p1.Unpad(n, xPad, back)
			if !slices.Equal(back, x) {
				t.Fatalf("%+v n=%d: Unpad(Pad(x)) differs from x", tc, n)
			}
			for workers := 1; workers <= 2; workers++ {
				prev := parallel.SetWorkers(workers)
				got := make([]float32, n*ps)
				p1.RunBlockPadded(p2, n, xPad, got)
				parallel.SetWorkers(prev)
				for i := range wantPad {
					if math.Float32bits(got[i]) != math.Float32bits(wantPad[i]) {
						t.Fatalf("%+v n=%d workers=%d: padded element %d: %v, want %v", tc, n, workers, i, got[i], wantPad[i])
					}
				}
			}
		}
	}
}
