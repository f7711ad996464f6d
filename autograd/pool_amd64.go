//go:build !purego

package autograd

// maxPool2AVX2 computes n windows of a 2×2, stride-2 max pool (n a
// positive multiple of 8) as maxPool2's Go loop does, bit for bit:
// every eight windows take their top rows from src[0:8] (four windows)
// and src[half:half+8] (four more) and their bottom rows w elements
// further, and store their maxima contiguously in dst; then src moves on
// by adv elements. If arg is not nil it receives each maximum's index in
// the plane, as float32 bits, where src[0] has index start.
//
//go:noescape
func maxPool2AVX2(src, dst, arg *float32, n, w, half, adv, start int)

// maxPool2GradAVX2 is maxPool2Grad's Go loop for the n windows that
// maxPool2AVX2 takes with the same n, w, half, adv and start, gx in place
// of src: it adds gy[o] at the index arg[o] of window o's maximum (or, if
// store, writes the windows' elements as if gx were zeroed first).
//
//go:noescape
func maxPool2GradAVX2(gx, gy, arg *float32, n, w, half, adv, start int, store bool)
