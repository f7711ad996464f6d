//go:build !arm64 || purego

package optim

// haveNEON is false where the NEON kernels are not built.
var haveNEON = false

func adamNEON(th, grad, m, v *float32, n int, c *float32) { panic("optim: no NEON kernels") }

func adamEtaNEON(th, grad, m, v, eta *float32, n int, c *float32) {
	panic("optim: no NEON kernels")
}
