//go:build !amd64 || purego

package autograd

func expBlocksAVX2(dst, row *float32, n int, m float32, s *[4]float64) {
	panic("autograd: no AVX2 kernels")
}
