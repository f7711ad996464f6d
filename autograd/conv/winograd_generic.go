//go:build !amd64 || purego

package conv

func winoInRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int) {
	panic("conv: no AVX2 kernels")
}

func winoInColsAVX2(o0, o1, o2, o3, d0, d1, d2, d3 *float32, n int) {
	panic("conv: no AVX2 kernels")
}

func winoOutColsAVX2(o0, o1, d0, d1, d2, d3 *float32, n int) { panic("conv: no AVX2 kernels") }

func winoOutRowsAVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, half, adv int) {
	panic("conv: no AVX2 kernels")
}

func winoFilterAVX2(dst *float32, pitch int, src *float32, stride, n int, swap bool) {
	panic("conv: no AVX2 kernels")
}

func winoInRows2AVX2(row, o0, o1, o2, o3 *float32, n, wp int) { panic("conv: no AVX2 kernels") }

func winoOutRows2AVX2(row, d0, d1, d2, d3 *float32, n int, mode int, bias float32, wo int) {
	panic("conv: no AVX2 kernels")
}

func winoGradRowsAVX2(row, o0, o1, o2, o3 *float32, n, half, adv int) {
	panic("conv: no AVX2 kernels")
}

func winoGradColsAVX2(o0, o1, o2, o3, d0, d1 *float32, n int) { panic("conv: no AVX2 kernels") }
