package conv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// BenchmarkBlockedLayers times the stride-1 3×3 layers of ResNet-20 (16
// channels at 32×32, 32 at 16×16, 64 at 8×8) and VGG-16 (64 to 512
// channels at 32 down to 2 pixels) at batch 128, the forward
// pass (fwd), the input gradient (dx) alone and both gradients (bwd, where
// the rules may share work between them), with the algorithm the rules
// chose before the channel-blocked Winograd (before: Winograd where
// winogradPays, else gatherConv), with the channel-blocked Winograd
// (blocked: the conversions to and from nchwc's layout and the filter
// packing of each call included) and with Winograd, alternating; run it with -cpu 1,2 for
// the worker counts and -count to repeat the alternation. It reports the
// process CPU time per pass beside the wall time. The passes dw (the
// weight gradient alone) and bwd also run with the weight gradient off
// Winograd (the names ending in -old) or with its images transformed in
// NCHW (-nchw, winoWeightBlocked), and PROXGEN_GEMM names the GEMM
// engine (blas.NewEngine) as it does for the programs.
func BenchmarkBlockedLayers(b *testing.B) {
	if name := os.Getenv("PROXGEN_GEMM"); name != "" {
		e, err := blas.NewEngine(name)
		if err != nil {
			b.Fatal(err)
		}
		defer blas.SetDefault(blas.SetDefault(e))
	}
	const n = 128
	for _, l := range []struct{ c, hw int }{{16, 32}, {32, 16}, {64, 8}, {64, 32}, {128, 16}, {256, 8}, {512, 4}, {512, 2}} {
		rng := rand.New(rand.NewPCG(uint64(l.c), 3))
		x := make([]float32, n*l.c*l.hw*l.hw)
		gy := make([]float32, len(x))
		w := make([]float32, l.c*l.c*9)
		for _, s := range [][]float32{x, gy, w} {
			for i := range s {
				s[i] = float32(rng.NormFloat64())
			}
		}
		out, gw := make([]float32, len(x)), make([]float32, len(w))
		for _, pass := range []string{"fwd", "dx", "bwd", "dw"} {
			names := []string{"before", "blocked", "winograd"}
			if pass == "bwd" || pass == "dw" {
				names = []string{"before", "blocked", "blocked-nchw", "blocked-old", "winograd", "winograd-old"}
			}
			for _, name := range names {
				b.Run(fmt.Sprintf("%dch_%dpx/%s/%s", l.c, l.hw, pass, name), func(b *testing.B) {
					defer parallel.SetWorkers(parallel.SetWorkers(0))
					g, err := NewGeom(l.c, l.hw, l.hw, 3, 3, Config{Padding: [2]int{1, 1}})
					if err != nil {
						b.Fatal(err)
					}
					g.noWinoWeight = name == "before" || strings.HasSuffix(name, "-old")
					g.nchwWinoWeight = strings.HasSuffix(name, "-nchw")
					switch {
					case strings.HasPrefix(name, "blocked"):
						g.algo = AlgoBlocked
					case strings.HasPrefix(name, "winograd") || winogradPays(g, n, l.c):
						g.algo = AlgoWinograd
					default:
						g.algo = AlgoGather // where it applies, as before
					}
					step := func() {
						switch pass {
						case "fwd":
							Forward(g, n, l.c, x, w, nil, out)
						case "dx":
							Backward(g, n, l.c, x, w, gy, out, nil, true)
						case "dw":
							Backward(g, n, l.c, x, w, gy, nil, gw, true)
						default:
							Backward(g, n, l.c, x, w, gy, out, gw, true)
						}
					}
					step() // grow the scratch buffers
					b.ResetTimer()
					if ms, ok := procstat.CPUPerOp(b.N, step); ok {
						b.ReportMetric(ms, "cpu-ms/op")
					}
				})
			}
		}
	}
}

