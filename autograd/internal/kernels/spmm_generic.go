//go:build !amd64 || purego

package kernels

// spmmAsm: SparseRows has no assembly kernel here.
const spmmAsm = false

// useAVX512: no AVX-512 kernels here.
const useAVX512 = false

var rowAVX512 [16]func(dst *float32, val *float32, off *int, nnz int, b *float32, init *float32, mask int)

func rowAVX2(dst *float32, n int, terms *uint64, nnz int, b *float32, init *float32) {
	panic("kernels: no AVX2 kernel")
}

var rowsAVX512 [16]func(dst *float32, ldd int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32, mask int)

func rowsAVX2(dst *float32, ldd int, n int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32) {
	panic("kernels: no AVX2 kernel")
}

// kmaxShift: as in gen_spmm512.go (no such kernels here).
const kmaxShift = 4

func shiftRowsAVX512(k int, d0, d1, d2 *float32, ldc int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32, res *float32, ldr int, masks *uint16, flags int) {
	panic("kernels: no AVX-512 kernel")
}

// kmaxShiftAVX2: as in gen_spmm512.go (no such kernels here).
const kmaxShiftAVX2 = 8

func shiftRowsAVX2(k int, d0, d1, d2 *float32, ldc int, rowPtr *int32, terms *uint64, rows int, b *float32, init *float32, res *float32, ldr int, masks *uint32, flags int) {
	panic("kernels: no AVX2 kernel")
}
