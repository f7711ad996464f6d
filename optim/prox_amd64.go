//go:build !purego

package optim

import "github.com/proxgen/proxgen/autograd/cpu"

// haveAVX2 reports whether the CPU and operating system support the AVX2
// prox kernels. Tests switch it off to compare with the Go loops. (An
// AVX-512 version of the ℓ1/2 kernel measured only 14% faster.)
var haveAVX2 = cpu.X86.AVX2

//go:noescape
func proxL1AVX2(dst, z, eta *float32, n int, l float32)

//go:noescape
func proxL0AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8)

//go:noescape
func proxL12AVX2(dst, z, eta *float32, n int, l2 float32, mask *uint8, poly *float32)

//go:noescape
func adamAVX2(th, grad, m, v *float32, n int, c *float32)

//go:noescape
func adamEtaAVX2(th, grad, m, v, eta *float32, n int, c *float32)
