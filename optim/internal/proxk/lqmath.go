package proxk

import (
	"math"
	"math/bits"
)

// Scalar proximal maps. Every function below returns
//
//	argmin_x (x − a)² + κ·r(x),   κ = 2·eta·lambda,
//
// which is the same problem as (x − a)²/(2·eta) + lambda·r(x). All
// arithmetic is in float64 on quantities normalised by |a|, so no
// intermediate overflows or underflows to a NaN for any finite input.
//
// For ℓq with 0 < q < 1 write t = |a| and x = t·(1 − w). A non-zero
// minimiser satisfies the stationarity condition 2(x − t) + κ q x^(q−1) = 0,
// that is
//
//	w·(1 − w)^(1−q) = c,   c = κ q / (2 t^(2−q)),            (*)
//
// whose relevant root lies in (0, 1/(2−q)]. The minimiser is that root when
// its objective beats x = 0 and 0 otherwise.

// ProxL1Slice is soft thresholding in float32: |z| − λ·η rounded twice,
// then max(·, 0) with the sign of z. (An overflowing λ·η gives 0, as it
// should.)
func ProxL1Slice(dst, z, eta []float32, lambda float32) {
	n8 := 0
	if HaveAVX2 && len(dst) >= 8 {
		n8 = len(dst) &^ 7
		proxL1AVX2(&dst[0], &z[0], &eta[0], n8, lambda)
	}
	z = z[:len(dst)]
	eta = eta[:len(dst)]
	for i := n8; i < len(dst); i++ {
		zi := z[i]
		t := math.Float32frombits(math.Float32bits(zi) &^ (1 << 31))
		a := max(t-float32(lambda*eta[i]), 0) // float32(): no fused multiply-add
		dst[i] = math.Float32frombits(math.Float32bits(a) | math.Float32bits(zi)&(1<<31))
	}
}

// ProxL0Slice is hard thresholding: keep z iff z² > κ = 2λη. Where
// 1e-18 < |z| < 1e18 and 1e-35 < κ < 1e35 the test runs in float32 (no
// overflow or underflow possible); elsewhere in float64.
func ProxL0Slice(dst, z, eta []float32, lam2 float64) {
	l2 := float32(lam2)
	fast := lam2 > 1e-35 && lam2 < 1e35
	slow := func(i int) {
		v := float64(z[i])
		if v*v > lam2*float64(eta[i]) {
			dst[i] = z[i]
		} else {
			dst[i] = 0
		}
	}
	start := 0
	if fast && HaveAVX2 {
		kernel := func(d, z, e *float32, n int, l2 float32, sc *Scratch) int {
			return proxL0AVX2(d, z, e, n, l2, &sc.Mask[0])
		}
		start = runMasked(dst, z, eta, l2, kernel, slow)
	}
	z = z[:len(dst)]
	eta = eta[:len(dst)]
	for i := start; i < len(dst); i++ {
		zi := z[i]
		t := math.Float32frombits(math.Float32bits(zi) &^ (1 << 31))
		k := l2 * eta[i]
		if fast && t > 1e-18 && t < 1e18 && k > 1e-35 && k < 1e35 {
			if zi*zi > k {
				dst[i] = zi
			} else {
				dst[i] = 0
			}
			continue
		}
		slow(i)
	}
}

// runMasked runs an AVX2 kernel over the whole multiples of 8 of dst in
// blocks of ChunkSize and finishes the lanes it reports in its mask with
// slow (which must read z[i] and eta[i], still unchanged there even when
// dst aliases z). The kernel gets a pooled Scratch whose mask it fills and
// returns the OR of the mask bytes. runMasked returns the index where the
// scalar tail starts.
func runMasked(dst, z, eta []float32, l2 float32, kernel func(dst, z, eta *float32, n int, l2 float32, sc *Scratch) int, slow func(i int)) int {
	n8 := len(dst) &^ 7
	if n8 == 0 {
		return 0
	}
	if len(z) < n8 || len(eta) < n8 {
		panic("optim: prox slices of unequal length")
	}
	sc := ScratchPool.Get().(*Scratch)
	for lo := 0; lo < n8; lo += ChunkSize {
		hi := min(lo+ChunkSize, n8)
		if kernel(&dst[lo], &z[lo], &eta[lo], hi-lo, l2, sc) != 0 {
			ForMasked(sc.Mask[:(hi-lo)/8], lo, slow)
		}
	}
	ScratchPool.Put(sc)
	return n8
}

