//go:build (!amd64 && !arm64) || purego

package kernels

// haveAsm is false where the assembly kernels are not built.
const haveAsm = false

const asmSums = false

const asmReLUMask = false

func noKernels() { panic("vec: no assembly kernels") }

func statsAsm(x *float32, n int, k float64) (s1, s2 float64) { noKernels(); return }

func gradSumsAsm(dy, x *float32, n int, mean float64) (sdy, sdyx float64) { noKernels(); return }

func gradSumsMaskedAsm(dy, y, x *float32, n int, mean float64) (sdy, sdyx float64) {
	noKernels()
	return
}

func affineAsm(dst, x, r *float32, n int, m, a, b float32, mode int) { noKernels() }

func affineGradAsm(dst, dy, y, x *float32, n int, m, k1, k2, k3 float32, mode int) { noKernels() }

func maskedGradAsm(dst, dy, y *float32, n int, mode int) { noKernels() }

func reluAsm(dst, x *float32, n int) { noKernels() }

func gradSumsReLUAsm(dy, x *float32, n int, mean float64, m, a, b float32) (sdy, sdyx float64) {
	noKernels()
	return
}

func affineGradReLUAsm(dst, dy, x *float32, n int, m, k1, k2, k3, a, b float32, mode int) {
	noKernels()
}
