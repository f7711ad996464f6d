package prox

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/optim/internal/proxk"
)

// Regularizer is a coordinate-wise separable penalty R(θ) = Σ_i r(θ_i) with
// a proximal map under a diagonal metric.
type Regularizer interface {
	// Prox sets dst[i] = argmin_x (x-z[i])²/(2·eta[i]) + lambda·r(x); dst may alias z.
	Prox(dst, z, eta []float32, lambda float32)
	// Penalty returns Σ_i r(theta[i]).
	Penalty(theta []float32) float64
}

// Subdifferentiable is implemented by regularizers that subgradient
// baselines can use: loss + λ·R(θ) minimised by adding λ·∂R to the gradient.
type Subdifferentiable interface {
	Regularizer
	// AddSubgradient adds scale·r'(theta[i]) to g[i], where r' is a
	// subgradient of r smoothed by eps where r is not Lipschitz (for ℓq,
	// q·sign(θ)·(|θ|+eps)^(q−1)); r'(0) = 0 where 0 is a kink.
	AddSubgradient(g, theta []float32, scale, eps float32)
}

// lq is r(x) = |x|^q for 0 < q <= 1 and r(x) = [x ≠ 0] for q = 0.
type lq struct {
	q    float64
	kind int
}

// L0 returns the ℓ0 regularizer r(x) = [x ≠ 0]; its prox is hard
// thresholding at |z| = sqrt(2·eta·lambda).
func L0() Regularizer { return Lq(0) }

// L1 returns the ℓ1 regularizer r(x) = |x|; its prox is soft thresholding
// by eta·lambda.
func L1() Regularizer { return Lq(1) }

// Lq returns the regularizer r(x) = |x|^q for q in [0, 1] (with 0^0 = 0, so
// q = 0 counts non-zeros). q = 0, 1/2, 2/3 and 1 use the closed forms of the
// paper and its appendix; any other q uses a safeguarded numerical solve of
// the stationarity condition followed by a comparison with x = 0, which
// yields the global minimiser. Lq panics if q is outside [0, 1].
func Lq(q float64) Regularizer {
	if !(q >= 0 && q <= 1) {
		panic(fmt.Sprintf("prox.Lq: q = %v outside [0, 1]", q))
	}
	r := &lq{q: q, kind: proxk.KindNumeric}
	switch {
	case q == 0:
		r.kind = proxk.KindL0
	case q == 1:
		r.kind = proxk.KindL1
	case math.Abs(q-0.5) < 1e-12:
		r.q, r.kind = 0.5, proxk.KindL12
	case math.Abs(q-2.0/3) < 1e-12:
		r.q, r.kind = 2.0/3, proxk.KindL23
	}
	return r
}

// Q returns the exponent q.
func (r *lq) Q() float64 { return r.q }

// HasSubgradient reports whether AddSubgradient works (q > 0).
func (r *lq) HasSubgradient() bool { return r.q > 0 }

// Kind returns the closed form that Prox uses (proxk.KindL0 ...
// proxk.KindNumeric), for the fused update of optim.
func (r *lq) Kind() int { return r.kind }

// String names the regularizer as Parse accepts it.
func (r *lq) String() string {
	switch r.kind {
	case proxk.KindL0:
		return "l0"
	case proxk.KindL12:
		return "l1/2"
	case proxk.KindL23:
		return "l2/3"
	case proxk.KindL1:
		return "l1"
	}
	return "lq:" + strconv.FormatFloat(r.q, 'g', -1, 64)
}

// Prox implements Regularizer.
func (r *lq) Prox(dst, z, eta []float32, lambda float32) {
	checkProxArgs("Lq", dst, z, eta, lambda)
	if lambda == 0 {
		copy(dst, z)
		return
	}
	lam2 := 2 * float64(lambda)
	switch r.kind {
	case proxk.KindL0:
		proxk.ProxL0Slice(dst, z, eta, lam2)
	case proxk.KindL1:
		proxk.ProxL1Slice(dst, z, eta, lambda)
	case proxk.KindL12:
		proxk.ProxL12Slice(dst, z, eta, lam2)
	case proxk.KindL23:
		proxk.ProxL23Slice(dst, z, eta, lam2)
	default:
		for i, zi := range z {
			dst[i] = float32(proxk.ProxLqNumeric(float64(zi), lam2*float64(eta[i]), r.q))
		}
	}
}