// ForMasked calls f(base + 8b + j) for every bit j set in mask[b].
func ForMasked(mask []uint8, base int, f func(i int)) {
	for b, m := range mask {
		for m != 0 {
			j := bits.TrailingZeros8(m)
			m &^= 1 << j
			f(base + 8*b + j)
		}
	}
}

// ℓ1/2. With q = 1/2, (*) squared reads w²(1 − w) = c₂ = κ²/(16 t³). The
// paper's threshold |a| <= (54^(1/3)/4) κ^(2/3) is c₂ >= 2/27, where the
// root is w = 1/3. The paper's closed form
//
//	x = (2/3) t (1 + cos(2π/3 − (2/3) arccos((κ/8)(t/3)^(−3/2))))
//
// is an analytic function of s = sqrt(c₂) on [0, sqrt(2/27)] (its nearest
// singularity is the branch point s = sqrt(4/27), where w = 2/3). The
// float64 map evaluates w(s) = s·g(s) with a degree-11 Chebyshev
// interpolant of g (built once at start-up from the exact root; its error
// is below 5e-9, far under float32 resolution) or, for the common case of
// small s, its Taylor series. The float32 fast paths write
// w = s·(1 + s·h(s)) with a rational minimax fit h = P/Q of degree 3/3
// (L12Rat), which near a square-root branch point needs far fewer
// operations than a polynomial (a degree-10 one before). Either costs one
// sqrt, one division and a short evaluation instead of arccos, cos and two
// fractional powers.

const (
	L12SMax  = 0.27216552697590868 // sqrt(2/27)
	l12Nodes = 12                  // interpolation nodes (degree 11)
)

// l12Poly holds the monomial coefficients of g in y = 2s/L12SMax − 1.
var l12Poly = func() (c [l12Nodes]float64) {
	// Chebyshev interpolation of g(s) = w(s)/s at Chebyshev nodes.
	const n = l12Nodes
	var f [n]float64
	for k := 0; k < n; k++ {
		y := math.Cos(math.Pi * (float64(k) + 0.5) / n)
		s := (y + 1) / 2 * L12SMax
		f[k] = solveW(0.5, math.Log(s)) / s
	}
	var a [n]float64 // Chebyshev coefficients
	for j := 0; j < n; j++ {
		var sum float64
		for k := 0; k < n; k++ {
			sum += f[k] * math.Cos(math.Pi*float64(j)*(float64(k)+0.5)/n)
		}
		a[j] = 2 * sum / n
	}
	a[0] /= 2
	// Convert Σ a_j T_j(y) to monomials with T_{j+1} = 2y T_j − T_{j−1}.
	var tPrev, tCur [n]float64
	tPrev[0] = 1 // T_0
	tCur[1] = 1  // T_1
	c[0] += a[0]
	for i := range tCur {
		c[i] += a[1] * tCur[i]
	}
	for j := 2; j < n; j++ {
		var tNext [n]float64
		for i := 0; i < n-1; i++ {
			tNext[i+1] += 2 * tCur[i]
		}
		for i := range tNext {
			tNext[i] -= tPrev[i]
		}
		for i := range tNext {
			c[i] += a[j] * tNext[i]
		}
		tPrev, tCur = tCur, tNext
	}
	return c
}()

// L12Small is where proxL12 switches from the series of w(s) to the
// interpolant: the series w = s(1 + s/2 + 5s²/8 + s³ + 231s⁴/128) is within
// 3e-9 of the root for s < 0.03, the interpolant within 5e-9 everywhere.
const L12Small = 0.03

