package blas

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/parallel"
)

// SgemmRows computes C = alpha·op(A)·B + beta·C where the k×n matrix B is
// given by where its rows start: row p is b[rowOff[p] : rowOff[p]+n]. Rows
// may overlap, so B can be a gathered view of other data, such as the
// im2col matrix of a convolution, which is then read where it lies instead
// of being copied. op(A), C, lda, ldc, alpha and beta are as in Sgemm.
//
// Kernels that read B in place use the offsets directly; otherwise, and
// when C has too many rows for reading B in place to pay, B is gathered
// into a buffer first. Results do not depend on the worker count. It
// panics if a dimension is negative, len(rowOff) < k, or a row of B or a
// matrix does not fit its slice.
func SgemmRows(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, rowOff []int, beta float32, c []float32, ldc int) {
	checkRows("SgemmRows", transA, m, n, k, a, lda, b, rowOff, c, ldc)
	gemmRows(true, transA, m, n, k, alpha, a, lda, b, rowOff, beta, c, ldc)
}

// SgemmRowsSerial is SgemmRows run entirely on the calling goroutine, as
// SgemmSerial is to Sgemm. Its results are identical to SgemmRows'.
func SgemmRowsSerial(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, rowOff []int, beta float32, c []float32, ldc int) {
	checkRows("SgemmRowsSerial", transA, m, n, k, a, lda, b, rowOff, c, ldc)
	gemmRows(false, transA, m, n, k, alpha, a, lda, b, rowOff, beta, c, ldc)
}

// checkRows is check for the row-offset form of B.
func checkRows(fn string, transA bool, m, n, k int, a []float32, lda int, b []float32, rowOff []int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("blas.%s: negative dimension m=%d n=%d k=%d", fn, m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	checkMat(fn, "A", transA, m, n, k, ar, ac, a, lda)
	checkMat(fn, "C", false, m, n, k, m, n, c, ldc)
	if len(rowOff) < k {
		panic(fmt.Sprintf("blas.%s: %d row offsets for the %d rows of B (m=%d n=%d k=%d)", fn, len(rowOff), k, m, n, k))
	}
	if n == 0 {
		return
	}
	for p, off := range rowOff[:k] {
		if off < 0 || off+n > len(b) {
			panic(fmt.Sprintf("blas.%s: row %d of B at offset %d with %d columns does not fit len(b)=%d (m=%d n=%d k=%d)",
				fn, p, off, n, len(b), m, n, k))
		}
	}
}

// gemmRows is the driver behind SgemmRows; the arguments are checked.
func gemmRows(par, transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, rowOff []int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	kern := active.Load()
	if !kern.strided || m > kern.inPlaceM || n < kern.nr {
		// Gather B and multiply it as an ordinary matrix.
		bp := getB(k * n)
		defer bFree.put(bp)
		g := (*bp)[:k*n]
		for p, off := range rowOff[:k] {
			copy(g[p*n:(p+1)*n], b[off:off+n])
		}
		gemm(par, transA, false, m, n, k, alpha, a, lda, g, n, beta, c, ldc)
		return
	}
	workers := 1
	if par && m*n*k >= parallelWork {
		workers = parallel.Workers()
	}
	gemmInPlaceB(kern, workers, transA, m, n, k, alpha, a, lda, b, 0, rowOff, beta, c, ldc)
}