// Penalty implements Regularizer.
func (r *lq) Penalty(theta []float32) float64 {
	var s float64
	switch r.kind {
	case proxk.KindL0:
		for _, v := range theta {
			if v != 0 {
				s++
			}
		}
	case proxk.KindL1:
		for _, v := range theta {
			s += math.Abs(float64(v))
		}
	case proxk.KindL12:
		for _, v := range theta {
			s += math.Sqrt(math.Abs(float64(v)))
		}
	default:
		for _, v := range theta {
			if v != 0 {
				s += math.Pow(math.Abs(float64(v)), r.q)
			}
		}
	}
	return s
}

// AddSubgradient implements Subdifferentiable. It panics for q = 0, which
// has no useful subgradient.
func (r *lq) AddSubgradient(g, theta []float32, scale, eps float32) {
	if len(g) != len(theta) {
		panic(fmt.Sprintf("prox.Lq.AddSubgradient: len(g) = %d, len(theta) = %d", len(g), len(theta)))
	}
	switch r.kind {
	case proxk.KindL0:
		panic("prox.Lq.AddSubgradient: l0 has no subgradient; use the proximal update")
	case proxk.KindL1:
		for i, v := range theta {
			if v > 0 {
				g[i] += scale
			} else if v < 0 {
				g[i] -= scale
			}
		}
	default:
		c := float64(scale) * r.q
		e := float64(eps)
		for i, v := range theta {
			if v != 0 {
				d := c * math.Pow(math.Abs(float64(v))+e, r.q-1)
				g[i] += float32(math.Copysign(d, float64(v)))
			}
		}
	}
}

// binaryW is the W-shaped regularizer with wells at ±s,
// r(x) = s²·||x|/s − 1|^q: s² times the q-th power of the distance of x/s
// to {−1, +1}.
type binaryW struct {
	base *lq
	s    float64
}

// BinaryW returns the revised-ProxQuant W-shaped regularizer for binary
// weights, r(x) = |x − sign(x)|^q, for q in {0, 1/2, 2/3, 1} (closed forms)
// or any other q in [0, 1] (numerical solve). At x = 0 it takes the value of
// its limit, r(0) = 1, so that r is the q-th power of the distance to
// {−1, +1}. The prox of z shrinks |z| − 1 with the ℓq map and keeps the sign
// of z (z = 0 maps to the non-negative minimiser; its mirror image ties).
// BinaryW panics if q is outside [0, 1].
func BinaryW(q float64) Regularizer { return BinaryWAt(q, 1) }

// BinaryWAt returns the W-shaped regularizer with its wells at ±s,
// r(x) = s²·r₁(x/s) with r₁ = BinaryW(q): binary weights ±s, as a binary
// layer with one scale per tensor stores them. The factor s² makes its
// prox scale-free: prox(z) = s·prox₁(z/s) under the same η and λ, so a
// tensor of small weights and one of large weights move the same fraction
// of their scale towards ±s in a step. BinaryWAt(q, 1) is BinaryW(q). It
// panics if q is outside [0, 1] or s is not a positive finite number.
func BinaryWAt(q, s float64) Regularizer {
	if !(q >= 0 && q <= 1) {
		panic(fmt.Sprintf("prox.BinaryW: q = %v outside [0, 1]", q))
	}
	if !(s > 0) || math.IsInf(s, 1) {
		panic(fmt.Sprintf("prox.BinaryWAt: scale %v is not a positive finite number", s))
	}
	return &binaryW{base: Lq(q).(*lq), s: s}
}

// BinaryScale returns the scale s of a W-shaped binary regularizer (its
// wells at ±s; 1 for BinaryW) and whether r is one.
func BinaryScale(r Regularizer) (float64, bool) {
	b, ok := r.(*binaryW)
	if !ok {
		return 0, false
	}
	return b.s, true
}