// l12W returns w(s) for 0 <= s <= sqrt(2/27), accurate to 5e-9 (well below
// float32 resolution of x = t(1 − w)).
func l12W(s float64) float64 {
	if s < L12Small {
		return s * (1 + s*(0.5+s*(0.625+s*(1+s*(231.0/128)))))
	}
	c := &l12Poly
	y := s*(2/L12SMax) - 1
	y2 := y * y
	y4 := y2 * y2
	q0 := (c[0] + c[1]*y) + (c[2]+c[3]*y)*y2
	q1 := (c[4] + c[5]*y) + (c[6]+c[7]*y)*y2
	q2 := (c[8] + c[9]*y) + (c[10]+c[11]*y)*y2
	return s * (q0 + (q1+q2*y4)*y4)
}

// l12FastEnd is past the threshold sqrt(2/27): L12Rat fits h up to here.
const l12FastEnd = 0.2725

// l12Cut is where the float32 fast paths return 0: clearly past the
// threshold sqrt(2/27), so float32 rounding of s cannot flip a decision
// that is not a near-tie.
const l12Cut = float32(L12SMax * (1 + 1e-6))

//go:generate go run gen_l12rat.go

// l12S returns s = k/((4t)·sqrt(t)) for t = |z| and k = l2·eta, and false
// where the element needs the float64 path: unless 1e-12 < t < 1e12 and
// 1e-30 < k < 1e30, where s can neither overflow nor lose precision.
func l12S(t, k float32) (float32, bool) {
	if t > 1e-12 && t < 1e12 && k > 1e-30 && k < 1e30 {
		return k / float32(float32(4*t)*float32(math.Sqrt(float64(t)))), true
	}
	return 0, false
}

// l12X returns the float32 fast-path ℓ1/2 prox of z from its s: 0 above
// the threshold, else z − z·w with w = s·(1 + s·P(s)/Q(s)) (the sign of z
// times t − t·w, t = |z|: rounding is symmetric), within 2.4e-7 of the
// float64 map (TestL12FastAccuracy). P and Q go
// by Estrin's scheme, P = (p0 + p1·s) + s²·(p2 + p3·s); every product is
// converted to float32 explicitly so the compiler cannot fuse it into a
// multiply-add: the AVX2 kernel performs the same roundings in the same
// order.
func l12X(z, s float32) float32 {
	if s > l12Cut {
		return 0
	}
	c := &L12Rat
	s2 := float32(s * s)
	p := (c[0] + float32(c[1]*s)) + float32(s2*(c[2]+float32(c[3]*s)))
	q := (1 + float32(c[4]*s)) + float32(s2*(c[5]+float32(c[6]*s)))
	w := float32(s * (1 + float32(s*(p/q))))
	return z - float32(z*w)
}

// proxL12 is the ℓ1/2 map for float32 input.
func proxL12(a float32, kappa float64) float32 {
	return float32(ProxL12F64(float64(a), kappa))
}

func ProxL12F64(a, kappa float64) float64 {
	t := math.Abs(a)
	t3 := t * t * t
	k2 := kappa * kappa
	if 27*k2 >= 32*t3 { // c₂ >= 2/27 (or a = 0): zero, tie at equality
		return 0
	}
	s := math.Sqrt(k2 / (16 * t3))
	return math.Copysign(t*(1-l12W(s)), a)
}

// ProxL12Slice is the slice form of proxL12: the float32 fast path
// l12X(z, l12S(|z|, l2·eta)) where l12S allows it (l2 = float32(lam2) with
// 1e-30 < lam2 < 1e30), the float64 map elsewhere. On amd64 with AVX2
// assembly kernels compute the float32 lanes with the same operations in
// the same order, so results do not depend on the CPU.
func ProxL12Slice(dst, z, eta []float32, lam2 float64) {
	start := 0
	if HaveAVX2 && lam2 > 1e-30 && lam2 < 1e30 {
		kernel := func(d, z, e *float32, n int, l2 float32, sc *Scratch) int {
			l12SAVX2(&sc.S[0], z, e, n, l2)
			return L12XAVX2(d, z, &sc.S[0], n, &sc.Mask[0], &L12Rat)
		}
		start = runMasked(dst, z, eta, float32(lam2), kernel, func(i int) {
			dst[i] = float32(ProxL12F64(float64(z[i]), lam2*float64(eta[i])))
		})
	}
	ProxL12Loop(dst[start:], z[start:], eta[start:], lam2)
}

