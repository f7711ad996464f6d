package conv_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// alternate runs dense and sparse in turn every iteration and reports
// the CPU time per call of each and their ratio; on a shared machine the
// CPU time varies much less than the wall time.
func alternate(b *testing.B, dense, sparse func()) {
	var td, ts time.Duration
	n := 0
	for b.Loop() {
		t0, _ := procstat.CPUTime()
		dense()
		t1, _ := procstat.CPUTime()
		sparse()
		t2, _ := procstat.CPUTime()
		td += t1 - t0
		ts += t2 - t1
		n++
	}
	b.ReportMetric(float64(td.Microseconds())/float64(n), "dense-cpu-us")
	b.ReportMetric(float64(ts.Microseconds())/float64(n), "sparse-cpu-us")
	if ts > 0 {
		b.ReportMetric(float64(td)/float64(ts), "speedup")
	}
}

// sparseBenchLayers are convolutions of ResNet-20 and VGG-16 on CIFAR-10
// inputs: (Cin, Cout, H=W, stride).
var sparseBenchLayers = []struct {
	name                 string
	cin, cout, hw, strid int
}{
	{"resnet20/16-16@32", 16, 16, 32, 1},
	{"resnet20/16-32@32s2", 16, 32, 32, 2},
	{"resnet20/32-32@16", 32, 32, 16, 1},
	{"resnet20/64-64@8", 64, 64, 8, 1},
	{"vgg16/64-64@32", 64, 64, 32, 1},
	{"vgg16/128-128@16", 128, 128, 16, 1},
	{"vgg16/256-256@8", 256, 256, 8, 1},
	{"vgg16/512-512@4", 512, 512, 4, 1},
	{"vgg16/512-512@2", 512, 512, 2, 1},
}

// BenchmarkSparseConv times the 3×3 convolutions of sparseBenchLayers
// (padding 1, with bias) densely (autograd.Conv2dWith) and sparsely
// (ForwardSparse) at several fractions of exact zeros, batch 1 and 64,
// without a graph, alternating the two in every iteration, with as many
// workers as GOMAXPROCS (-cpu 1 for one thread). docs/benchmarks.md
// ("Sparse inference") has the ratios.
func BenchmarkSparseConv(b *testing.B) {
	defer parallel.SetWorkers(parallel.SetWorkers(runtime.GOMAXPROCS(0)))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range sparseBenchLayers {
		for _, batch := range []int{1, 64} {
			x := autograd.RandN(rng, batch, l.cin, l.hw, l.hw)
			bias := autograd.RandN(rng, l.cout)
			cfg := conv.Config{Stride: [2]int{l.strid, l.strid}, Padding: [2]int{1, 1}}
			for _, zeros := range []int{0, 30, 50, 60, 70, 80, 90, 95} {
				w := autograd.RandN(rng, l.cout, l.cin, 3, 3)
				sparsify(rng, w, float64(zeros)/100)
				s := conv.NewSparseWeight(w.Data, w.Shape())
				b.Run(fmt.Sprintf("%s/b%d/z%d", l.name, batch, zeros), func(b *testing.B) {
					alternate(b, func() { autograd.Conv2dWith(x, w, bias, cfg) }, func() { forwardSparse(x, s, bias, cfg) })
				})
			}
		}
	}
}
