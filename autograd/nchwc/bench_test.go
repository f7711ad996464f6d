package nchwc_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// layers are the convolutions of ResNet-20 at batch 1: the 3×3 stride-1
// layers of its three stages and the downsampling layers (3×3 and 1×1,
// stride 2) into the second and third, and the stem (3 input channels).
var layers = []struct{ cin, cout, hw, k, s int }{
	{16, 16, 32, 3, 1}, {32, 32, 16, 3, 1}, {64, 64, 8, 3, 1},
	{16, 32, 32, 3, 2}, {32, 64, 16, 3, 2},
	{16, 32, 32, 1, 2}, {32, 64, 16, 1, 2},
	{3, 16, 32, 3, 1}, // the stem
	// channel counts of the compacted ResNet-20 (nn/pretrained's
	// resnet20-compact) and the sparse one's 63-channel layer: tail blocks
	{16, 9, 32, 3, 1}, {9, 16, 32, 3, 1}, {27, 12, 16, 3, 1}, {12, 27, 16, 3, 1}, {30, 21, 8, 3, 1}, {64, 63, 8, 3, 1}, {63, 64, 8, 3, 1},
	{27, 5, 16, 3, 1}, {16, 22, 32, 3, 2}, // last blocks of at most 8 channels (half kernels)
}

type layer struct {
	name      string
	macs      float64
	plan      *conv.Plan
	f         *nchwc.Filter
	x, w      []float32
	bias      []float32
	in, out   *nchwc.Act
	planOut   []float32
	stride, k int
}

func newLayer(rng *rand.Rand, cin, cout, hw, k, s int) *layer {
	x := autograd.RandN(rng, 1, cin, hw, hw)
	w := autograd.RandN(rng, cout, cin, k, k)
	for i := range w.Data {
		w.Data[i] /= float32(math.Sqrt(float64(cin * k * k)))
	}
	bias := autograd.RandN(rng, cout).Data
	pad := (k - 1) / 2
	plan := conv.NewPlan(w.Data, w.Shape(), bias, conv.Config{Stride: [2]int{s, s}, Padding: [2]int{pad, pad}}, hw, hw, nil)
	f, in := nchwc.PackFilter(w.Data, cout, cin, k), nchwc.NewAct(cin, hw, hw)
	if cin <= 4 {
		f, in = nchwc.PackImageFilter(w.Data, cout, cin, k), nchwc.NewImage(cin, hw, hw)
	}
	ho, wo := f.OutSize(hw, hw, s)
	in.FromNCHW(x.Data)
	return &layer{
		name: fmt.Sprintf("%dto%dch_%dpx_%dx%d_s%d", cin, cout, hw, k, k, s),
		macs: float64(cout * cin * k * k * ho * wo),
		plan: plan, f: f, x: x.Data, w: w.Data, bias: bias, in: in, out: nchwc.NewAct(cout, ho, wo),
		planOut: make([]float32, cout*ho*wo), stride: s, k: k,
	}
}

// TestAgainstPlan checks Conv against conv.Plan.Run (bias and ReLU) on
// the layers of the benchmark.
func TestAgainstPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, l := range layers {
		ly := newLayer(rng, l.cin, l.cout, l.hw, l.k, l.s)
		ly.plan.Run(1, ly.x, ly.planOut, nil, true)
		nchwc.Conv(ly.in, ly.f, ly.stride, ly.bias, nil, true, ly.out)
		got := make([]float32, len(ly.planOut))
		ly.out.ToNCHW(got)
		for i, want := range ly.planOut {
			if d := math.Abs(float64(got[i] - want)); d > 2e-5*(1+math.Abs(float64(want))) {
				t.Fatalf("%s: value %d: got %g, conv.Plan %g", ly.name, i, got[i], want)
			}
		}
	}
}