// ProxL12Loop is the Go loop of ProxL12Slice.
func ProxL12Loop(dst, z, eta []float32, lam2 float64) {
	z = z[:len(dst)]
	eta = eta[:len(dst)]
	l2 := float32(lam2)
	fast := lam2 > 1e-30 && lam2 < 1e30
	for i, zi := range z {
		if fast {
			t := math.Float32frombits(math.Float32bits(zi) &^ (1 << 31))
			if s, ok := l12S(t, l2*eta[i]); ok {
				dst[i] = l12X(zi, s)
				continue
			}
		}
		dst[i] = float32(ProxL12F64(float64(zi), lam2*float64(eta[i])))
	}
}

// ProxL12Trig evaluates the paper's closed form literally with arccos and
// cos; tests use it as a reference for proxL12.
func ProxL12Trig(a, kappa float64) float64 {
	t := math.Abs(a)
	if t == 0 || kappa == 0 {
		return a
	}
	if t <= math.Cbrt(54)/4*math.Pow(kappa, 2.0/3) {
		return 0
	}
	phi := math.Acos(kappa / 8 * math.Pow(t/3, -1.5))
	return math.Copysign(2.0/3*t*(1+math.Cos(2*math.Pi/3-2.0/3*phi)), a)
}

// ℓ2/3. With q = 2/3, (*) cubed reads w³(1 − w) = c₃ = κ³/(27 t⁴); the
// paper's threshold |a| <= (2/3)(3κ³)^(1/4) is c₃ >= 1/16 (root w = 1/2).
// We evaluate the paper's closed form
//
//	x = ((|A| + sqrt(2t/|A| − |A|²))/2)³,
//	|A| = (2/√3) κ^(1/4) cosh(φ/3)^(1/2),  φ = arccosh((27 a²/16) κ^(−3/2)),
//
// in variables normalised by t, only on the non-zero branch (where the
// arccosh argument is at least 3√3/4 > 1, so it never produces the NaN of
// the reference code), and polish the result with one Newton step.

// l23Small bounds the float32 series path of ProxL23Slice: with
// s = c₃^(1/3), the series w = s(1 + s/3 + s²/3 + 35s³/81 + 154s⁴/243 + s⁵)
// is within 1.5e-9 of the root for s < 0.05.
const l23Small = 0.05

// l23SZero is c₃^(1/3) at the threshold c₃ = 1/16.
const l23SZero = 0.39685026299204984

// ProxL23Slice is the slice form of proxL23. For 1e-12 < |z| < 1e12 and
// 1e-30 < κ < 1e30 it computes r = |z|^(−1/3) in float32 (bit-level
// initial guess and three Newton steps r ← r(4 − |z|r³)/3, relative error
// 2e-7) and s = (κ/3)·r⁴ = c₃^(1/3); below l23Small it uses the series of
// w(s), above the threshold it returns 0. The rest, and everything outside
// those ranges, uses the float64 closed form.
func ProxL23Slice(dst, z, eta []float32, lam2 float64) {
	z = z[:len(dst)]
	eta = eta[:len(dst)]
	l2 := float32(lam2)
	fast := lam2 > 1e-30 && lam2 < 1e30
	for i, zi := range z {
		t32 := math.Float32frombits(math.Float32bits(zi) &^ (1 << 31))
		if fast {
			k32 := l2 * eta[i]
			if t32 > 1e-12 && t32 < 1e12 && k32 > 1e-30 && k32 < 1e30 {
				r := math.Float32frombits(0x54a23400 - math.Float32bits(t32)/3)
				r = r * (4 - t32*r*r*r) * (1.0 / 3)
				r = r * (4 - t32*r*r*r) * (1.0 / 3)
				r = r * (4 - t32*r*r*r) * (1.0 / 3)
				r2 := r * r
				s := k32 * (1.0 / 3) * r2 * r2
				if s < l23Small {
					w := s * (1 + s*(1.0/3+s*(1.0/3+s*(35.0/81+s*(154.0/243+s)))))
					x := t32 - t32*w
					dst[i] = math.Float32frombits(math.Float32bits(x) | math.Float32bits(zi)&(1<<31))
					continue
				}
				if s > l23SZero*(1+1e-6) {
					dst[i] = 0
					continue
				}
			}
		}
		dst[i] = float32(ProxL23F64(float64(zi), lam2*float64(eta[i])))
	}
}

