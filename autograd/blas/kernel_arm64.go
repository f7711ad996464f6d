//go:build !purego

package blas

// kernelNEON8x12 computes C = alpha·A·B + beta·C for an 8×12 tile
// (kernel_arm64.s): a holds kc groups of 8 values, b kc rows of 12 values
// ldb apart, c 8 rows of 12 values ldc apart. beta == 0 does not read C.
//
//go:noescape
func kernelNEON8x12(kc int, a, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

// archKernels returns the NEON kernel: ASIMD is part of every arm64 CPU
// (the Go port requires it), so no feature test is needed.
func archKernels() []*microKernel {
	return []*microKernel{{
		name: "neon",
		why:  "ASIMD (NEON) is mandatory on arm64",
		mr:   8, nr: 12,
		mc: 128, kc: 256, nc: 3072,
		inPlaceM: 128, inPlaceKC: 256,
		run:     runNEON,
		strided: true,
	}}
}

// runNEON implements microKernel.run for the 8×12 NEON kernel, which
// computes full tiles only. The slice expressions check that every
// element the kernel touches exists.
func runNEON(_, _, kc int, ap, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, _ *float32) {
	_ = ap[kc*8-1]
	_ = b[(kc-1)*ldb+11]
	_ = c[7*ldc+11]
	kernelNEON8x12(kc, &ap[0], &b[0], ldb, &c[0], ldc, alpha, beta)
}
