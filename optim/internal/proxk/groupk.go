package proxk

import "math"

// The group maps' passes over a group's coordinates. Each has a Go loop
// and, on amd64, an AVX2 kernel (groupk_amd64.s) that computes the same
// float64 operations in the same order, bit for bit; the conversions to
// float64 around products keep the Go compiler from fusing them into
// multiply-adds, which the kernels do not use.

// GroupSums returns ‖z‖₂², Σ z_i²·eta_i, Σ z_i²·eta_i² and the smallest and
// largest eta, in float64. eta must be positive (NaN would be ignored).
// The sums run in eight lanes, element i in lane i mod 8, added up in a
// fixed order at the end.
func GroupSums(z, eta []float32) (z2, ze, ze2, emin, emax float64) {
	eta = eta[:len(z)]
	var acc [24]float64
	mm := [2]float32{math.MaxFloat32, 0}
	n8 := len(z) &^ 7
	if n8 > 0 {
		if HaveAVX2 {
			groupSumsAVX2(&z[0], &eta[0], n8, &acc, &mm)
		} else {
			groupSumsGo(z[:n8], eta[:n8], &acc, &mm)
		}
	}
	if n8 < len(z) {
		var zt, et [8]float32
		tailBlock(zt[:], et[:], z, eta, n8)
		groupSumsGo(zt[:], et[:], &acc, &mm)
	}
	return lanes8(acc[0:8]), lanes8(acc[8:16]), lanes8(acc[16:24]), float64(mm[0]), float64(mm[1])
}

// tailBlock fills the block zt, et with the elements of z and eta from n0
// on: z padded with zeros, which add nothing to the sums, and eta with its
// last element, which changes neither bound.
func tailBlock(zt, et, z, eta []float32, n0 int) {
	clear(zt)
	copy(zt, z[n0:])
	copy(et, eta[n0:])
	for i := len(z) - n0; i < len(et); i++ {
		et[i] = eta[len(z)-1]
	}
}

// groupSumsGo adds z_i², z_i²·eta_i and z_i²·eta_i² to acc[k·8 + i mod 8]
// (k = 0, 1, 2) and lowers mm[0] / raises mm[1] to the range of eta, for
// len(z) a multiple of 8: the loop of groupSumsAVX2.
func groupSumsGo(z, eta []float32, acc *[24]float64, mm *[2]float32) {
	eta = eta[:len(z)]
	lo, hi := mm[0], mm[1]
	for i := 0; i+8 <= len(z); i += 8 {
		for j := range 8 {
			a, e := float64(z[i+j]), eta[i+j]
			a *= a
			b := float64(a * float64(e))
			acc[j] += a
			acc[8+j] += b
			acc[16+j] += float64(b * float64(e))
			lo = min(lo, e)
			hi = max(hi, e)
		}
	}
	mm[0], mm[1] = lo, hi
}

// NewtonSums returns Σ u_i² and Σ u_i²/(ρ + λη_i) with u_i = z_i/(ρ + λη_i),
// in float64: f(ρ) + 1 and −f′(ρ)/2 for the group-lasso equation. The
// sums run in eight lanes as in GroupSums.
func NewtonSums(z, eta []float32, rho, lam float64) (v, s float64) {
	eta = eta[:len(z)]
	var acc [16]float64
	n8 := len(z) &^ 7
	if n8 > 0 {
		if HaveAVX2 {
			newtonSumsAVX2(&z[0], &eta[0], n8, rho, lam, &acc)
		} else {
			newtonSumsGo(z[:n8], eta[:n8], rho, lam, &acc)
		}
	}
	if n8 < len(z) {
		// Zeros in z add nothing; η = 1 keeps the quotients finite.
		zt, et := [8]float32{}, [8]float32{1, 1, 1, 1, 1, 1, 1, 1}
		copy(zt[:], z[n8:])
		copy(et[:], eta[n8:])
		newtonSumsGo(zt[:], et[:], rho, lam, &acc)
	}
	return lanes8(acc[0:8]), lanes8(acc[8:16])
}