func proxL23(a float32, kappa float64) float32 {
	return float32(ProxL23F64(float64(a), kappa))
}

func ProxL23F64(a, kappa float64) float64 {
	t := math.Abs(a)
	if t == 0 || kappa == 0 {
		return a
	}
	t2 := t * t
	t4 := t2 * t2
	k3 := kappa * kappa * kappa
	if 16*k3 >= 27*t4 { // c₃ >= 1/16: zero (tie at equality)
		return 0
	}
	c := k3 / (27 * t4)
	if c < 1e-45 {
		// w ≈ c^(1/3) < 1e-15: x = t·(1 − w) to double precision.
		return math.Copysign(t*(1-math.Cbrt(c)), a)
	}
	const sqrt27 = 5.196152422706632
	phi := math.Acosh(sqrt27 / (16 * math.Sqrt(c)))
	A := 2 / math.Sqrt(3) * math.Pow(27*c, 1.0/12) * math.Sqrt(math.Cosh(phi/3))
	r := (A + math.Sqrt(2/A-A*A)) / 2
	u := r * r * r
	if w := 1 - u; w > 1e-6 && w < 0.5 {
		// Newton on u(1−u)³ = c; its derivative (1−u)²(1−4u) is bounded
		// away from zero for 1/2 <= u < 1 − 1e-6.
		u -= (u*w*w*w - c) / (w * w * (1 - 4*u))
	}
	return math.Copysign(t*u, a)
}

// ProxLqNumeric is the ℓq map for any 0 < q < 1 (also correct for 1/2 and
// 2/3, which tests use to cross-check the closed forms).
func ProxLqNumeric(a, kappa, q float64) float64 {
	t := math.Abs(a)
	if t == 0 || kappa == 0 {
		return a
	}
	lc := math.Log(kappa*q/2) - (2-q)*math.Log(t) // log c, finite for finite positive inputs
	um := (1 - q) / (2 - q)                       // where w(1−w)^(1−q) peaks: w = 1 − um
	lhmax := (1-q)*math.Log(um) - math.Log(2-q)   // log of the peak value
	if lc >= lhmax {
		return 0 // no stationary point in x > 0
	}
	w := solveW(q, lc)
	u := 1 - w
	// Objective relative to x = 0: F(tu)/F(0) = w² + (2c/q)·u^q.
	if w*w+2*math.Exp(lc)/q*math.Pow(u, q) < 1 {
		return math.Copysign(t*u, a)
	}
	return 0
}

// solveW returns the root w in (0, 1/(2−q)] of
// φ(w) = log w + (1−q) log(1−w) − lc for lc <= log of the peak value. φ
// is increasing and concave there, so Newton steps from the left never
// overshoot; bisection keeps progress near the fold where φ' vanishes.
func solveW(q, lc float64) float64 {
	if lc < -40 {
		// w = c·(1−w)^(q−1) with w < 5e-18: w = c to double precision.
		return math.Exp(lc)
	}
	hi := 1 / (2 - q)
	lo := math.Min(math.Exp(lc), hi) // φ(e^lc) <= 0
	w := lo
	for range 200 {
		f := math.Log(w) + (1-q)*math.Log1p(-w) - lc
		if f == 0 {
			return w
		}
		if f < 0 {
			lo = w
		} else {
			hi = w
		}
		d := 1/w - (1-q)/(1-w)
		next := w - f/d
		if !(next > lo && next < hi) || d <= 0 {
			next = lo + (hi-lo)/2
		}
		if math.Abs(next-w) <= 1e-16*w || hi-lo <= 2e-16*hi {
			return next
		}
		w = next
	}
	return w
}
