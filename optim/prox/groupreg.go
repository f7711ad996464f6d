package prox

import (
	"fmt"
	"math"
	"strings"

	"github.com/proxgen/proxgen/optim/internal/proxk"
)

// GroupBy selects how a group regularizer splits a weight tensor into the
// groups whose coordinates it couples.
type GroupBy int

const (
	// ByFilter makes one group of each output filter of a convolution
	// weight [Cout, Cin, kh, kw] (or output row of a linear weight
	// [out, in]): the coordinates that share index 0. Each group is
	// contiguous. Zeroing a group removes an output channel.
	ByFilter GroupBy = proxk.GroupFilter
	// ByInputChannel makes one group of each input channel: the
	// coordinates that share index 1. Zeroing a group removes an input
	// channel of this layer.
	ByInputChannel GroupBy = proxk.GroupInput
	// ByBlock makes one group of each 16 output channels (a block of
	// BlockWidth) at one position of the other indices: for a convolution
	// weight [Cout, Cin, kh, kw], the weights w[16b..16b+15][ci][ky][kx],
	// exactly the vector that the channel-blocked convolution kernels load
	// (autograd/nchwc), so a zero group is a vector those kernels skip. The
	// last block of a tensor whose Cout is not a multiple of 16 holds the
	// channels that exist.
	ByBlock GroupBy = proxk.GroupBlock
)

// BlockWidth is the number of output channels of a ByBlock group.
const BlockWidth = proxk.BlockWidth

// String returns "filter" or "input".
func (b GroupBy) String() string {
	switch b {
	case ByFilter:
		return "filter"
	case ByInputChannel:
		return "input"
	case ByBlock:
		return "block"
	}
	return fmt.Sprintf("GroupBy(%d)", int(b))
}

// GroupRegularizer is a penalty R(θ) = Σ_g r(θ_g) over the groups of a
// tensor that GroupBy selects, where r couples the coordinates of a group
// (structured sparsity: whole filters or channels become exactly zero).
//
// Its Regularizer methods treat the slices they are given as one group:
// Prox(dst, z, eta, λ) is the proximal map of λ·r for a single group under
// the diagonal metric diag(1/eta), and Penalty returns r of one group. The
// optimizers of this package split each parameter into its groups with
// Groups and call them once per group; tensors of rank below 2 make one
// group per coordinate.
type GroupRegularizer interface {
	Regularizer
	// GroupBy returns how tensors are split into groups.
	GroupBy() GroupBy
}

// GroupPenalty returns Σ_g r(θ_g) for a group regularizer over a tensor of
// the given shape. Coordinate g of each of companions (one element per
// group; r must group ByFilter) joins group g, as a Coupling makes it.
func GroupPenalty(r GroupRegularizer, theta []float32, shape []int, companions ...[]float32) float64 {
	l := checkGroupArgs("prox.GroupPenalty", r.GroupBy(), theta, shape, companions)
	if l.Contiguous() && len(companions) == 0 {
		var s float64
		for g := range l.Count {
			s += r.Penalty(theta[g*l.Size : (g+1)*l.Size])
		}
		return s
	}
	buf := make([]float32, l.Size+len(companions))
	var s float64
	for g := range l.Count {
		gatherCoupled(buf, theta, companions, l, g)
		s += r.Penalty(buf)
	}
	return s
}

// GroupProx sets dst to the proximal map of λR at z for a tensor of the
// given shape under the step sizes eta, one per coordinate (len(z)): r's
// map applied to each of its groups, as the optimizers' fused paths apply
// it. dst may alias z; the padding of a last, partial ByBlock group is
// zero in z and takes a step size of its group in eta, as the optimizers
// pad them. scratch may be nil; the returned slice is scratch grown as
// needed, for the next call to reuse so that a caller stepping every
// iteration allocates nothing.
func GroupProx(r GroupRegularizer, dst, z []float32, shape []int, eta []float32, lambda float32, scratch []float32) []float32 {
	l := checkGroupArgs("prox.GroupProx", r.GroupBy(), z, shape, nil)
	if len(dst) != len(z) || len(eta) != len(z) {
		panic(fmt.Sprintf("prox.GroupProx: dst of %d elements and eta of %d for %d", len(dst), len(eta), len(z)))
	}
	if l.Contiguous() {
		for g := range l.Count {
			lo, hi := g*l.Size, (g+1)*l.Size
			r.Prox(dst[lo:hi], z[lo:hi], eta[lo:hi], lambda)
		}
		return scratch
	}
	if cap(scratch) < 2*l.Size {
		scratch = make([]float32, 2*l.Size)
	}
	zb, eb := scratch[:l.Size], scratch[l.Size:2*l.Size]
	for g := range l.Count {
		l.Gather(zb, z, g)
		l.Gather(eb, eta, g)
		l.PadLike(eb, g)
		r.Prox(zb, zb, eb, lambda)
		l.Scatter(dst, zb, g)
	}
	return scratch
}

