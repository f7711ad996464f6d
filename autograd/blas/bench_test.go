package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
)

// benchGemm times one product and reports GFLOP/s (2·m·n·k per op).
func benchGemm(b *testing.B, transA, transB bool, m, n, k, threads int) {
	benchGemmWith(b, Sgemm, transA, transB, m, n, k, threads)
}

// benchGemmWith is benchGemm with the product gemm (Sgemm or SgemmBF16).
func benchGemmWith(b *testing.B, gemm func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int), transA, transB bool, m, n, k, threads int) {
	defer parallel.SetWorkers(parallel.SetWorkers(threads))
	rng := rand.New(rand.NewPCG(1, 1))
	av := randSlice(rng, m*k)
	bv := randSlice(rng, k*n)
	cv := make([]float32, m*n)
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	gemm(transA, transB, m, n, k, 1, av, lda, bv, ldb, 0, cv, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		gemm(transA, transB, m, n, k, 1, av, lda, bv, ldb, 0, cv, n)
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkSgemmSquare(b *testing.B) {
	for _, s := range []int{256, 1024, 2048} {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/n=%d/threads=%d", Kernel(), s, th), func(b *testing.B) {
				benchGemm(b, false, false, s, s, s, th)
			})
		}
	}
}

// BenchmarkSgemmConv times the GEMMs of ResNet-20's 3×3 convolutions on
// CIFAR-10 (Cout = Cin = 16, 32, 64 at 32², 16², 8² pixels) as
// autograd.Conv2d issues them over a chunk of images, with K = 9·Cin and
// N = pixels·images: forward Y = W·col with the filter matrix stored
// transposed (op(A) = Wᵀᵀ, m = Cout), weight gradient dW = dY·colᵀ with
// colᵀ stored (N×K), and input gradient dcol = Wᵀ·dY.
func BenchmarkSgemmConv(b *testing.B) {
	for _, s := range []struct{ cout, hw, imgs int }{
		{16, 32 * 32, 1}, {16, 32 * 32, 8},
		{32, 16 * 16, 2}, {32, 16 * 16, 16},
		{64, 8 * 8, 8}, {64, 8 * 8, 64},
	} {
		m, k, n := s.cout, 9*s.cout, s.hw*s.imgs
		for _, th := range []int{1, 2} {
			name := fmt.Sprintf("%s/cout=%d/k=%d/n=%d/threads=%d", Kernel(), m, k, n, th)
			b.Run("fwd/"+name, func(b *testing.B) { benchGemm(b, true, false, m, n, k, th) })
			b.Run("dW/"+name, func(b *testing.B) { benchGemm(b, false, false, m, k, n, th) })
			b.Run("dcol/"+name, func(b *testing.B) { benchGemm(b, true, false, k, n, m, th) })
		}
	}
}

// BenchmarkSgemmLinear times the products of a fully connected layer and
// of the PTB LSTM's gate GEMMs: forward x·wᵀ and the two gradients.
func BenchmarkSgemmLinear(b *testing.B) {
	for _, s := range []struct{ batch, in, out int }{{20, 300, 1200}, {128, 512, 512}, {128, 64, 10}} {
		name := fmt.Sprintf("%s/batch=%d/in=%d/out=%d", Kernel(), s.batch, s.in, s.out)
		b.Run("fwd/"+name, func(b *testing.B) { benchGemm(b, false, true, s.batch, s.out, s.in, 1) })
		b.Run("dx/"+name, func(b *testing.B) { benchGemm(b, false, false, s.batch, s.in, s.out, 1) })
		b.Run("dw/"+name, func(b *testing.B) { benchGemm(b, true, false, s.out, s.in, s.batch, 1) })
	}
}

// BenchmarkKernel times the micro-kernels alone on L1-resident panels:
// the ceiling for the whole product.
func BenchmarkKernel(b *testing.B) {
	for _, name := range Kernels() {
		kern := lookup(name)
		b.Run(name, func(b *testing.B) {
			const kc = 256
			ap := alignedFloats(kc * kern.mr)
			bp := alignedFloats(kc * kern.nr)
			c := alignedFloats(kern.mr * kern.nr)
			for i := 0; i < b.N; i++ {
				kern.run(kern.mr, kern.nr, kc, ap, bp, kern.nr, c, kern.nr, 1, 1, nil)
			}
			b.ReportMetric(2*float64(kern.mr*kern.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPack times packing a 1024×1024 operand in the blocks the
// AVX-512 path uses, per element, for the four layouts.
func BenchmarkPack(b *testing.B) {
	n := 1024
	rng := rand.New(rand.NewPCG(1, 1))
	src := randSlice(rng, n*n)
	dst := alignedFloats(512 * 512)
	b.ResetTimer()
	b.Run("A-strided", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for i0 := 0; i0 < n; i0 += 240 {
				for pc := 0; pc < n; pc += 512 {
					packA(false, src, n, i0, min(240, n-i0), pc, 512, 12, dst)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*n), "ns/elem")
	})
	b.Run("A-contig", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for i0 := 0; i0 < n; i0 += 240 {
				for pc := 0; pc < n; pc += 512 {
					packA(true, src, n, i0, min(240, n-i0), pc, 512, 12, dst)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*n), "ns/elem")
	})
	b.Run("B-contig", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for pc := 0; pc < n; pc += 256 {
				packB(false, src, n, 0, n, pc, 256, 32, 0, n/32, dst)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*n), "ns/elem")
	})
	b.Run("B-strided", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for pc := 0; pc < n; pc += 256 {
				packB(true, src, n, 0, n, pc, 256, 32, 0, n/32, dst)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*n), "ns/elem")
	})
}

// BenchmarkSgemmBF16 times SgemmBF16 against Sgemm, alternating, on a
// square product and on the forward GEMM of ResNet-20's 16-channel layer
// over 8 images (m = 16, k = 144, n = 8192).
func BenchmarkSgemmBF16(b *testing.B) {
	for _, s := range []struct {
		tA      bool
		m, n, k int
	}{{false, 1024, 1024, 1024}, {true, 16, 8192, 144}, {true, 64, 4096, 576}} {
		for _, th := range []int{1, 2} {
			name := fmt.Sprintf("m=%d/n=%d/k=%d/threads=%d", s.m, s.n, s.k, th)
			b.Run("fp32/"+name, func(b *testing.B) { benchGemmWith(b, Sgemm, s.tA, false, s.m, s.n, s.k, th) })
			b.Run("bf16/"+name, func(b *testing.B) { benchGemmWith(b, SgemmBF16, s.tA, false, s.m, s.n, s.k, th) })
		}
	}
}