// lanes8 adds up the eight lane sums a[0:8] of GroupSums and NewtonSums
// in a fixed pairwise order.
func lanes8(a []float64) float64 {
	a = a[:8]
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

// newtonSumsGo adds u_i² to acc[i mod 8] and u_i²/(ρ + λη_i) to
// acc[8 + i mod 8], for len(z) a multiple of 8: the loop of newtonSumsAVX2.
func newtonSumsGo(z, eta []float32, rho, lam float64, acc *[16]float64) {
	eta = eta[:len(z)]
	for i := 0; i+8 <= len(z); i += 8 {
		for j := range 8 {
			inv := 1 / (rho + float64(lam*float64(eta[i+j])))
			u := float64(z[i+j]) * inv
			u2 := float64(u * u) // rounded, as the kernel does: no fused multiply-add
			acc[j] += u2
			acc[8+j] += float64(u2 * inv)
		}
	}
}

// GroupSums32 returns ‖z‖₂² and Σ z_i²·eta_i summed in float32, the
// smallest and largest eta, and a bound tol on the relative error of the
// two sums; ok is false when the sums left [1e-25, 1e30], where float32
// rounding, underflow or overflow could spoil them. The sums run in 16
// lanes, element i in lane i mod 16, added up in a fixed order at the end.
// The group maps decide most groups from these cheaper sums and fall back
// to GroupSums near their thresholds.
func GroupSums32(z, eta []float32) (z2, ze, emin, emax, tol float64, ok bool) {
	eta = eta[:len(z)]
	var acc [32]float32
	mm := [2]float32{math.MaxFloat32, 0}
	n16 := len(z) &^ 15
	if n16 > 0 {
		if HaveAVX2 {
			groupSums32AVX2(&z[0], &eta[0], n16, &acc, &mm)
		} else {
			groupSums32Go(z[:n16], eta[:n16], &acc, &mm)
		}
	}
	if n16 < len(z) {
		var zt, et [16]float32
		tailBlock(zt[:], et[:], z, eta, n16)
		groupSums32Go(zt[:], et[:], &acc, &mm)
	}
	// Lane sums of float64 values: exact enough, in a fixed order.
	for j := range 16 {
		z2 += float64(acc[j])
		ze += float64(acc[16+j])
	}
	// Each lane adds at most len(z)/16 + 1 rounded terms of one sign,
	// each product rounds once more: relative error below
	// (len(z)/16 + 3)·2⁻²⁴ with room to spare.
	tol = float64(len(z)/16+4) * 0x1p-23
	return z2, ze, float64(mm[0]), float64(mm[1]), tol, Sums32InRange(z2, ze)
}

// Sums32InRange reports whether float32 sums z2 and ze lie in
// [1e-25, 1e30], where their error bound holds: outside it float32
// rounding, underflow or overflow could spoil them.
func Sums32InRange(z2, ze float64) bool {
	return z2 >= 1e-25 && z2 <= 1e30 && ze >= 1e-25 && ze <= 1e30
}

// groupSums32Go adds z_i² to acc[i mod 16] and z_i²·eta_i to
// acc[16 + i mod 16] in float32 and lowers mm[0] / raises mm[1] to the range
// of eta, for len(z) a multiple of 16: the loop of groupSums32AVX2.
func groupSums32Go(z, eta []float32, acc *[32]float32, mm *[2]float32) {
	eta = eta[:len(z)]
	lo, hi := mm[0], mm[1]
	for i := 0; i+16 <= len(z); i += 16 {
		for j := range 16 {
			v, e := z[i+j], eta[i+j]
			a := float32(v * v)
			acc[j] += a
			acc[16+j] += float32(a * e)
			lo = min(lo, e)
			hi = max(hi, e)
		}
	}
	mm[0], mm[1] = lo, hi
}

// ScaleFirstOrder sets dst_i = z_i − z_i·t_i with t_i = e_i(1 − e_i) and
// e_i = c·eta_i, in float32: z_i/(1 + e_i) to second order in e_i. For
// e_i ≤ 2⁻¹² the float32 rounding of t_i moves z_i·t_i by less than
// 2⁻³⁴·|z_i|, so the result is within about half an ulp of z_i/(1 + e_i).
func ScaleFirstOrder(dst, z, eta []float32, c float32) {
	z, eta = z[:len(dst)], eta[:len(dst)]
	n8 := 0
	if HaveAVX2 {
		n8 = len(dst) &^ 7
		if n8 > 0 {
			scaleFirstOrderAVX2(&dst[0], &z[0], &eta[0], n8, c)
		}
	}
	scaleFirstOrderGo(dst[n8:], z[n8:], eta[n8:], c)
}

// scaleFirstOrderGo is the loop of ScaleFirstOrder.
func scaleFirstOrderGo(dst, z, eta []float32, c float32) {
	z, eta = z[:len(dst)], eta[:len(dst)]
	for i, v := range z {
		dst[i] = firstOrder(v, c*eta[i])
	}
}

// firstOrder returns z − z·t with t = e(1 − e) in float32: the element of
// ScaleFirstOrder and ScaleFirstOrderVec.
func firstOrder(z, e float32) float32 {
	t := e * (1 - e)
	return z - float32(z*t)
}

// ScaleRho sets dst_i = z_i·(ρ/(ρ + λ·eta_i)) in float64.
func ScaleRho(dst, z, eta []float32, rho, lam float64) {
	z, eta = z[:len(dst)], eta[:len(dst)]
	n8 := 0
	if HaveAVX2 {
		n8 = len(dst) &^ 7
		if n8 > 0 {
			scaleRhoAVX2(&dst[0], &z[0], &eta[0], n8, rho, lam)
		}
	}
	scaleRhoGo(dst[n8:], z[n8:], eta[n8:], rho, lam)
}

// scaleRhoGo is the loop of ScaleRho.
func scaleRhoGo(dst, z, eta []float32, rho, lam float64) {
	z, eta = z[:len(dst)], eta[:len(dst)]
	for i, v := range z {
		dst[i] = float32(float64(v) * (rho / (rho + float64(lam*float64(eta[i])))))
	}
}

// AccumSums32 adds z_i² to a2[i] and z_i²·eta_i to ae[i] in float32 and
// lowers lo[i] / raises hi[i] to eta_i, element by element: the per-position
// sums of stridedPass.run, one row of groups at a time.
func AccumSums32(z, eta, a2, ae, lo, hi []float32) {
	n := len(z)
	eta, a2, ae, lo, hi = eta[:n], a2[:n], ae[:n], lo[:n], hi[:n]
	n8 := 0
	if HaveAVX2 {
		n8 = n &^ 7
		if n8 > 0 {
			accumSums32AVX2(&z[0], &eta[0], &a2[0], &ae[0], &lo[0], &hi[0], n8)
		}
	}
	accumSums32Go(z[n8:], eta[n8:], a2[n8:], ae[n8:], lo[n8:], hi[n8:])
}

// accumSums32Go is the loop of AccumSums32.
func accumSums32Go(z, eta, a2, ae, lo, hi []float32) {
	n := len(z)
	eta, a2, ae, lo, hi = eta[:n], a2[:n], ae[:n], lo[:n], hi[:n]
	for i, v := range z {
		e := eta[i]
		a := float32(v * v)
		a2[i] += a
		ae[i] += float32(a * e)
		lo[i] = min(lo[i], e)
		hi[i] = max(hi[i], e)
	}
}

// ScaleFirstOrderVec is ScaleFirstOrder with a factor per element: dst_i =
// z_i − z_i·t_i with t_i = e_i(1 − e_i) and e_i = c_i·eta_i.
func ScaleFirstOrderVec(dst, z, eta, c []float32) {
	n := len(dst)
	z, eta, c = z[:n], eta[:n], c[:n]
	n8 := 0
	if HaveAVX2 {
		n8 = n &^ 7
		if n8 > 0 {
			scaleFirstOrderVecAVX2(&dst[0], &z[0], &eta[0], &c[0], n8)
		}
	}
	scaleFirstOrderVecGo(dst[n8:], z[n8:], eta[n8:], c[n8:])
}

// scaleFirstOrderVecGo is the loop of ScaleFirstOrderVec.
func scaleFirstOrderVecGo(dst, z, eta, c []float32) {
	n := len(dst)
	z, eta, c = z[:n], eta[:n], c[:n]
	for i, v := range z {
		dst[i] = firstOrder(v, c[i]*eta[i])
	}
}

// Norm2 returns ‖x‖₂ in float64 without overflow.
func Norm2(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	if m == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		y := float64(v) / m
		s += y * y
	}
	return m * math.Sqrt(s)
}
