//go:build !amd64 || purego

package vec

// haveAVX2 is false where the assembly kernels are not built.
const haveAVX2 = false

func statsAVX2(x *float32, n int, k float64) (s1, s2 float64) { panic("vec: no AVX2 kernels") }

func gradSumsAVX2(dy, x *float32, n int, mean float64) (sdy, sdyx float64) {
	panic("vec: no AVX2 kernels")
}

func gradSumsMaskedAVX2(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64) {
	panic("vec: no AVX2 kernels")
}

func affineAVX2(dst, x, r *float32, n int, m, a, b float32, mode int) {
	panic("vec: no AVX2 kernels")
}

func affineGradAVX2(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int) {
	panic("vec: no AVX2 kernels")
}

func maskedGradAVX2(dst, dy, y *float32, n int, mode int) { panic("vec: no AVX2 kernels") }

func reluAVX2(dst, x *float32, n int) { panic("vec: no AVX2 kernels") }
