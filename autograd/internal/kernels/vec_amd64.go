//go:build !purego

package kernels

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

func init() { impl.Register("kernels", "avx2", &useAsm) }

// haveAsm reports whether the CPU and operating system support the AVX2
// kernels of vec_amd64.s.
var haveAsm = cpu.X86.AVX2

// asmSums: the float64 sums (Stats, GradSums) have AVX2 kernels too.
const asmSums = true

// asmReLUMask: GradSumsReLU and AffineGradReLU have AVX2 kernels that
// recompute the ReLU mask from x.
const asmReLUMask = true

// The kernels process n elements, n a positive multiple of 8; the Go
// wrappers in vec.go handle the rest. Each computes what the Go loop of
// its wrapper computes, bit for bit.

//go:noescape
func statsAsm(x *float32, n int, k float64) (s1, s2 float64)

//go:noescape
func gradSumsAsm(dy, x *float32, n int, mean float64) (sdy, sdyx float64)

//go:noescape
func gradSumsMaskedAsm(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64)

// gradSumsReLUAsm is gradSumsMaskedAsm with the mask y > 0 recomputed
// as (x − m)·a + b > 0.
//
//go:noescape
func gradSumsReLUAsm(dy, x *float32, n int, mean float64, m, a, b float32) (sdy, sdyx float64)

// affineAsm: mode 0 plain, 1 ReLU, 2 residual and ReLU (Epilogue).
//
//go:noescape
func affineAsm(dst, x, r *float32, n int, m, a, b float32, mode int)

// affineGradAsm: mode bit 0 masks g by y > 0, bit 1 stores instead of
// adding.
//
//go:noescape
func affineGradAsm(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int)

// affineGradReLUAsm is affineGradAsm with the mask y > 0 recomputed as
// (x − m)·a + b > 0; mode bit 1 stores instead of adding.
//
//go:noescape
func affineGradReLUAsm(dst, dy, x *float32, n int, m, k1, k2, k3, a, b float32, mode int)

// maskedGradAsm: mode bit 1 stores instead of adding.
//
//go:noescape
func maskedGradAsm(dst, dy, y *float32, n int, mode int)

//go:noescape
func reluAsm(dst, x *float32, n int)
