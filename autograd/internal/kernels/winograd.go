package kernels

// Winograd's F(2×2, 3×3) filter transform, shared by the Winograd
// convolutions of packages conv (NCHW) and nchwc (channel-blocked).

// WinogradFilter writes the transform U = G·f·Gᵀ (4×4) of the 3×3 filter f
// held in src, rotated by 180° if swap, to dst[ξ·pitch] for ξ = 4i+j. It
// computes in float64; every product is rounded explicitly (float64(…)),
// so that the compiler cannot fuse it with the following addition, and
// package conv's AVX2 kernel (winoFilterAVX2) performs the same
// operations in the same order.
func WinogradFilter(dst []float32, pitch int, src []float32, swap bool) {
	var f [9]float64
	if swap {
		for i := range f {
			f[i] = float64(src[8-i])
		}
	} else {
		for i := range f {
			f[i] = float64(src[i])
		}
	}
	// g = G·f (4×3), then U = g·Gᵀ (4×4), with G's rows (1, 0, 0),
	// ½(1, 1, 1), ½(1, −1, 1) and (0, 0, 1).
	var g [12]float64
	for j := range 3 {
		a, b, c := f[j], f[3+j], f[6+j]
		g[j], g[3+j], g[6+j], g[9+j] = a, float64(0.5*(a+b+c)), float64(0.5*(a-b+c)), c
	}
	_ = dst[15*pitch]
	for i := range 4 {
		a, b, c := g[3*i], g[3*i+1], g[3*i+2]
		dst[(4*i)*pitch] = float32(a)
		dst[(4*i+1)*pitch] = float32(0.5 * (a + b + c))
		dst[(4*i+2)*pitch] = float32(0.5 * (a - b + c))
		dst[(4*i+3)*pitch] = float32(c)
	}
}
