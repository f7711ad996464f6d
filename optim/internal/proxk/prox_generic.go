//go:build !amd64 || purego

package proxk

// HaveAVX2 is false where the assembly kernels are not built.
var HaveAVX2 = false

func noKernels() { panic("optim: no AVX2 kernels") }

func proxL1AVX2(dst, z, eta *float32, n int, l float32) { noKernels() }

func proxL0AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8) int {
	noKernels()
	return 0
}

func l12SAVX2(s, z, eta *float32, n int, l2 float32) { noKernels() }

func L12XAVX2(dst, z, s *float32, n int, mask *uint8, rat *[7]float32) int {
	noKernels()
	return 0
}

func AdamAVX2(th, grad, m, v *float32, n int, c *float32) { noKernels() }

func AdamEtaAVX2(th, grad, m, v, eta *float32, n int, c *float32) { noKernels() }

func AdamL12SAVX2(th, grad, m, v, eta, s *float32, n int, c *float32, l2 float32) { noKernels() }
