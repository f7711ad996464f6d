//go:build !purego

package blas

import "github.com/proxgen/proxgen/internal/impl"

// useNEON says whether the NEON kernel may run: ASIMD is part of every
// arm64 CPU (the Go port requires it), so no feature test is needed; only
// tests clear it, through internal/impl.
var useNEON = true

func init() { impl.Register("blas", "neon", &useNEON) }

var neonKernel = &microKernel{
	name: "neon",
	why:  "ASIMD (NEON) is mandatory on arm64",
	mr:   8, nr: 12,
	mc: 128, kc: 256, nc: 3072,
	inPlaceM: 128, inPlaceKC: 256,
	run:         runNEON,
	partialRows: true, strided: true,
}

// archKernels returns the NEON kernel while it is enabled.
func archKernels() []*microKernel {
	if !useNEON {
		return nil
	}
	return []*microKernel{neonKernel}
}

// neonKernels[r-1] is the NEON kernel for r rows (kernel_arm64.s).
var neonKernels = [8]func(kc int, a, b *float32, ldb int, c *float32, ldc int, alpha, beta float32){
	kernelNEONx1, kernelNEONx2, kernelNEONx3, kernelNEONx4,
	kernelNEONx5, kernelNEONx6, kernelNEONx7, kernelNEONx8,
}

// runNEON implements microKernel.run for the 8×12 NEON kernels, which take
// any number of rows but all 12 columns. The slice expressions check that
// every element the kernel touches exists.
func runNEON(rows, _, kc int, ap, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, _ *float32) {
	_ = ap[kc*8-1]
	_ = b[(kc-1)*ldb+11]
	_ = c[(rows-1)*ldc+11]
	neonKernels[rows-1](kc, &ap[0], &b[0], ldb, &c[0], ldc, alpha, beta)
}
