package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd/parallel"
)

// benchGemm times one product and reports GFLOP/s (2·m·n·k per op).
func benchGemm(b *testing.B, transA, transB bool, m, n, k, threads int) {
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
	Sgemm(transA, transB, m, n, k, 1, av, lda, bv, ldb, 0, cv, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Sgemm(transA, transB, m, n, k, 1, av, lda, bv, ldb, 0, cv, n)
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
// CIFAR-10 with im2col over a chunk of images: forward Y = W·col
// (Cout × K times K × HW·imgs), weight gradient dW = dY·colᵀ and input
// gradient dcol = Wᵀ·dY.
func BenchmarkSgemmConv(b *testing.B) {
	for _, s := range []struct{ cout, cin, hw, imgs int }{
		{16, 16, 32 * 32, 8},
		{32, 32, 16 * 16, 16},
		{64, 64, 8 * 8, 64},
	} {
		m, k, n := s.cout, 9*s.cin, s.hw*s.imgs
		for _, th := range []int{1, 2} {
			name := fmt.Sprintf("%s/cout=%d/k=%d/n=%d/threads=%d", Kernel(), m, k, n, th)
			b.Run("fwd/"+name, func(b *testing.B) { benchGemm(b, false, false, m, n, k, th) })
			b.Run("dW/"+name, func(b *testing.B) { benchGemm(b, false, true, m, k, n, th) })
			b.Run("dcol/"+name, func(b *testing.B) { benchGemm(b, true, false, k, n, m, th) })
		}
	}
}
