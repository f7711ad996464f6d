//go:build !purego

package proxk

// The group kernels below are in groupk_amd64.s; each computes what the Go
// loop it names computes, bit for bit, on n elements, n a multiple of 8.

// groupSumsAVX2 is groupSumsGo.
//
//go:noescape
func groupSumsAVX2(z, eta *float32, n int, acc *[24]float64, mm *[2]float32)

// newtonSumsAVX2 is newtonSumsGo.
//
//go:noescape
func newtonSumsAVX2(z, eta *float32, n int, rho, lam float64, acc *[16]float64)

// scaleFirstOrderAVX2 is scaleFirstOrderGo.
//
//go:noescape
func scaleFirstOrderAVX2(dst, z, eta *float32, n int, c float32)

// scaleRhoAVX2 is scaleRhoGo.
//
//go:noescape
func scaleRhoAVX2(dst, z, eta *float32, n int, rho, lam float64)

// groupSums32AVX2 is groupSums32Go.
//
//go:noescape
func groupSums32AVX2(z, eta *float32, n int, acc *[32]float32, mm *[2]float32)

// accumSums32AVX2 is accumSums32Go.
//
//go:noescape
func accumSums32AVX2(z, eta, a2, ae, lo, hi *float32, n int)

// scaleFirstOrderVecAVX2 is scaleFirstOrderVecGo.
//
//go:noescape
func scaleFirstOrderVecAVX2(dst, z, eta, c *float32, n int)