// Q returns the exponent q.
func (r *binaryW) Q() float64 { return r.base.q }

// HasSubgradient reports whether AddSubgradient works (q > 0).
func (r *binaryW) HasSubgradient() bool { return r.base.q > 0 }

// String names the regularizer as Parse accepts it (the scale, which
// Parse does not spell, after an @ when it is not 1).
func (r *binaryW) String() string {
	if r.s != 1 {
		return fmt.Sprintf("bin-%v@%.4g", r.base, r.s)
	}
	return "bin-" + r.base.String()
}

// Prox implements Regularizer.
func (r *binaryW) Prox(dst, z, eta []float32, lambda float32) {
	checkProxArgs("BinaryW", dst, z, eta, lambda)
	if lambda == 0 {
		copy(dst, z)
		return
	}
	lam2 := 2 * float64(lambda)
	q := r.base.q
	kind := r.base.kind
	s := r.s
	for i, zi := range z {
		zz := float64(zi)
		a := math.Abs(zz)/s - 1 // signed distance of |z|/s from 1
		kappa := lam2 * float64(eta[i])
		var y float64
		switch kind {
		case proxk.KindL0:
			if a*a > kappa {
				y = a
			}
		case proxk.KindL1:
			y = math.Copysign(math.Max(math.Abs(a)-kappa/2, 0), a)
		case proxk.KindL12:
			y = proxk.ProxL12F64(a, kappa)
		case proxk.KindL23:
			y = proxk.ProxL23F64(a, kappa)
		default:
			y = proxk.ProxLqNumeric(a, kappa, q)
		}
		x := s * (1 + y)
		if zz < 0 {
			x = -x
		}
		dst[i] = float32(x)
	}
}

// Penalty implements Regularizer.
func (r *binaryW) Penalty(theta []float32) float64 {
	var sum float64
	q, s := r.base.q, r.s
	for _, v := range theta {
		d := math.Abs(math.Abs(float64(v))/s - 1)
		switch {
		case d == 0:
		case q == 0:
			sum++
		case q == 1:
			sum += d
		default:
			sum += math.Pow(d, q)
		}
	}
	return s * s * sum
}

// AddSubgradient implements Subdifferentiable: it adds
// scale·s·q·sign(x/s − w)·(|x/s − w| + eps)^(q−1) with w the nearest of ±1
// (nothing at x = ±s or x = 0). It panics for q = 0.
func (r *binaryW) AddSubgradient(g, theta []float32, scale, eps float32) {
	if len(g) != len(theta) {
		panic(fmt.Sprintf("prox.BinaryW.AddSubgradient: len(g) = %d, len(theta) = %d", len(g), len(theta)))
	}
	q := r.base.q
	if q == 0 {
		panic("prox.BinaryW.AddSubgradient: q = 0 has no subgradient; use the proximal update")
	}
	c := float64(scale) * q * r.s
	e := float64(eps)
	for i, v := range theta {
		x := float64(v) / r.s
		if x == 0 {
			continue
		}
		d := x - math.Copysign(1, x)
		if d == 0 {
			continue
		}
		m := c
		if q != 1 {
			m = c * math.Pow(math.Abs(d)+e, q-1)
		}
		g[i] += float32(math.Copysign(m, d))
	}
}

// Syntax lists the names Parse accepts, for flag
// help texts.
const Syntax = "none, l0, l1/2 (also l12), l2/3 (also l23), l1, lq:Q (Q in [0, 1]), any of those prefixed bin- for the W-shaped binary regularizer (bin-l1, bin-lq:0.3), or the group regularizers gl0, gl1/2 (also gl12), gl21 over output filters (suffixed :in for input channels, :block for blocks of 16 output channels at one input position)"

