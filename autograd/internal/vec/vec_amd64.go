//go:build !purego

package vec

import "github.com/proxgen/proxgen/autograd/cpu"

// haveAVX2 reports whether the CPU and operating system support the AVX2
// kernels of vec_amd64.s.
var haveAVX2 = cpu.X86.AVX2

// The kernels process n elements, n a positive multiple of 8; the Go
// wrappers in vec.go handle the rest. Each computes what the Go loop of
// its wrapper computes, bit for bit.

//go:noescape
func statsAVX2(x *float32, n int, k float64) (s1, s2 float64)

//go:noescape
func gradSumsAVX2(dy, x *float32, n int, mean float64) (sdy, sdyx float64)

//go:noescape
func gradSumsMaskedAVX2(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64)

// affineAVX2: mode 0 plain, 1 ReLU, 2 residual and ReLU (Epilogue).
//
//go:noescape
func affineAVX2(dst, x, r *float32, n int, m, a, b float32, mode int)

// affineGradAVX2: mode bit 0 masks g by y > 0, bit 1 stores instead of
// adding.
//
//go:noescape
func affineGradAVX2(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int)

// maskedGradAVX2: mode bit 1 stores instead of adding.
//
//go:noescape
func maskedGradAVX2(dst, dy, y *float32, n int, mode int)

//go:noescape
func reluAVX2(dst, x *float32, n int)