// GroupNonZero returns the number of groups of a tensor of the given shape
// that hold a non-zero coordinate, and the number of groups. Coordinate g
// of each of companions (one element per group; by must be ByFilter) joins
// group g, as a Coupling makes it.
func GroupNonZero(by GroupBy, theta []float32, shape []int, companions ...[]float32) (nonzero, groups int) {
	l := checkGroupArgs("prox.GroupNonZero", by, theta, shape, companions)
	buf := make([]float32, l.Size+len(companions))
	for g := range l.Count {
		gatherCoupled(buf, theta, companions, l, g)
		for _, v := range buf {
			if v != 0 {
				nonzero++
				break
			}
		}
	}
	return nonzero, l.Count
}

// checkGroupArgs returns the layout of a tensor of the given shape and
// panics, naming op, when theta or the companions do not match it.
func checkGroupArgs(op string, by GroupBy, theta []float32, shape []int, companions [][]float32) proxk.Layout {
	l := layoutOf(by, shape)
	if l.Len() != len(theta) {
		panic(fmt.Sprintf("%s: shape %v does not match %d elements", op, shape, len(theta)))
	}
	for _, c := range companions {
		if by != ByFilter || len(c) != l.Count {
			panic(fmt.Sprintf("%s: companion of %d elements for %d groups by %v of shape %v (want one per output filter)", op, len(c), l.Count, by, shape))
		}
	}
	return l
}

// gatherCoupled copies group g of theta and then coordinate g of each
// companion into buf.
func gatherCoupled(buf, theta []float32, companions [][]float32, l proxk.Layout, g int) {
	l.Gather(buf, theta, g)
	for j, c := range companions {
		buf[l.Size+j] = c[g]
	}
}

// decided applies d's decision for the group z taken from its float32
// sums (proxk.GroupSums32, with their error bound) and reports whether d
// decided; an undecided group is left to the caller's full map.
func decided(d proxk.Decider, dst, z, eta []float32, lambda float32) bool {
	z2, ze, emin, emax, tol, ok := proxk.GroupSums32(z, eta)
	if !ok {
		return false
	}
	switch act, c := d.Decide32(z2, ze, emin, emax, tol, lambda); act {
	case proxk.DecideKeep:
		if len(z) > 0 && &dst[0] != &z[0] { // in place: nothing to copy
			copy(dst, z)
		}
	case proxk.DecideZero:
		clear(dst)
	case proxk.DecideScale:
		proxk.ScaleFirstOrder(dst, z, eta, c)
	default:
		return false
	}
	return true
}

// groupL0 is r(x) = [x ≠ 0] over a group: the count of non-zero groups.
type groupL0 struct{ by GroupBy }

// GroupL0 returns the group ℓ0 regularizer: R(θ) is the number of groups
// with a non-zero coordinate. Its proximal map under the metric diag(1/η)
// keeps a group unchanged or zeroes it, whichever costs less:
// zero when Σ_i z_i²/(2η_i) ≤ λ, z otherwise (the scalar ℓ0 rule summed
// over the group).
func GroupL0(by GroupBy) GroupRegularizer { return &groupL0{by} }

// GroupBy implements GroupRegularizer.
func (r *groupL0) GroupBy() GroupBy { return r.by }

// String names the regularizer as Parse accepts it.
func (r *groupL0) String() string { return groupName("gl0", r.by) }

// Prox implements Regularizer for one group.
func (r *groupL0) Prox(dst, z, eta []float32, lambda float32) {
	checkProxArgs("GroupL0", dst, z, eta, lambda)
	if lambda == 0 {
		copy(dst, z)
		return
	}
	// Σ z²/max η ≤ Σ z²/η ≤ Σ z²/min η decides most groups without a
	// division per coordinate, and most of those from the float32 sums
	// and their error bound.
	if decided(r, dst, z, eta, lambda) {
		return
	}
	lam2 := 2 * float64(lambda)
	z2, _, _, emin, emax := proxk.GroupSums(z, eta)
	keep := z2 > lam2*emax
	if !keep && z2 > lam2*emin {
		var s float64
		for i, v := range z {
			zi := float64(v)
			s += zi * zi / float64(eta[i])
		}
		keep = s > lam2
	}
	if keep {
		if len(z) > 0 && &dst[0] != &z[0] { // in place (the optimizers): nothing to copy
			copy(dst, z)
		}
	} else {
		clear(dst)
	}
}

