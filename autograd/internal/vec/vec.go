// Package vec holds the vectorised element-wise kernels of batch
// normalisation and ReLU: the per-channel statistics, the normalisation
// with an optional residual and ReLU epilogue, and their gradients.
//
// Each kernel has an AVX2 implementation (vec_amd64.s) and a Go loop, and
// both compute exactly the same values: the float32 arithmetic is the same
// sequence of roundings (no fused multiply-add; the Go loops convert every
// product explicitly, which keeps the compiler from fusing it with the
// following addition, as it may with GOAMD64=v3), and the float64 sums use
// eight lanes, lane j taking elements i ≡ j (mod 8) of each full block of
// eight, combined in the fixed order of combine8, with the remaining
// elements added one by one. Results therefore do not depend on the CPU.
//
// The ReLU convention matches torch.relu and its gradient: the output is
// x where x > 0 and 0 elsewhere (NaN passes through, −0 stays −0), and the
// gradient passes where the output is > 0.
package vec

// useAsm reports whether the assembly kernels run. Tests switch it off to
// compare with the Go loops.
var useAsm = haveAVX2

// SetAsm switches the assembly kernels on or off (when the CPU supports
// them) and returns the previous setting. It is meant for tests.
func SetAsm(on bool) (prev bool) {
	prev = useAsm
	useAsm = on && haveAVX2
	return prev
}

// lanes is the number of float64 accumulators of the sums.
const lanes = 8

// combine8 adds eight lane sums in the order of the assembly kernels.
func combine8(a *[lanes]float64) float64 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// Stats returns Σ(x−k) and Σ(x−k)² over x, in float64.
func Stats(x []float32, k float64) (s1, s2 float64) {
	n := len(x) &^ (lanes - 1)
	if useAsm && n > 0 {
		s1, s2 = statsAVX2(&x[0], n, k)
	} else {
		var a, q [lanes]float64
		for i := 0; i < n; i += lanes {
			for j, v := range x[i : i+lanes] {
				d := float64(v) - k
				a[j] += d
				q[j] += float64(d * d)
			}
		}
		s1, s2 = combine8(&a), combine8(&q)
	}
	for _, v := range x[n:] {
		d := float64(v) - k
		s1 += d
		s2 += float64(d * d)
	}
	return s1, s2
}

// GradSums returns Σdy and Σdy·(x−mean) over dy, in float64, where dy is g
// masked by y > 0 when y is not nil (the gradient behind a ReLU whose
// output is y). x and y must be at least as long as g.
func GradSums(g, y, x []float32, mean float64) (sdy, sdyx float64) {
	x = x[:len(g)]
	if y != nil {
		y = y[:len(g)]
	}
	n := len(g) &^ (lanes - 1)
	switch {
	case useAsm && n > 0 && y == nil:
		sdy, sdyx = gradSumsAVX2(&g[0], &x[0], n, mean)
	case useAsm && n > 0:
		sdy, sdyx = gradSumsMaskedAVX2(&g[0], &y[0], &x[0], n, mean)
	default:
		var a, b [lanes]float64
		for i := 0; i < n; i += lanes {
			for j := range lanes {
				d := g[i+j]
				if y != nil && !(y[i+j] > 0) {
					d = 0
				}
				a[j] += float64(d)
				b[j] += float64(float64(d) * (float64(x[i+j]) - mean))
			}
		}
		sdy, sdyx = combine8(&a), combine8(&b)
	}
	for i := n; i < len(g); i++ {
		d := g[i]
		if y != nil && !(y[i] > 0) {
			d = 0
		}
		sdy += float64(d)
		sdyx += float64(float64(d) * (float64(x[i]) - mean))
	}
	return sdy, sdyx
}

// Epilogue selects what Affine does after the affine map.
type Epilogue int

const (
	// Plain stores the affine map alone.
	Plain Epilogue = iota
	// ReLU clamps the affine map at zero.
	ReLU
	// AddReLU adds the residual, then clamps at zero.
	AddReLU
)

// Affine sets dst[i] = (x[i]−m)·a + b, followed by the epilogue: + r[i]
// and the ReLU for AddReLU, the ReLU alone for ReLU. x and r (for AddReLU)
// must be at least as long as dst.
func Affine(dst, x, r []float32, m, a, b float32, e Epilogue) {
	x = x[:len(dst)]
	var rp *float32
	if e == AddReLU {
		r = r[:len(dst)]
	}
	n := len(dst) &^ (lanes - 1)
	if useAsm && n > 0 {
		if e == AddReLU {
			rp = &r[0]
		}
		affineAVX2(&dst[0], &x[0], rp, n, m, a, b, int(e))
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		v := float32((x[i]-m)*a) + b
		if e == AddReLU {
			v += r[i]
		}
		if e != Plain && v < 0 {
			v = 0
		}
		dst[i] = v
	}
}

// AffineGrad stores (store) or adds into dst the batch-norm input gradient
// k1·dy + k2·(x−m) + k3, where dy is g masked by y > 0 when y is not nil.
// g, x and y must be at least as long as dst.
func AffineGrad(dst, g, y, x []float32, m, k1, k2, k3 float32, store bool) {
	g, x = g[:len(dst)], x[:len(dst)]
	var yp *float32
	mode := 0
	if y != nil {
		y = y[:len(dst)]
		mode |= 1
	}
	if store {
		mode |= 2
	}
	n := len(dst) &^ (lanes - 1)
	if useAsm && n > 0 {
		if y != nil {
			yp = &y[0]
		}
		affineGradAVX2(&dst[0], &g[0], yp, &x[0], n, m, k1, k2, k3, mode)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		d := g[i]
		if y != nil && !(y[i] > 0) {
			d = 0
		}
		v := float32(k1*d) + float32(k2*(x[i]-m)) + k3
		if !store {
			v = dst[i] + v
		}
		dst[i] = v
	}
}

// MaskedGrad stores (store) or adds into dst the gradient g masked by
// y > 0: what a ReLU with output y passes back to its input. g and y must
// be at least as long as dst.
func MaskedGrad(dst, g, y []float32, store bool) {
	g, y = g[:len(dst)], y[:len(dst)]
	n := len(dst) &^ (lanes - 1)
	if useAsm && n > 0 {
		mode := 0
		if store {
			mode = 2
		}
		maskedGradAVX2(&dst[0], &g[0], &y[0], n, mode)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		d := g[i]
		if !(y[i] > 0) {
			d = 0
		}
		if !store {
			d = dst[i] + d
		}
		dst[i] = d
	}
}

// ReLUForward sets dst[i] = x[i] where x[i] > 0 and 0 elsewhere (NaN and
// −0 pass through). x must be at least as long as dst.
func ReLUForward(dst, x []float32) {
	x = x[:len(dst)]
	n := len(dst) &^ (lanes - 1)
	if useAsm && n > 0 {
		reluAVX2(&dst[0], &x[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		v := x[i]
		if v < 0 {
			v = 0
		}
		dst[i] = v
	}
}
