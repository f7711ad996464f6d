package optim

import (
	"fmt"
	"math"
)

// Fused kernel for the paper's Adam instance (EMA momentum with the Adam
// preconditioner). It computes what Adam.Denom followed by the momentum
// step computes (up to float32 rounding: it multiplies by 1/sqrt(1−β^t)
// and, when η is needed, by 1/d), in one pass over each chunk. The prox
// then runs as a second pass over the cached chunk: measured on this
// project's CPUs, fusing the prox arithmetic into this loop as well was
// slower, because the longer dependency chain per element leaves less
// room for out-of-order overlap.

// Kinds of chunk update.
const (
	fusedNone = iota // no prox
	fusedEta         // leave η = α_t/d in d for Regularizer.Prox
)

// adamEMA updates one chunk: v ← βv + (1−β)g², m ← ρm + (1−ρ)g,
// d = sqrt(v)/sqrt(1−β^t) + δ, θ ← decay·θ − lrm·m/d, and for fusedEta
// d[i] = α_t/d.
func adamEMA(th, g, m, v, d []float32, h *stepScalars, ad Adam, t int, kind int) {
	if !(ad.Beta >= 0 && ad.Beta < 1) {
		panic(fmt.Sprintf("optim.Adam: Beta = %v must be in [0, 1)", ad.Beta))
	}
	b, omb, delta := ad.Beta, 1-ad.Beta, ad.Delta
	isbc := float32(1)
	if ad.BiasCorrection {
		isbc = float32(1 / math.Sqrt(1-math.Pow(float64(ad.Beta), float64(t+ad.StepOffset))))
	}
	rho, omr, lr, lrm, decay := h.rho, h.omr, h.lr, h.lrm, h.decay
	n := len(th)
	g, m, v, d = g[:n], m[:n], v[:n], d[:n]
	switch kind {
	case fusedNone:
		for i, gi := range g {
			vi := b*v[i] + omb*gi*gi
			v[i] = vi
			mi := rho*m[i] + omr*gi
			m[i] = mi
			th[i] = th[i]*decay - lrm*(mi/(float32(math.Sqrt(float64(vi)))*isbc+delta))
		}
	case fusedEta:
		for i, gi := range g {
			vi := b*v[i] + omb*gi*gi
			v[i] = vi
			mi := rho*m[i] + omr*gi
			m[i] = mi
			inv := 1 / (float32(math.Sqrt(float64(vi)))*isbc + delta)
			th[i] = th[i]*decay - lrm*(mi*inv)
			d[i] = lr * inv
		}
	default:
		panic("optim: unknown fused kernel")
	}
}