// Decide32 implements Decider: keep when Σz²/max η exceeds 2λ, zero
// when Σz²/min η does not, with the sums' error bound on either side.
func (r *groupL0) Decide32(z2, _, emin, emax, tol float64, lambda float32) (act int, c float32) {
	lam2 := 2 * float64(lambda)
	switch {
	case z2*(1-tol) > lam2*emax:
		return proxk.DecideKeep, 0
	case z2*(1+tol) <= lam2*emin:
		return proxk.DecideZero, 0
	}
	return proxk.DecideUndecided, 0
}

// Penalty implements Regularizer for one group: 1 if any coordinate is
// non-zero, else 0.
func (r *groupL0) Penalty(theta []float32) float64 {
	for _, v := range theta {
		if v != 0 {
			return 1
		}
	}
	return 0
}

// groupLasso is r(x) = ‖x‖₂ over a group.
type groupLasso struct{ by GroupBy }

// GroupLasso returns the group lasso (ℓ2,1) regularizer: R(θ) = Σ_g ‖θ_g‖₂.
//
// Its proximal map under the metric diag(1/η), argmin_x Σ_i (x_i − z_i)²/(2η_i)
// + λ‖x‖₂, has no closed form unless η is constant. It is zero exactly when
// 0 is in the subdifferential at 0, that is when ‖z/η‖₂ ≤ λ (the vector of
// z_i/η_i). Otherwise the stationarity condition (x_i − z_i)/η_i +
// λx_i/‖x‖ = 0 gives x_i = z_i·r/(r + λη_i) with r = ‖x‖₂ > 0 the unique
// root of the decreasing convex function
//
//	f(r) = Σ_i z_i²/(r + λη_i)² − 1,
//
// which lies in [‖z‖ − λ·max η, ‖z‖ − λ·min η]. When λ·max η/r ≤ 2⁻¹²
// (most groups of a training step) the first-order root ‖z‖ − λΣz_i²η_i/‖z‖²
// and x_i = z_i(1 − ε_i(1 − ε_i)), ε_i = λη_i/r, are exact to float32
// precision. Otherwise the map solves f(r) = 0 in float64 by Newton's
// method from the second-order root (usually one or two passes over the
// group), falling back to bisection if rounding sends an iterate out of
// the bracket. With a constant η it reduces to block soft
// thresholding x = z·max(0, 1 − λη/‖z‖).
func GroupLasso(by GroupBy) GroupRegularizer { return &groupLasso{by} }

// GroupBy implements GroupRegularizer.
func (r *groupLasso) GroupBy() GroupBy { return r.by }

// String names the regularizer as Parse accepts it.
func (r *groupLasso) String() string { return groupName("gl21", r.by) }