// BenchmarkLayers times, on one thread at batch 1, Conv (input already in
// its padded NCHW16c layout, the output written in the same layout) and
// conv.Plan.Run with the algorithm it chooses (which copies the input into
// its own padded layout where it needs one), both with bias and ReLU.
// GMAC/s is by CPU time where it is measured, and counts the direct convolution's multiply-adds for both,
// also where conv.Plan runs Winograd.
func BenchmarkLayers(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, l := range layers {
		ly := newLayer(rng, l.cin, l.cout, l.hw, l.k, l.s)
		var cpu0 time.Duration
		report := func(b *testing.B) {
			us := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(us, "µs/layer")
			cpu1, _ := procstat.CPUTime()
			if cpu := cpu1 - cpu0; cpu > 0 {
				// CPU time: less sensitive than wall time to other
				// processes on a shared machine.
				us = cpu.Seconds() * 1e6 / float64(b.N)
				b.ReportMetric(us, "cpu-µs/layer")
			}
			b.ReportMetric(ly.macs/us/1e3, "GMAC/s")
		}
		// one times fn on one thread, under the nchwc implementation
		// im unless it is "".
		one := func(name, im string, fn func()) {
			b.Run(ly.name+"/"+name, func(b *testing.B) {
				if im != "" {
					impl.Select("nchwc", im)
					defer impl.Reset("nchwc")
				}
				defer parallel.SetWorkers(parallel.SetWorkers(1))
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				cpu0, _ = procstat.CPUTime()
				for range b.N {
					fn()
				}
				report(b)
			})
		}
		names, ok := impl.List("nchwc")
		for i, name := range names {
			if ok[i] {
				one("nchwc-"+name, name, func() { nchwc.Conv(ly.in, ly.f, ly.stride, ly.bias, nil, true, ly.out) })
			}
		}
		if ly.k == 3 && ly.stride == 1 && l.cin > 4 {
			// Winograd in the blocked layout, and conv.Plan's NCHW
			// Winograd forced.
			wf := nchwc.PackWinograd(ly.w, l.cout, l.cin)
			for i, name := range names {
				if ok[i] {
					one("winograd-"+name, name, func() { nchwc.Winograd(ly.in, wf, ly.bias, nil, true, ly.out) })
				}
			}
			pw := conv.NewPlan(ly.w, []int{l.cout, l.cin, 3, 3}, ly.bias, conv.Config{Stride: [2]int{1, 1}, Padding: [2]int{1, 1}, Algo: conv.AlgoWinograd}, l.hw, l.hw, nil)
			one("convplan-winograd-forced", "", func() { pw.Run(1, ly.x, ly.planOut, nil, true) })
		}
		one("convplan-"+ly.plan.Algorithm(1), "", func() { ly.plan.Run(1, ly.x, ly.planOut, nil, true) })
	}
}

// BenchmarkConvert times the conversions of a batch of 128 images of the
// channel-blocked training layers of ResNet-20 (16 channels of 32×32, 32
// of 16×16, 64 of 8×8) between NCHW and Act, one image at a time through one Act, as
// conv's AlgoBlocked does: ToNCHW writes the batch (the output of a
// layer) and FromNCHW reads it.
func BenchmarkConvert(b *testing.B) {
	const n = 128
	for _, l := range []struct{ c, hw int }{{16, 32}, {32, 16}, {64, 8}} {
		a := nchwc.NewAct(l.c, l.hw, l.hw)
		size := l.c * l.hw * l.hw
		batch := make([]float32, n*size)
		for i := range batch {
			batch[i] = float32(i)
		}
		a.FromNCHW(batch[:size])
		for _, dir := range []string{"to", "from"} {
			b.Run(fmt.Sprintf("%dch_%dpx/%s", l.c, l.hw, dir), func(b *testing.B) {
				b.SetBytes(int64(4 * len(batch)))
				for b.Loop() {
					for i := 0; i < n; i++ {
						if dir == "to" {
							a.ToNCHW(batch[i*size : (i+1)*size])
						} else {
							a.FromNCHW(batch[i*size : (i+1)*size])
						}
					}
				}
			})
		}
	}
}
