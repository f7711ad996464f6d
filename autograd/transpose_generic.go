//go:build !amd64 || purego

package autograd

func transpose8AVX2(src *float32, lds int, dst *float32, ldd int, n int) {
	panic("autograd: no AVX2 kernels")
}
