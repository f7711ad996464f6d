package optim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
)

// vgg16Shapes lists the parameter shapes of CIFAR VGG-16 with batch norm
// (conv bias on, Linear 512→10): 14.7M parameters.
func vgg16Shapes() [][]int {
	cfg := []int{64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512}
	var shapes [][]int
	in := 3
	for _, c := range cfg {
		shapes = append(shapes, []int{c, in, 3, 3}, []int{c}, []int{c}, []int{c})
		in = c
	}
	return append(shapes, []int{10, 512}, []int{10})
}

// benchParams returns VGG-16-sized parameters with weights ~ N(0, 0.05²)
// and gradients ~ N(0, 1e-3²).
func benchParams(seed uint64) []*autograd.Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	var ps []*autograd.Tensor
	for _, s := range vgg16Shapes() {
		p := autograd.RandN(rng, s...)
		p.Grad = make([]float32, p.Numel())
		for i := range p.Data {
			p.Data[i] *= 0.05
			p.Grad[i] = float32(rng.NormFloat64() * 1e-3)
		}
		ps = append(ps, p)
	}
	return ps
}

func benchStep(b *testing.B, reg Regularizer, mode RegMode) {
	ps := benchParams(1)
	n := 0
	for _, p := range ps {
		n += p.Numel()
	}
	// λ as in the official code's lam/N with lam = 0.1, N = 50000, and
	// the paper's weight decay 0.2 with α = 1e-3.
	groups := DefaultGroups(nil, ps, reg, 0.1/50000, 0.2, 1e-3)
	cfg := ProxGenAdam(0.9, 0.999, 1e-8)
	cfg.RegMode = mode
	o := New(groups, cfg)
	o.Step()
	b.SetBytes(int64(n) * 4)
	b.ResetTimer()
	for range b.N {
		o.Step()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/param")
}

// BenchmarkStepVGG16 compares a plain Adam(W) step with the ProxGen step
// (same Adam update followed by the prox) on VGG-16-sized parameters.
func BenchmarkStepVGG16(b *testing.B) {
	b.Run("adamw", func(b *testing.B) { benchStep(b, nil, RegIgnore) })
	b.Run("proxgen-l1", func(b *testing.B) { benchStep(b, L1(), RegProx) })
	b.Run("proxgen-l1/2", func(b *testing.B) { benchStep(b, Lq(0.5), RegProx) })
	b.Run("proxgen-l2/3", func(b *testing.B) { benchStep(b, Lq(2.0/3), RegProx) })
	b.Run("proxgen-l0", func(b *testing.B) { benchStep(b, L0(), RegProx) })
}

// BenchmarkProx measures each proximal map alone in ns/element on a
// 16384-element chunk, in two regimes: "hard" (z ~ N(0, 1), η in
// [0.2, 1.2], λ = 0.3: about half the outputs are zero and many inputs
// lie near the thresholds) and "train" (z ~ N(0, 0.05²), η ≈ 1,
// λ = 2e-6, as in the paper's CIFAR runs: almost no input is near a
// threshold).
func BenchmarkProx(b *testing.B) {
	const n = 1 << 14
	rng := rand.New(rand.NewPCG(5, 6))
	z := make([]float32, n)
	eta := make([]float32, n)
	zt := make([]float32, n)
	etat := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
		eta[i] = float32(0.2 + rng.Float64())
		zt[i] = float32(0.05 * rng.NormFloat64())
		etat[i] = float32(0.5 + rng.Float64())
	}
	dst := make([]float32, n)
	for _, reg := range []Regularizer{L0(), L1(), Lq(0.5), Lq(2.0 / 3), Lq(0.3), BinaryW(1), BinaryW(0.5), BinaryW(2.0 / 3)} {
		for _, regime := range []struct {
			name   string
			z, eta []float32
			lambda float32
		}{{"hard", z, eta, 0.3}, {"train", zt, etat, 2e-6}} {
			b.Run(fmt.Sprint(reg)+"/"+regime.name, func(b *testing.B) {
				for range b.N {
					reg.Prox(dst, regime.z, regime.eta, regime.lambda)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
			})
		}
	}
}

// BenchmarkStepRatio times a plain AdamW step and a ProxGen-Adam step with
// the ℓ1/2 prox on two copies of VGG-16-sized parameters, alternating them
// so machine noise hits both alike, and reports the ratio of the medians.
func BenchmarkStepRatio(b *testing.B) {
	for _, rc := range []struct {
		name string
		reg  Regularizer
	}{{"l1", L1()}, {"l1/2", Lq(0.5)}, {"l2/3", Lq(2.0 / 3)}, {"l0", L0()}} {
		b.Run(rc.name, func(b *testing.B) {
			mk := func(reg Regularizer, mode RegMode) *ProxGen {
				cfg := ProxGenAdam(0.9, 0.999, 1e-8)
				cfg.RegMode = mode
				o := New(DefaultGroups(nil, benchParams(1), reg, 0.1/50000, 0.2, 1e-3), cfg)
				o.Step()
				return o
			}
			adam, prox := mk(nil, RegIgnore), mk(rc.reg, RegProx)
			var ta, tp []float64
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				adam.Step()
				t1 := time.Now()
				prox.Step()
				t2 := time.Now()
				ta = append(ta, t1.Sub(t0).Seconds())
				tp = append(tp, t2.Sub(t1).Seconds())
			}
			ma, mp := median(ta), median(tp)
			b.ReportMetric(ma*1e3, "adam-ms")
			b.ReportMetric(mp*1e3, "prox-ms")
			b.ReportMetric(mp/ma, "ratio")
		})
	}
}

func median(x []float64) float64 {
	y := append([]float64(nil), x...)
	for i := 1; i < len(y); i++ {
		for j := i; j > 0 && y[j] < y[j-1]; j-- {
			y[j], y[j-1] = y[j-1], y[j]
		}
	}
	return y[len(y)/2]
}
