//go:build !amd64 || purego

package nchwc

// pmax[fb-1] is the widest strip for fb blocks.
var pmax = [2]int{16, 12}

func kernel(cb, fb, p, s int, in []float32, inOff, inBS, inRS, ncib, kh, kw int, w []float32, wOff int,
	bias []float32, res []float32, out []float32, outOff, outBS int, relu bool) {
	kernelGo(cb, fb, p, s, in, inOff, inBS, inRS, ncib, kh, kw, w, wOff, bias, res, out, outOff, outBS, relu)
}

// Fast reports whether Conv runs assembly kernels: never in this build,
// where it computes with a Go loop many times slower than the engine's
// other convolutions.
func Fast() bool { return false }