// Prox implements Regularizer for one group.
func (r *groupLasso) Prox(dst, z, eta []float32, lambda float32) {
	checkProxArgs("GroupLasso", dst, z, eta, lambda)
	if lambda == 0 {
		copy(dst, z)
		return
	}
	lam := float64(lambda)
	// Most groups of a training step are far from zero with λη ≪ ‖z‖,
	// where x = z/(1 + λη/r) is taken to second order (below). The
	// float32 sums then suffice: with relative error tol ≤ 2⁻¹³ they give
	// r to about tol/2, which moves x_i by at most ε_i·tol/2 ≤ 2⁻²⁶
	// relative. Elsewhere the float64 sums decide.
	if decided(r, dst, z, eta, lambda) {
		return
	}
	// Squares and quotients of float32 values neither overflow nor
	// underflow in float64, so no scaling is needed.
	z2, ze, ze2, emin, emax := proxk.GroupSums(z, eta)
	zn := math.Sqrt(z2)
	// ‖z‖/max η ≤ ‖z/η‖ ≤ ‖z‖/min η decides most groups without a
	// division per coordinate.
	if zn <= lam*emin {
		clear(dst)
		return
	}
	if zn <= lam*emax {
		var q2 float64
		for i, v := range z {
			q := float64(v) / float64(eta[i])
			q2 += q * q
		}
		if math.Sqrt(q2) <= lam {
			clear(dst)
			return
		}
	}
	lo := max(0, zn-lam*emax)
	hi := max(lo, zn-lam*emin)
	// To first order in ε_i = λη_i/r the root is ‖z‖ minus the
	// z²-weighted mean of λη_i; its error is O(ε²·r).
	rho := min(max(zn-lam*ze/z2, lo), hi)
	if eps := lam * emax / rho; eps <= 0x1p-12 {
		// Then the relative error of r is O(ε²) and that of
		// x_i = z_i/(1 + ε_i) = z_i·(1 − ε_i(1 − ε_i)) + O(ε³) is below
		// 2⁻³⁶: float32 precision without a division per coordinate.
		proxk.ScaleFirstOrder(dst, z, eta, float32(lam/rho))
		return
	}
	if hi-lo > 0x1p-30*hi {
		// Newton's method from the second-order root: with w_i =
		// z_i²/‖z‖² and a_i = λη_i, expanding Σ w_i(‖z‖/(r + a_i))² = 1 to
		// second order in a_i/r gives r = ‖z‖ − ā + (3/2)·Var_w(a)/‖z‖
		// (ā the w-weighted mean), an error of O(ε³·r) that saves about one
		// pass over the group. f is convex and decreasing; the bracket
		// guards against rounding. The error after a step of size s is at
		// most (f″/2|f′|)·s² ≤ 1.5·s²/r, so once a step is below 2⁻¹⁴·r
		// the remaining error is below 2⁻²⁷·r, which moves x_i by less
		// than an eighth of an ulp: no further pass is needed.
		m := ze / z2
		rho = min(max(rho+1.5*lam*lam*max(0, ze2/z2-m*m)/zn, lo), hi)
		for range 100 {
			v, s := proxk.NewtonSums(z, eta, rho, lam)
			v, dv := v-1, -2*s
			if v <= 0 {
				hi = rho
				if v == 0 {
					break
				}
			} else {
				lo = rho
			}
			next := rho - v/dv
			if !(next >= lo && next <= hi) {
				next = lo + (hi-lo)/2
			}
			done := math.Abs(next-rho) <= 0x1p-14*next
			rho = next
			if done || hi-lo <= 0x1p-40*hi {
				break
			}
		}
	}
	proxk.ScaleRho(dst, z, eta, rho, lam)
}

// Decide32 implements Decider: zero when ‖z‖ ≤ λ·min η (then
// ‖z/η‖ ≤ λ), the first-order scaling when λ·max η ≤ 2⁻¹³·r for the
// first-order root r, each with the sums' error bound.
func (r *groupLasso) Decide32(z2, ze, emin, emax, tol float64, lambda float32) (act int, c float32) {
	lam := float64(lambda)
	if le := lam * emin; z2*(1+tol) <= le*le {
		return proxk.DecideZero, 0
	}
	if tol > 0x1p-13 {
		return proxk.DecideUndecided, 0
	}
	if rho := math.Sqrt(z2) - lam*ze/z2; rho > 0 && lam*emax <= 0x1p-13*rho {
		return proxk.DecideScale, float32(lam / rho)
	}
	return proxk.DecideUndecided, 0
}

// Penalty implements Regularizer for one group: ‖θ‖₂.
func (r *groupLasso) Penalty(theta []float32) float64 {
	return proxk.Norm2(theta)
}

// AddSubgradient implements Subdifferentiable for one group: it adds
// scale·θ/‖θ‖₂ (0 at θ = 0, where 0 is a subgradient). eps is unused: the
// norm is Lipschitz.
func (r *groupLasso) AddSubgradient(g, theta []float32, scale, eps float32) {
	if len(g) != len(theta) {
		panic(fmt.Sprintf("prox.GroupLasso.AddSubgradient: len(g) = %d, len(theta) = %d", len(g), len(theta)))
	}
	n := proxk.Norm2(theta)
	if n == 0 {
		return
	}
	c := float64(scale) / n
	for i, v := range theta {
		g[i] += float32(c * float64(v))
	}
}

// groupName is the Parse name of a group regularizer.
func groupName(base string, by GroupBy) string {
	switch by {
	case ByInputChannel:
		return base + ":in"
	case ByBlock:
		return base + ":block"
	}
	return base
}

// parseGroupName splits a group regularizer name such as "gl21:in" or
// "gl0:block" into its base and grouping; ok is false for names that are
// not group names.
func parseGroupName(name string) (base string, by GroupBy, ok bool) {
	if !strings.HasPrefix(name, "gl") {
		return "", 0, false
	}
	base, suffix, cut := strings.Cut(name, ":")
	switch {
	case !cut:
		return base, ByFilter, true
	case suffix == "in":
		return base, ByInputChannel, true
	case suffix == "block":
		return base, ByBlock, true
	}
	return name, ByFilter, true
}

// layoutOf returns the groups that by makes of a tensor of the given
// shape.
func layoutOf(by GroupBy, shape []int) proxk.Layout { return proxk.LayoutOf(int(by), shape) }
