//go:build !amd64 || purego

package nchwc

// stripMax returns the widest strip of pixels for fb output blocks.
func stripMax(fb int) int { return pmaxGo[fb-1] }

func kernel(cb, fb, p, s int, half bool, in []float32, inOff, inBS, inRS, ncib, ct, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	kernelGo(cb, fb, p, s, half, in, inOff, inBS, inRS, ncib, ct, kh, kw, w, wOff, bias, res, out, outOff, outBS, relu)
}

// Fast reports whether Conv runs assembly kernels: never in this build,
// where it computes with a Go loop many times slower than the engine's
// other convolutions.
func Fast() bool { return false }

func kernelSkip(fb, p, s int, half bool, in []float32, inOff, last int, ent []int32, w []float32,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	kernelSkipGo(fb, p, s, half, in, inOff, ent, w, bias, res, out, outOff, outBS, relu)
}

func products(fb, p int, half bool, in []float32, inOff, inBS, inXS, ncib, ct int, w []float32, wOff, wXS int,
	out []float32, outOff, outBS, outXS, nxi int) {
	productsGo(fb, p, half, in, inOff, inBS, inXS, ncib, ct, w, wOff, wXS, out, outOff, outBS, outXS, nxi)
}

func winoIn(src []float32, so, rs, n int, dst []float32, do, xs int) {
	winoInGo(src, so, rs, n, dst, do, xs)
}

func winoOut(src []float32, so, xs, n int, bias, res, out []float32, oo, os int, relu bool) {
	winoOutGo(src, so, xs, n, bias, res, out, oo, os, relu)
}
