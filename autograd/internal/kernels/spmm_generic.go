//go:build !amd64 || purego

package kernels

// spmmAsm: SparseRows has no assembly kernel here.
const spmmAsm = false

func rowAVX2(dst *float32, n int, val *float32, off *int, nnz int, b *float32, init *float32) {
	panic("kernels: no AVX2 kernel")
}
