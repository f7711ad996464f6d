package infer_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn/infer"
)

func BenchmarkZZLogits(b *testing.B) {
	for _, zeros := range []float64{0, 0.9} {
		spec := infer.Spec{Model: "resnet20"}
		net, err := spec.Build()
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for _, p := range net.Params() {
			if p.T.Rank() < 2 {
				continue
			}
			for i := range p.T.Data {
				if rng.Float64() < zeros {
					p.T.Data[i] = 0
				}
			}
		}
		m, err := infer.New(net, spec)
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{1, 64} {
			x := make([]float32, batch*3*32*32)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("zeros=%g/batch=%d/threads=%d", zeros, batch, threads), func(b *testing.B) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
					defer parallel.SetWorkers(parallel.SetWorkers(threads))
					var dst []float32
					dst = m.Logits(dst, x)
					b.ResetTimer()
					cpu := cpuTime()
					for range b.N {
						dst = m.Logits(dst, x)
					}
					cpu = cpuTime() - cpu
					b.ReportMetric(cpu.Seconds()*1e6/float64(b.N*batch), "cpu-us/img")
					b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "img/s")
				})
			}
		}
	}
}
