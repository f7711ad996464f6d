//go:build !purego

package blas

import (
	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

//go:generate go run gen_kernels.go

// useAVX2 and useAVX512 say whether the AVX2+FMA and the AVX-512F kernels
// (and, with AVX-512, the packing routines of pack_amd64.go) may run: what
// the CPU and operating system support, which only tests change, through
// internal/impl.
var (
	useAVX2   = cpu.X86.AVX2 && cpu.X86.FMA
	useAVX512 = cpu.X86.AVX512F
)

func init() {
	impl.Register("blas", "avx2", &useAVX2)
	impl.Register("blas", "avx512", &useAVX512)
}

var avx2Kernel = &microKernel{
	name: "avx2",
	why:  "CPU and OS support AVX2 and FMA (CPUID, XGETBV)",
	mr:   6, nr: 16,
	mc: 144, kc: 256, nc: 3072,
	inPlaceM: 144, inPlaceKC: 256,
	run:         runAVX2,
	partialRows: true, strided: true,
}

var avx512Kernel = &microKernel{
	name: "avx512",
	why:  "CPU and OS support AVX-512F (CPUID, XGETBV)",
	mr:   12, nr: 32,
	mc: 240, kc: 512, nc: 3072,
	inPlaceM: 480, inPlaceKC: 256,
	run:         runAVX512,
	partialRows: true, partialCols: true, strided: true,
	dot:       dotAVX512,
	gather:    gatherAVX512,
	dotGather: dotGatherAVX512,
}

// archKernels returns the assembly kernels enabled, best last.
func archKernels() []*microKernel {
	var ks []*microKernel
	if useAVX2 {
		ks = append(ks, avx2Kernel)
	}
	if useAVX512 {
		ks = append(ks, avx512Kernel)
	}
	return ks
}

// avx512Kernels[r-1] is the AVX-512 kernel for r rows (kernel_amd64.s).
var avx512Kernels = [12]func(kc int, a, b *float32, ldb int, c *float32, ldc int, alpha, beta float32, mask uint32, pf *float32){
	kernelAVX512x1, kernelAVX512x2, kernelAVX512x3, kernelAVX512x4,
	kernelAVX512x5, kernelAVX512x6, kernelAVX512x7, kernelAVX512x8,
	kernelAVX512x9, kernelAVX512x10, kernelAVX512x11, kernelAVX512x12,
}

// avx512GatherKernels[r-1] is the AVX-512 gather kernel for r rows.
var avx512GatherKernels = [12]func(kc int, a, src *float32, offs *int32, b0, b1 int, c *float32, ldc int, alpha, beta float32, mask uint32){
	kernelAVX512G1, kernelAVX512G2, kernelAVX512G3, kernelAVX512G4,
	kernelAVX512G5, kernelAVX512G6, kernelAVX512G7, kernelAVX512G8,
	kernelAVX512G9, kernelAVX512G10, kernelAVX512G11, kernelAVX512G12,
}

// gatherAVX512 implements microKernel.gather for the AVX-512 kernels. The
// caller (SgemmGather) has checked that every offset lies in src.
func gatherAVX512(rows, cols, kc int, ap, src []float32, offs []int32, b0, b1 int, c []float32, ldc int, alpha, beta float32) {
	_ = ap[kc*12-1]
	_ = offs[kc-1]
	_ = c[(rows-1)*ldc+cols-1]
	mask := uint32(1)<<cols - 1
	avx512GatherKernels[rows-1](kc, &ap[0], &src[0], &offs[0], b0, b1, &c[0], ldc, alpha, beta, mask)
}

// avx2Kernels[r-1] is the AVX2 kernel for r rows (kernel_amd64.s).
var avx2Kernels = [6]func(kc int, a, b *float32, ldb int, c *float32, ldc int, alpha, beta float32, pf *float32){
	kernelAVX2x1, kernelAVX2x2, kernelAVX2x3, kernelAVX2x4, kernelAVX2x5, kernelAVX2x6,
}

// runAVX512 implements microKernel.run for the 12×32 AVX-512 kernels. The
// slice expressions check that every element the kernel touches exists.
func runAVX512(rows, cols, kc int, ap, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, pf *float32) {
	_ = ap[kc*12-1]
	_ = b[(kc-1)*ldb+31]
	_ = c[(rows-1)*ldc+cols-1]
	mask := uint32(1)<<cols - 1 // cols == 32 gives all ones
	if pf == nil {
		pf = &b[0]
	}
	avx512Kernels[rows-1](kc, &ap[0], &b[0], ldb, &c[0], ldc, alpha, beta, mask, pf)
}

// runAVX2 implements microKernel.run for the 6×16 AVX2 kernels.
func runAVX2(rows, _, kc int, ap, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, pf *float32) {
	_ = ap[kc*6-1]
	_ = b[(kc-1)*ldb+15]
	_ = c[(rows-1)*ldc+15]
	if pf == nil {
		pf = &b[0]
	}
	avx2Kernels[rows-1](kc, &ap[0], &b[0], ldb, &c[0], ldc, alpha, beta, pf)
}
