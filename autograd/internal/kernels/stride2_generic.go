//go:build !amd64 || purego

package kernels

// stride2Asm: Stride2Rows and AddStride2Rows have no assembly kernels here.
const stride2Asm = false

func stride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int) {
	panic("kernels: no Stride2Rows kernel")
}

func addStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, n int) {
	panic("kernels: no AddStride2Rows kernel")
}
