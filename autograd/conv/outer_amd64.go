//go:build !purego

package conv

import (
	"unsafe"

	"github.com/proxgen/proxgen/internal/cpu"
	"github.com/proxgen/proxgen/internal/impl"
)

// haveAVX512 reports whether the AVX-512 outer-product kernel of the
// Winograd weight gradient (outer_amd64.s) runs. Registered with
// internal/impl as package "conv", "avx512".
var haveAVX512 = cpu.X86.AVX512F

func init() { impl.Register("conv", "avx512", &haveAVX512) }

//go:noescape
func outerAVX512(d *float32, n int, v, c *float32)

//go:noescape
func winoGradAVX512(src *float32, rs, n int, dst *float32, xs int)

const f32 = int(unsafe.Sizeof(float32(0)))

// outer computes what outerGo computes, with the AVX-512 kernel where it
// runs.
func outer(d []float32, n int, v, c []float32) {
	if !haveAVX512 || n == 0 {
		outerGo(d, n, v, c)
		return
	}
	// Bounds: the last values read and written.
	_ = d[16*n-1]
	_ = v[16*n-1]
	_ = c[255]
	outerAVX512(&d[0], n, &v[0], &c[0])
}

// winoGradIn computes what winoGradInGo computes, with the AVX-512 kernel
// where it runs.
func winoGradIn(src []float32, so, rs, n int, dst []float32, do, xs int) {
	if !haveAVX512 || n == 0 {
		winoGradInGo(src, so, rs, n, dst, do, xs)
		return
	}
	_ = src[so+rs+32*n-1]
	_ = dst[do+15*xs+16*n-1]
	winoGradAVX512(&src[so], rs*f32, n, &dst[do], xs*f32)
}