// Parse returns the regularizer named by s (Syntax):
// "none" (nil), "l0", "l1/2", "l2/3", "l1", "lq:Q" for any Q in [0, 1], or
// any of those prefixed with "bin-" for the W-shaped binary regularizer
// (for example "bin-l1", "bin-lq:0.3"), or a group regularizer over output
// filters, "gl0" (GroupL0), "gl1/2" or "gl12" (GroupHalf) and "gl21" (GroupLasso), suffixed ":in" for
// input channels ("gl21:in") or ":block" for blocks of 16 output channels
// at one input position ("gl0:block", ByBlock). "l12" and "l23" are the short spellings of
// "l1/2" and "l2/3" (usable in file names).
//
// The deprecated spellings of cmd/cifar before this grammar, "binw:Q"
// (bin-lq:Q) and exponents written as fractions ("lq:1/3"), are still
// accepted for one release; Deprecation names their
// replacement.
func Parse(s string) (Regularizer, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" || name == "none" {
		return nil, nil
	}
	if base, by, ok := parseGroupName(name); ok {
		switch base {
		case "gl0":
			return GroupL0(by), nil
		case "gl21":
			return GroupLasso(by), nil
		case "gl1/2", "gl12":
			return GroupHalf(by), nil
		}
		return nil, fmt.Errorf("optim: unknown group regularizer %q (want gl0, gl1/2 or gl21, optionally suffixed :in or :block)", s)
	}
	binary := strings.HasPrefix(name, "bin-")
	name = strings.TrimPrefix(name, "bin-")
	if q, ok := strings.CutPrefix(name, "binw:"); ok && !binary {
		binary, name = true, "lq:"+q // deprecated: bin-lq:Q
	}
	var q float64
	switch name {
	case "l0":
		q = 0
	case "l1/2", "l12", "lhalf":
		q = 0.5
	case "l2/3", "l23":
		q = 2.0 / 3
	case "l1":
		q = 1
	default:
		v, ok := strings.CutPrefix(name, "lq:")
		if !ok {
			return nil, fmt.Errorf("optim: unknown regularizer %q (want %s)", s, Syntax)
		}
		f, err := parseExponent(v)
		if err != nil {
			return nil, fmt.Errorf("optim: regularizer %q: bad exponent: %w", s, err)
		}
		if !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("optim: regularizer %q: q = %v outside [0, 1]", s, f)
		}
		q = f
	}
	if binary {
		return BinaryW(q), nil
	}
	return Lq(q), nil
}

// parseExponent reads a number, also written as a fraction "A/B"
// (deprecated).
func parseExponent(s string) (float64, error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return strconv.ParseFloat(s, 64)
	}
	n, err1 := strconv.ParseFloat(a, 64)
	d, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || d == 0 {
		return 0, fmt.Errorf("%q is not a number or a fraction", s)
	}
	return n / d, nil
}

// Deprecation returns, for a name Parse accepts in
// a deprecated spelling ("binw:Q", an exponent written as a fraction,
// "lhalf"), a message naming the spelling to use instead; "" otherwise.
func Deprecation(s string) string {
	name := strings.ToLower(strings.TrimSpace(s))
	_, exp, _ := strings.Cut(name, ":")
	if !strings.HasPrefix(name, "binw:") && !strings.Contains(exp, "/") && strings.TrimPrefix(name, "bin-") != "lhalf" {
		return ""
	}
	r, err := Parse(s)
	if err != nil || r == nil {
		return ""
	}
	return fmt.Sprintf("regularizer %q is a deprecated spelling, accepted until the next release; write %q", s, fmt.Sprint(r))
}

// IsBinary reports whether r is a W-shaped binary regularizer (BinaryW),
// which pulls weights towards ±1.
func IsBinary(r Regularizer) bool {
	_, ok := r.(*binaryW)
	return ok
}

func checkProxArgs(name string, dst, z, eta []float32, lambda float32) {
	if len(z) != len(dst) || len(eta) != len(dst) {
		panic(fmt.Sprintf("optim.%s.Prox: len(dst) = %d, len(z) = %d, len(eta) = %d must be equal", name, len(dst), len(z), len(eta)))
	}
	if !(lambda >= 0) {
		panic(fmt.Sprintf("optim.%s.Prox: lambda = %v must be >= 0", name, lambda))
	}
}
