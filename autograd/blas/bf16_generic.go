//go:build !amd64 || purego

package blas

// useBF16: no bfloat16 assembly on this platform.
var useBF16 = false

func bf16KernelAsm(kp int, ap, bp []uint32, c []float32, ldc int, alpha, beta float32, rows, cols int) bool {
	return false
}

func bf16PackAsm(src []float32, ld, kcb, w, width, store int, dst []uint32) bool {
	return false
}

func bf16PackPanelsAsm(src []float32, ld, kcb, np int, dst []uint32) bool { return false }

func bf16PackRowsAsm(src []float32, ld, kcb, rows int, dst []uint32) bool { return false }

func bf16RowsKernelAsm(kp int, ap, src []uint32, offs []int32, c []float32, ldc int, beta float32, rows, cols int) {
	panic("blas: no bfloat16 assembly")
}

func bf16ARowsKernelAsm(kp int, src []uint32, offs *[bf16MR]int32, bp []uint32, c []float32, ldc int, beta float32, rows, cols int) {
	panic("blas: no bfloat16 assembly")
}

func bf16PlaneRowsAsm(dst []uint32, dstride int, src []float32, sstride, ld, rows, w int, single bool) bool {
	return false
}
