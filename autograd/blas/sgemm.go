// Package blas implements single-precision general matrix multiplication
// (SGEMM) for row-major matrices.
//
// Sgemm follows the BLIS design. op(B) is packed into zero-padded panels of
// nr columns and op(A) into panels of mr rows, and a register-blocked
// micro-kernel multiplies an mr×kc panel of A with a kc×nr panel of B,
// keeping the mr×nr block of C in registers; the loops around it block for
// the caches. Two shapes common in neural networks take other routes: when
// C has few rows, the kernel reads B where it lies instead of packing it
// (each panel of B would be used only a few times), and C = A·Bᵀ with few
// rows is computed as blocks of dot products of rows of A and B, which
// needs no packing at all (transposing B would cost more than the product).
//
// The rows and columns of C are split between the workers of package
// autograd/parallel; products with m·n·k below about four million run on
// the calling goroutine. The K dimension is never split between workers, its
// blocking and the tile grid do not depend on the number of workers, and
// every element of C is computed by the same instructions in the same
// order whichever worker computes it, so results are bit-identical for
// every number of workers.
//
// On amd64 the micro-kernels are written in assembly for AVX-512 (12×32,
// plus the 4×6 dot-product kernel and the packing routines) or AVX2 with
// FMA (6×16), chosen at start-up from what the CPU and the operating system
// support (CPUID and XGETBV); elsewhere, or when built with the purego tag,
// a pure-Go kernel is used. The environment variable
// PROXGEN_GEMM=generic|avx2|avx512 forces a kernel, SetKernel changes it at
// run time and Kernel names it. Kernels differ only in rounding.
package blas

import (
	"fmt"
)

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices,
// where op(X) is X, or its transpose Xᵀ when the matching trans flag is set.
// op(A) is m×k, op(B) is k×n and C is m×n; lda, ldb and ldc are the row
// strides of the stored A, B and C. As in reference BLAS, beta == 0 means C
// is overwritten without being read, so it may hold NaN or Inf, and when
// alpha == 0 or k == 0 A and B are not read.
//
// Sgemm runs in parallel on the autograd/parallel worker pool when the
// product is large enough; its result does not depend on the worker count.
// It panics if a dimension is negative, a leading dimension is too small or
// a slice is too short for the dimensions.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check("Sgemm", transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemm(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmSerial is Sgemm run entirely on the calling goroutine. It is meant
// for callers that already parallelize over independent products, such as
// the images of a batch. Its results are identical to Sgemm's.
func SgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check("SgemmSerial", transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemm(false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// check panics with a message naming fn and the dimensions if the
// arguments do not describe valid matrices.
func check(fn string, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("blas.%s: negative dimension m=%d n=%d k=%d", fn, m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	checkMat(fn, "A", transA, m, n, k, ar, ac, a, lda)
	checkMat(fn, "B", transB, m, n, k, br, bc, b, ldb)
	checkMat(fn, "C", false, m, n, k, m, n, c, ldc)
}

// checkMat checks one stored rows×cols matrix x with row stride ld.
func checkMat(fn, name string, trans bool, m, n, k, rows, cols int, x []float32, ld int) {
	if ld < cols || ld < 0 {
		panic(fmt.Sprintf("blas.%s: ld%s=%d is less than the %d columns of the stored %dx%d %s (m=%d n=%d k=%d trans%s=%v)",
			fn, lower(name), ld, cols, rows, cols, name, m, n, k, name, trans))
	}
	if rows == 0 || cols == 0 {
		return
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		panic(fmt.Sprintf("blas.%s: len(%s)=%d but the stored %dx%d %s with ld%s=%d needs %d elements (m=%d n=%d k=%d trans%s=%v)",
			fn, lower(name), len(x), rows, cols, name, lower(name), ld, need, m, n, k, name, trans))
	}
}

func lower(s string) string {
	switch s {
	case "A":
		return "a"
	case "B":
		return "b"
	}
	return "c"
}

// scaleC sets C = beta·C for the m×n matrix C, writing zeros when beta == 0.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
