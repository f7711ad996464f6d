package nchwc_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn/infer"
)

type convOp struct {
	f    *nchwc.Filter
	bias []float32
	s    int
}

func newConvOp(rng *rand.Rand, cin, cout, k, s int) convOp {
	w := make([]float32, cout*cin*k*k)
	for i := range w {
		w[i] = float32(rng.NormFloat64() / math.Sqrt(float64(cin*k*k)))
	}
	b := make([]float32, cout)
	for i := range b {
		b[i] = float32(rng.NormFloat64() * 0.1)
	}
	return convOp{nchwc.PackFilter(w, cout, cin, k), b, s}
}

// resnet20 is ResNet-20 (option-A shortcuts, batch normalisation folded
// into the convolutions' biases) on NCHW16c activations that stay padded
// from layer to layer: every convolution one Conv call with its bias,
// residual and ReLU, nothing copied but the image in, the option-A
// shortcuts and nothing else.
type resnet20 struct {
	stem   convOp
	blocks [9][2]convOp
	fc     []float32 // 10 × 64
	fcb    []float32
	x      *nchwc.Act       // the image, 4-channel blocks
	acts   [3][3]*nchwc.Act // per stage: in/out, middle, out/in
	sc     [3]*nchwc.Act    // the shortcut of stages 2 and 3
	pooled [64]float32
}

func newResNet20(rng *rand.Rand) *resnet20 {
	n := &resnet20{stem: newConvOp(rng, 3, 16, 3, 1), x: nchwc.NewAct(3, 32, 32)}
	cin := 16
	for i := range n.blocks {
		st := i / 3
		c, hw, s := 16<<st, 32>>st, 1
		if i%3 == 0 && st > 0 {
			s = 2
		}
		n.blocks[i] = [2]convOp{newConvOp(rng, cin, c, 3, s), newConvOp(rng, c, c, 3, 1)}
		cin = c
		if i%3 == 0 {
			for j := range n.acts[st] {
				n.acts[st][j] = nchwc.NewAct(c, hw, hw)
			}
			n.sc[st] = nchwc.NewAct(c, hw, hw)
		}
	}
	n.fc = make([]float32, 10*64)
	n.fcb = make([]float32, 10)
	for i := range n.fc {
		n.fc[i] = float32(rng.NormFloat64() / 8)
	}
	return n
}

// logits runs the network on one image (3×32×32, channel-major) into
// dst (10 values).
func (n *resnet20) logits(dst, img []float32) {
	n.x.FromNCHW(img)
	cur := n.acts[0][0]
	nchwc.Conv(n.x, n.stem.f, 1, n.stem.bias, nil, true, cur)
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
		nchwc.Conv(cur, b[0].f, b[0].s, b[0].bias, nil, true, mid)
		nchwc.Conv(mid, b[1].f, 1, b[1].bias, res, true, out)
		cur = out
	}
	// Global average pool and the linear layer.
	clear(n.pooled[:])
	for cb := 0; cb < 4; cb++ {
		for y := 1; y <= 8; y++ {
			for x := 1; x <= 8; x++ {
				o := ((cb*10+y)*10 + x) * 16
				for c := 0; c < 16; c++ {
					n.pooled[cb*16+c] += cur.Data[o+c]
				}
			}
		}
	}
	for o := 0; o < 10; o++ {
		s := n.fcb[o]
		for c, v := range n.pooled {
			s += n.fc[o*64+c] * v / 64
		}
		dst[o] = s
	}
}

// BenchmarkResNet20 times one image through resnet20 on NCHW16c against
// nn/infer's Model.Logits on its ResNet-20 (option A, random weights, the
// same 41 M multiply-adds), one thread, batch 1, alternately in one
// process. GMAC/s is by CPU time where it is measured.
func BenchmarkResNet20(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]float32, 3*32*32)
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	net := newResNet20(rng)
	spec := infer.Spec{Model: "resnet20"}
	mnet, err := spec.Build()
	if err != nil {
		b.Fatal(err)
	}
	m, err := infer.New(mnet, spec)
	if err != nil {
		b.Fatal(err)
	}
	const macs = 40.8e6 // stem 0.44 M, 17 convolutions of 2.36 M, 2 of 1.18 M
	for _, which := range []string{"nchwc", "infer"} {
		b.Run(which, func(b *testing.B) {
			defer parallel.SetWorkers(parallel.SetWorkers(1))
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			dst := make([]float32, 10)
			run := func() {
				if which == "nchwc" {
					net.logits(dst, img)
				} else {
					dst = m.Logits(dst[:0], img)
				}
			}
			run()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				run()
			}
			cpu = cpuTime() - cpu
			us := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(us, "µs/img")
			if cpu > 0 {
				us = cpu.Seconds() * 1e6 / float64(b.N)
				b.ReportMetric(us, "cpu-µs/img")
			}
			b.ReportMetric(macs/us/1e3, "GMAC/s")
		})
	}
}
