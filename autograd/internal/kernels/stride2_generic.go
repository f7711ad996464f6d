//go:build !amd64 || purego

package kernels

// stride2Asm: Stride2Rows, AddStride2Rows and AddInterleaveRows have no
// assembly kernels here.
const stride2Asm = false

func stride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int) {
	panic("kernels: no Stride2Rows kernel")
}

func addStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int) {
	panic("kernels: no AddStride2Rows kernel")
}

func addInterleaveAVX2(dst *float32, ldd int, a, b *float32, lds int, rows, n int) {
	panic("kernels: no AddInterleaveRows kernel")
}
