package prox

import (
	"math"

	"github.com/proxgen/proxgen/optim/internal/proxk"
)

// groupHalf is r(x) = ‖x‖₂^½ over a group.
type groupHalf struct{ by GroupBy }

// GroupHalf returns the group ℓ½ regularizer: R(θ) = Σ_g ‖θ_g‖₂^½, the
// paper's non-convex ℓ½ applied to the norms of the groups. Like group ℓ0
// it zeroes whole groups; like ℓ½ it shrinks the groups it keeps by less
// the larger they are.
//
// Its Prox is the exact proximal map under the metric diag(1/η), the
// global minimiser of Σ_i (x_i − z_i)²/(2η_i) + λ‖x‖₂^½ to float32
// precision: with one η for the whole group (the identity and Euclidean
// metrics) z·ρ/‖z‖ with ρ the scalar ℓ½ map of ‖z‖, in general the
// best stationary point or 0 (0 on a tie, as the scalar maps); a
// coordinate with η_i = 0 stays at z_i.
func GroupHalf(by GroupBy) GroupRegularizer { return &groupHalf{by} }

// GroupBy implements GroupRegularizer.
func (r *groupHalf) GroupBy() GroupBy { return r.by }

// String names the regularizer as Parse accepts it.
func (r *groupHalf) String() string { return groupName("gl1/2", r.by) }

// halfZero reports whether GroupHalf's map of a group of norm zn is 0 for
// want of a crossing: k(μ) ≤ 2μ(‖z‖/(1 + μ min η))^{3/2}, whose peak (at
// μ = 2/min η) is 4/min η·(‖z‖/3)^{3/2}, is below λ.
func halfZero(zn, emin, lam float64) bool {
	return 4/emin*math.Pow(zn/3, 1.5) < lam
}

// Decide32 implements Decider: zero when halfZero holds for the largest
// norm the sums allow, the first-order scaling (Prox) when μ0·max η ≤
// 2⁻¹³ for the smallest, each with the sums' error bound.
func (r *groupHalf) Decide32(z2, ze, emin, emax, tol float64, lambda float32) (act int, c float32) {
	lam := float64(lambda)
	if halfZero(math.Sqrt(z2*(1+tol)), emin, lam) {
		return proxk.DecideZero, 0
	}
	if tol > 0x1p-13 {
		return proxk.DecideUndecided, 0
	}
	mu0 := func(z2 float64) float64 { zn := math.Sqrt(z2); return lam / (2 * zn * math.Sqrt(zn)) }
	if mu0(z2*(1-tol))*emax <= 0x1p-13 {
		m := mu0(z2)
		return proxk.DecideScale, float32(m * (1 + 1.5*m*ze/z2))
	}
	return proxk.DecideUndecided, 0
}

// Penalty implements Regularizer for one group: ‖θ‖₂^½.
func (r *groupHalf) Penalty(theta []float32) float64 {
	return math.Sqrt(proxk.Norm2(theta))
}

// Prox implements Regularizer for one group.
func (r *groupHalf) Prox(dst, z, eta []float32, lambda float32) {
	checkProxArgs("GroupHalf", dst, z, eta, lambda)
	if lambda == 0 {
		copy(dst, z)
		return
	}
	if decided(r, dst, z, eta, lambda) {
		return
	}
	z2, ze, _, emin, emax := proxk.GroupSums(z, eta)
	if z2 == 0 {
		clear(dst)
		return
	}
	lam, zn := float64(lambda), math.Sqrt(z2)
	// Most groups of a training step are far from zero: the root μ of
	// k(μ) = λ is near μ0 = λ/(2‖z‖^{3/2}), and when μ0·max η ≤ 2⁻¹² it
	// is μ0(1 + (3/2)μ0·Σz_i²η_i/‖z‖²) to a relative O(2⁻²⁴) (expanding
	// ‖x(μ)‖^{−3/2} to first order), so x_i = z_i/(1 + μη_i) to float32
	// precision by the first-order scaling. It is the minimiser: its F is
	// at most λ‖z‖^½ + μ²Σz_i²η_i/2 ≤ 2⁻¹⁰‖z‖²/max η, while any other
	// crossing μ' lies beyond 2/max η ≥ 2¹³μ0, where k(μ') = λ needs
	// ‖x(μ')‖ = ‖z‖(μ0/μ')^{2/3} ≤ 2⁻⁸‖z‖ and so F ≥ ‖x − z‖²/(2 max η)
	// ≥ 0.49‖z‖²/max η, and F(0) ≥ ‖z‖²/(2 max η).
	if mu0 := lam / (2 * zn * math.Sqrt(zn)); mu0*emax <= 0x1p-12 {
		proxk.ScaleFirstOrder(dst, z, eta, float32(mu0*(1+1.5*mu0*ze/z2)))
		return
	}
	if halfZero(zn, emin, lam) {
		clear(dst)
		return
	}
	if emin == emax {
		// Radial: the scalar ℓ½ map of the norm.
		c := proxk.ProxL12F64(zn, 2*lam*emin) / zn
		for i, v := range z {
			dst[i] = float32(c * float64(v))
		}
		return
	}
	mu, keep := halfCurve{z: z, eta: eta, lam: lam}.minimiser(zn, emin, emax)
	if !keep {
		clear(dst)
		return
	}
	for i, v := range z {
		dst[i] = float32(float64(v) / (1 + mu*float64(eta[i])))
	}
}

