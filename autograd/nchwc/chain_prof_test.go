package nchwc_test

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// TestResNet20Layers logs the time of each convolution of resnet20 in
// the chain (best of many runs), for comparison with BenchmarkLayers.
func TestResNet20Layers(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rng := rand.New(rand.NewPCG(1, 2))
	n := newResNet20(rng)
	img := make([]float32, 3*32*32)
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	best := make([]time.Duration, 19)
	for i := range best {
		best[i] = time.Hour
	}
	for range 300 {
		k := 0
		tm := func(f func()) {
			t0 := time.Now()
			f()
			if d := time.Since(t0); d < best[k] {
				best[k] = d
			}
			k++
		}
		n.x.FromNCHW(img)
		cur := n.acts[0][0]
		tm(func() { nchwc.Conv(n.x, n.stem.f, 1, n.stem.bias, nil, true, cur) })
		for i, b := range n.blocks {
			st := i / 3
			mid, out := n.acts[st][1], n.acts[st][2]
			if cur == out {
				out = n.acts[st][0]
			}
			res := cur
			if i%3 == 0 && st > 0 {
				nchwc.ShortcutA(n.sc[st], cur)
				res = n.sc[st]
			}
			tm(func() { nchwc.Conv(cur, b[0].f, b[0].s, b[0].bias, nil, true, mid) })
			tm(func() { nchwc.Conv(mid, b[1].f, 1, b[1].bias, res, true, out) })
			cur = out
		}
	}
	var sum time.Duration
	for i, d := range best {
		sum += d
		t.Logf("conv %2d: %6.1f µs", i, d.Seconds()*1e6)
	}
	t.Logf("sum of best: %.1f µs", sum.Seconds()*1e6)
}
