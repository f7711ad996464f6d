//go:build !amd64 || purego

package proxk

func groupSumsAVX2(z, eta *float32, n int, acc *[24]float64, mm *[2]float32) { noKernels() }

func newtonSumsAVX2(z, eta *float32, n int, rho, lam float64, acc *[16]float64) { noKernels() }

func scaleFirstOrderAVX2(dst, z, eta *float32, n int, c float32) { noKernels() }

func scaleRhoAVX2(dst, z, eta *float32, n int, rho, lam float64) { noKernels() }

func groupSums32AVX2(z, eta *float32, n int, acc *[32]float32, mm *[2]float32) { noKernels() }

func accumSums32AVX2(z, eta, a2, ae, lo, hi *float32, n int) { noKernels() }

func scaleFirstOrderVecAVX2(dst, z, eta, c *float32, n int) { noKernels() }
