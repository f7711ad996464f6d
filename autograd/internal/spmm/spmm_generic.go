//go:build !amd64 || purego

package spmm

// haveAVX2 is false where the assembly kernel is not built.
const haveAVX2 = false

func rowAVX2(dst *float32, n int, val *float32, off *int, nnz int, b *float32) {
	panic("spmm: no AVX2 kernel")
}
