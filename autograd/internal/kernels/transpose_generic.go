//go:build !amd64 || purego

package kernels

// transposeAsm: TransposeStrided has no assembly kernel here.
const transposeAsm = false

func transpose8AVX2(src *float32, lds int, dst *float32, ldd int, n int) {
	panic("kernels: no TransposeStrided kernel")
}

func transpose16AVX2(src *float32, lds int, dst *float32, ldd int, n int) {
	panic("kernels: no TransposeStrided kernel")
}
