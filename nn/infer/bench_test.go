package infer_test

import (
	"fmt"
	"image"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// BenchmarkPredict measures Model.Predict on random-weight ResNet-20 (full
// width) for 32×32 images, preprocessing included: single-image latency
// (batch 1) and batch-64 throughput, with 1 and 2 threads (GOMAXPROCS and
// the kernels' worker pool). cpu-ms/img is the process's CPU time per
// image.
func BenchmarkPredict(b *testing.B) {
	m := resnet20(b)
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
		if i%4 == 3 {
			img.Pix[i] = 255 // opaque, as decoded photos are
		}
	}
	for _, batch := range []int{1, 64} {
		imgs := make([]image.Image, batch)
		for i := range imgs {
			imgs[i] = img
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch=%d/threads=%d", batch, threads), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
				defer parallel.SetWorkers(parallel.SetWorkers(threads))
				m.Predict(imgs, 5) // warm the pool
				b.ReportAllocs()
				b.ResetTimer()
				cpu, _ := procstat.CPUTime()
				for range b.N {
					m.Predict(imgs, 5)
				}
				cpu1, _ := procstat.CPUTime()
				cpu = cpu1 - cpu
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "img/s")
				if cpu > 0 {
					// CPU time is less sensitive than wall time to other
					// processes on a shared machine.
					b.ReportMetric(cpu.Seconds()*1e3/float64(b.N*batch), "cpu-ms/img")
				}
			})
		}
	}
}

// BenchmarkLogits measures Model.Logits (no preprocessing) on ResNet-20
// (full width, option-A shortcuts, random weights) dense and with 90 % of
// every convolution and linear weight set to exact zeros at random, which
// runs on the sparse path: batch 1 and 64, 1 and 2 threads. cpu-us/img is
// the process's CPU time per image.
func BenchmarkLogits(b *testing.B) {
	for _, zeros := range []float64{0, 0.9} {
		spec := models.Spec{Model: "resnet20"}
		net, err := spec.Build()
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		nntest.ZeroWeights(net, rng, zeros)
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
					cpu, _ := procstat.CPUTime()
					for range b.N {
						dst = m.Logits(dst, x)
					}
					cpu1, _ := procstat.CPUTime()
					cpu = cpu1 - cpu
					b.ReportMetric(cpu.Seconds()*1e6/float64(b.N*batch), "cpu-us/img")
					b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "img/s")
				})
			}
		}
	}
}
