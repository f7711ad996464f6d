//go:build !amd64 || purego

package autograd

func maxPool2AVX2(src, dst, arg *float32, n, w, half, adv, start int) {
	panic("autograd: no AVX2 kernels")
}

func maxPool2GradAVX2(gx, gy, arg *float32, n, w, half, adv, start int, store bool) {
	panic("autograd: no AVX2 kernels")
}
