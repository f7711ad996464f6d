//go:build !purego

package kernels

// stride2Asm: Stride2Rows, AddStride2Rows and AddInterleaveRows have AVX2
// kernels (run while useAsm).
const stride2Asm = true

// stride2AVX2 is Stride2Rows' loop for n a positive multiple of 8 whose
// rows may be read to their value 2n − 1, strides in bytes.
//
//go:noescape
func stride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int)

// addStride2AVX2 is AddStride2Rows' loop for n a positive multiple of 8
// whose dst rows may be read and written back to their value 2n − 1,
// strides in bytes.
//
//go:noescape
func addStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int)

// addInterleaveAVX2 is AddInterleaveRows' loop for n a positive multiple
// of 8, strides in bytes.
//
//go:noescape
func addInterleaveAVX2(dst *float32, ldd int, a, b *float32, lds int, rows, n int)