// GroupHalf's map in general (η not constant over the group): a non-zero
// minimiser satisfies (x_i − z_i)/η_i + λx_i/(2‖x‖^{3/2}) = 0, so it lies
// on the curve x_i(μ) = z_i/(1 + μη_i), μ > 0, at a μ with k(μ) =
// 2μ‖x(μ)‖^{3/2} = λ. Along the curve dF/dμ has the sign of k − λ, so the
// candidates are x = 0 and the points where k crosses λ upwards. In
// ν = log μ, log k has slope 1 − (3/2)·Σ_i w_i·μη_i/(1 + μη_i) (w the
// weights x_i²/‖x‖²), between −½ and 1: it rises for μ < 2/max η and
// falls for μ > 2/min η, and in between, where a group whose η spread is
// wide can rise and fall more than once, a subdivision with those slope
// bounds finds every upward crossing (to 2⁻⁴⁰ in ν); each is refined by a
// safeguarded Newton iteration, and the candidate with the least F wins.

// halfCurve evaluates the curve x(μ) = z/(1 + μη) of GroupHalf's map.
type halfCurve struct {
	z, eta []float32
	lam    float64
}

// point is the curve at ν = log μ: φ = log(k(μ)/λ), its derivative in ν,
// and q = Σ(x_i − z_i)²/(2η_i) and r2 = ‖x‖², from which F(x) = q + λ·r2^¼.
type point struct{ phi, dphi, q, r2 float64 }

// at evaluates the curve at ν.
func (h halfCurve) at(nu float64) point {
	mu := math.Exp(nu)
	var r2, ws, q float64
	for i, v := range h.z {
		e := float64(h.eta[i])
		t := mu * e
		zi := float64(v)
		x := zi / (1 + t)
		x2 := x * x
		r2 += x2
		ws += x2 * t / (1 + t)
		if e > 0 {
			q += x2 * t * t / (2 * e) // x − z = −x·t
		}
	}
	return point{math.Ln2 + nu + 0.75*math.Log(r2) - math.Log(h.lam), 1 - 1.5*ws/r2, q, r2}
}

