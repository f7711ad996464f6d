//go:build !amd64 || purego

package optim

// haveAVX2 is false where the assembly kernels are not built.
var haveAVX2 = false

func proxL1AVX2(dst, z, eta *float32, n int, l float32) { panic("optim: no AVX2 kernels") }

func proxL0AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8) {
	panic("optim: no AVX2 kernels")
}

func proxL12AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8, poly *float32) {
	panic("optim: no AVX2 kernels")
}

func adamAVX2(th, grad, m, v *float32, n int, c *float32) { panic("optim: no AVX2 kernels") }

func adamEtaAVX2(th, grad, m, v, eta *float32, n int, c *float32) {
	panic("optim: no AVX2 kernels")
}
