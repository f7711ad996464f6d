//go:build !purego

package kernels

import "github.com/proxgen/proxgen/internal/impl"

func init() { impl.Register("kernels", "neon", &useAsm) }

// haveAsm: the NEON kernels of vec_arm64.s run on every arm64 CPU (ASIMD
// is part of the architecture).
const haveAsm = true

// asmSums: the float64 sums have NEON kernels too.
const asmSums = true

// asmReLUMask: GradSumsReLU and AffineGradReLU have no NEON kernels that
// recompute the ReLU mask; they run the NEON kernels that read it.
const asmReLUMask = false

// The kernels process n elements, n a positive multiple of 8; the Go
// wrappers in vec.go handle the rest. Each computes what the Go loop of
// its wrapper computes, bit for bit.

// affineAsm: mode 0 plain, 1 ReLU, 2 residual and ReLU (Epilogue).
//
//go:noescape
func affineAsm(dst, x, r *float32, n int, m, a, b float32, mode int)

// affineGradAsm: mode bit 0 masks g by y > 0, bit 1 stores instead of
// adding.
//
//go:noescape
func affineGradAsm(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int)

// maskedGradAsm: mode bit 1 stores instead of adding.
//
//go:noescape
func maskedGradAsm(dst, dy, y *float32, n int, mode int)

//go:noescape
func reluAsm(dst, x *float32, n int)

// statsNEON stores in out the 16 lane sums of Stats's Go loop: lane j of
// Σ(x−k) in out[j], of Σ(x−k)² in out[8+j].
//
//go:noescape
func statsNEON(x *float32, n int, k float64, out *[16]float64)

// gradSumsNEON stores in out the 16 lane sums of GradSums's Go loop, with
// dy masked by y > 0 when masked != 0.
//
//go:noescape
func gradSumsNEON(dy, y, x *float32, n int, mean float64, out *[16]float64, masked int)

// combine16 combines the two sets of 8 lane sums in out as the Go loops do.
func combine16(out *[16]float64) (float64, float64) {
	return combine8((*[lanes]float64)(out[:lanes])), combine8((*[lanes]float64)(out[lanes:]))
}

func statsAsm(x *float32, n int, k float64) (s1, s2 float64) {
	var out [16]float64
	statsNEON(x, n, k, &out)
	return combine16(&out)
}

func gradSumsAsm(dy, x *float32, n int, mean float64) (sdy, sdyx float64) {
	var out [16]float64
	gradSumsNEON(dy, nil, x, n, mean, &out, 0)
	return combine16(&out)
}

func gradSumsMaskedAsm(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64) {
	var out [16]float64
	gradSumsNEON(dy, y, x, n, mean, &out, 1)
	return combine16(&out)
}

func gradSumsReLUAsm(dy, x *float32, n int, mean float64, m, a, b float32) (sdy, sdyx float64) {
	panic("vec: no NEON kernel for GradSumsReLU")
}

func affineGradReLUAsm(dst, dy, x *float32, n int, m, k1, k2, k3, a, b float32, mode int) {
	panic("vec: no NEON kernel for AffineGradReLU")
}