// minimiser returns the μ of the minimiser of F on the curve and true, or
// false when x = 0 is the minimiser. zn is ‖z‖ > 0, emin < emax the
// group's least and largest step sizes. A coordinate with η_i = 0 stays
// at z_i (x = 0 is then no candidate unless each such z_i is 0).
func (h halfCurve) minimiser(zn, emin, emax float64) (mu float64, keep bool) {
	var f0, zf2 float64 // F(0) over the coordinates with η_i > 0; ‖z‖² over the others
	epos := emax
	for i, v := range h.z {
		zi, e := float64(v), float64(h.eta[i])
		if e > 0 {
			f0 += zi * zi / (2 * e)
			epos = min(epos, e)
		} else {
			zf2 += zi * zi
		}
	}
	lz, ll := math.Log(zn), math.Log(h.lam)
	// The bound of halfZero, k ≤ 2μ‖z‖^{3/2} and ≤ 2‖z‖^{3/2}/(μ^½ min η^{3/2}),
	// puts every crossing in [lo, hi]; φ rises below rise and falls above
	// fall. Coordinates with η_i = 0 and z_i = 0 stay 0 and change
	// nothing; with z_i ≠ 0 they keep k ≥ 2μ‖z_f‖^{3/2}, above λ beyond
	// hi = log(λ/(2‖z_f‖^{3/2})), and k need not fall.
	emin = epos
	lo := ll - math.Ln2 - 1.5*lz
	hi := 2 * (math.Ln2 - ll + 1.5*(lz-math.Log(emin)))
	rise, fall := math.Log(2/emax), math.Log(2/emin)
	// best is the least F − F(0) found: 0 for x = 0, which wins ties.
	best := 0.0
	slow := emin // the least η_i whose s_i weighs in the slope bounds
	if zf2 > 0 {
		hi, fall, slow = ll-math.Ln2-0.75*math.Log(zf2), math.Inf(1), 0
		best = math.Inf(1)
	}
	consider := func(nu float64) {
		p := h.at(nu)
		if f := p.q + h.lam*math.Sqrt(math.Sqrt(p.r2)) - f0; f < best {
			best, mu, keep = f, math.Exp(nu), true
		}
	}
	// The rising part [lo, min(rise, hi)]: one upward crossing at most,
	// usually the minimiser, near μ = λ/(2‖z‖^{3/2}) when λη ≪ ‖z‖^{3/2}.
	if a, b := lo, min(rise, hi); a < b {
		if pb := h.at(b); pb.phi >= 0 {
			consider(h.root(a, b, a))
		}
	}
	// The middle [max(lo, rise), min(hi, fall)]: subdivided until each
	// piece is monotone, cannot hold an upward crossing, or cannot hold
	// an F below the best: on [a, b], F ≥ q(a) + λ·r2(b)^¼ (q grows with
	// μ and ‖x‖ shrinks).
	a, b := max(lo, rise), min(hi, fall)
	if a >= b {
		return mu, keep
	}
	type piece struct {
		a, b   float64
		pa, pb point
	}
	stack := []piece{{a, b, h.at(a), h.at(b)}}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p.pa.q+h.lam*math.Sqrt(math.Sqrt(p.pb.r2))-f0 >= best {
			continue
		}
		// Slope bounds on the piece: the weights w average s_i =
		// μη_i/(1 + μη_i), which lie in [s(a, slow), s(b, max η)].
		dmin := 1 - 1.5*sat(p.b, emax)
		dmax := 1 - 1.5*sat(p.a, slow)
		if dmax <= 0 {
			continue // falling: no upward crossing
		}
		if dmin > 0 { // rising: one crossing at most
			if p.pa.phi < 0 && p.pb.phi >= 0 {
				consider(h.root(p.a, p.b, p.a+(p.b-p.a)/2))
			}
			continue
		}
		// An upward crossing needs φ ≥ 0 somewhere and φ < 0 somewhere.
		w := p.b - p.a
		if upperMeet(p.pa.phi, p.pb.phi, dmax, dmin, w) < 0 || lowerMeet(p.pa.phi, p.pb.phi, dmin, dmax, w) > 0 {
			continue
		}
		if w <= 0x1p-40*max(1, math.Abs(p.a)) {
			if p.pa.phi < 0 && p.pb.phi >= 0 {
				consider(h.root(p.a, p.b, p.a+w/2))
			}
			continue
		}
		m := p.a + w/2
		pm := h.at(m)
		stack = append(stack, piece{m, p.b, pm, p.pb}, piece{p.a, m, p.pa, pm})
	}
	return mu, keep
}

// sat returns s = μe/(1 + μe) at ν = log μ.
func sat(nu, e float64) float64 {
	t := math.Exp(nu) * e
	return t / (1 + t)
}

// upperMeet returns the largest value that a function with φ(a) = pa,
// φ(a+w) = pb and slope in [dmin, dmax] (dmin ≤ 0 < dmax) can take on
// [a, a+w]: where the lines pa + dmax·t and pb − dmin·(w − t) meet.
func upperMeet(pa, pb, dmax, dmin, w float64) float64 {
	// pa + dmax·t = pb + |dmin|·(w − t)
	t := (pb - pa - dmin*w) / (dmax - dmin)
	t = min(max(t, 0), w)
	return min(pa+dmax*t, pb-dmin*(w-t))
}

// lowerMeet returns the least value such a function can take on [a, a+w]:
// where the lines pa + dmin·t and pb − dmax·(w − t) meet.
func lowerMeet(pa, pb, dmin, dmax, w float64) float64 {
	// pa − |dmin|·t = pb − dmax·(w − t)
	t := (pa - pb + dmax*w) / (dmax - dmin)
	t = min(max(t, 0), w)
	return max(pa+dmin*t, pb-dmax*(w-t))
}

// root returns the ν in [a, b] where φ crosses 0 upwards, φ(a) < 0 ≤ φ(b)
// and φ rising there: Newton's method in ν from nu, kept in the bracket
// by bisection.
func (h halfCurve) root(a, b, nu float64) float64 {
	for range 200 {
		p := h.at(nu)
		if p.phi < 0 {
			a = nu
		} else {
			b = nu
		}
		next := nu - p.phi/p.dphi
		if !(p.dphi > 0) || !(next > a && next < b) {
			next = a + (b-a)/2
		}
		done := math.Abs(next-nu) <= 0x1p-44*max(1, math.Abs(nu)) || b-a <= 0x1p-44*max(1, math.Abs(a))
		nu = next
		if done {
			break
		}
	}
	return nu
}
