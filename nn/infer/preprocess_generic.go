//go:build !amd64 || purego

package infer

func ycc1AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int) {
	panic("infer: no AVX2 kernels")
}

func ycc2AVX2(pr, pg, pb *int32, y, cb, cr *uint8, n int) {
	panic("infer: no AVX2 kernels")
}

func hdotAVX2(out *uint8, pr, pg, pb *int32, first *int, k *int32, taps int) {
	panic("infer: no AVX2 kernels")
}

func vdotAVX2(dst, mid *uint8, k *int32, taps int) {
	panic("infer: no AVX2 kernels")
}