// TestWinoWeightRule checks the per-layer choice of the Winograd weight
// gradient on the layers it was measured on, with every GEMM engine this
// CPU has.
func TestWinoWeightRule(t *testing.T) {
	for _, name := range blas.Kernels() {
		e, err := blas.NewEngine(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			defer blas.SetDefault(blas.SetDefault(e))
			testWinoWeightRule(t)
		})
	}
}

func testWinoWeightRule(t *testing.T) {
	cases := []struct {
		n, c, hw, pad, stride int
		want                  bool
	}{
		{128, 16, 32, 1, 1, false}, // ResNet-20: with dot products the NCHW transforms cost more than they save
		{128, 32, 16, 1, 1, true},
		{128, 64, 8, 1, 1, true},
		{128, 64, 32, 1, 1, true}, // VGG-16
		{128, 512, 4, 1, 1, true},
		{128, 512, 2, 1, 1, false}, // 128 tiles in the batch
		{128, 64, 3, 1, 1, false},  // tiles past the edges
		{32, 64, 8, 1, 1, true},    // 512 tiles in the batch
		{16, 64, 8, 1, 1, false},
		{128, 32, 32, 1, 2, false},
	}
	for _, c := range cases {
		g, err := NewGeom(c.c, c.hw, c.hw, 3, 3, Config{Padding: [2]int{c.pad, c.pad}, Stride: [2]int{c.stride, c.stride}})
		if err != nil {
			t.Fatal(err)
		}
		want := c.want
		if c.c == 16 && !blas.Default().DotProducts() {
			want = true // without them, the gathered weight gradient packs both operands
		}
		if c.c == 16 && c.pad == 1 && c.stride == 1 && haveAVX512 {
			want = true // the outer products of the blocked layout (winoWeightOuter)
		}
		if got := useWinoWeight(g, c.n, c.c); got != want {
			t.Errorf("%d images, %d channels at %d px, stride %d: Winograd weight gradient %v, want %v", c.n, c.c, c.hw, c.stride, got, want)
		}
		if got := useWinoWeight(g.BF16(), c.n, c.c); got {
			t.Errorf("%d channels at %d px in bfloat16: Winograd weight gradient", c.c, c.hw)
		}
	}
}

// TestBlockedRule checks the per-layer choice of the channel-blocked
// Winograd on the layers it was measured on.
func TestBlockedRule(t *testing.T) {
	cases := []struct {
		n, cin, cout, hw, pad, stride int
		want                          bool
	}{
		{128, 16, 16, 32, 1, 1, true}, // ResNet-20
		{128, 32, 32, 16, 1, 1, true},
		{128, 64, 64, 8, 1, 1, true},  // 16 tiles an image
		{128, 64, 64, 6, 1, 1, false}, // 9 tiles an image
		{128, 64, 64, 32, 1, 1, true}, // VGG-16
		{128, 128, 128, 16, 1, 1, false},
		{128, 256, 256, 8, 1, 1, false},
		{128, 3, 16, 32, 1, 1, false},  // first layer: a tail
		{128, 24, 24, 32, 1, 1, false}, // tails
		{4, 16, 16, 32, 1, 1, false},   // one chunk
		{128, 16, 16, 32, 0, 1, false}, // padding 0
		{128, 16, 32, 32, 1, 2, false}, // stride 2
	}
	for _, c := range cases {
		ho := OutSize(c.hw, 3, c.stride, c.pad, 1)
		g := &Geom{
			c: c.cin, h: c.hw, w: c.hw, kh: 3, kw: 3, sh: c.stride, sw: c.stride,
			ph: c.pad, pw: c.pad, dh: 1, dw: 1, ho: ho, wo: ho,
		}
		want := c.want && nchwc.Fast()
		if got := useBlocked(g, c.n, c.cout); got != want {
			t.Errorf("%d images, %d→%d channels at %d px, padding %d, stride %d: blocked %v, want %v",
				c.n, c.cin, c.cout, c.hw, c.pad, c.stride, got, want)
		}
		if got := useBlocked(g.BF16(), c.n, c.cout); got {
			t.Errorf("%d→%d channels at %d px in bfloat16: blocked", c.cin, c.cout, c.hw)
		}
	}
}
