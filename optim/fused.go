package optim

import (
	"fmt"
	"math"
)

// Fused kernel for the paper's Adam instance (EMA momentum with the Adam
// preconditioner). It computes what Adam.Denom followed by the momentum
// step computes (up to float32 rounding: it multiplies by 1/sqrt(1−β^t)
// and, when η is needed, by 1/d), in one pass over each chunk; on amd64
// with AVX2 assembly kernels do the same arithmetic 8 lanes at a time (no
// fused multiply-add, so the bits are those of the Go loops, whose
// products are converted to float32 explicitly so that no compiler fuses
// them either). The prox
// then runs as a second pass over the cached chunk: measured on this
// project's CPUs, fusing the prox arithmetic into this loop as well was
// slower in Go and no faster in the AVX2 kernel (an Adam+ℓ1/2 kernel took
// as long as the two passes), because the longer dependency chain per
// element and the ℓ1/2 kernel's data-dependent branch leave no room for
// out-of-order overlap with the memory traffic.

// Kinds of chunk update.
const (
	fusedNone = iota // no prox
	fusedEta         // leave η = α_t/d in d for Regularizer.Prox
)

// adamConstsLen is the number of scalars the AVX2 Adam kernels read.
const adamConstsLen = 9

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
	start := 0
	if haveAVX2 && n >= 8 {
		// The same arithmetic, 8 lanes at a time, on the whole multiples
		// of 8; the loops below finish the tail.
		start = n &^ 7
		// The kernels read each scalar as 8 lanes, in this order.
		var c [8 * adamConstsLen]float32
		for i, x := range [adamConstsLen]float32{b, omb, rho, omr, isbc, delta, lrm, decay, lr} {
			for l := range 8 {
				c[8*i+l] = x
			}
		}
		switch kind {
		case fusedNone:
			adamAVX2(&th[0], &g[0], &m[0], &v[0], start, &c[0])
		case fusedEta:
			adamEtaAVX2(&th[0], &g[0], &m[0], &v[0], &d[0], start, &c[0])
		}
	}
	th, g, m, v, d = th[start:], g[start:], m[start:], v[start:], d[start:]
	switch kind {
	case fusedNone:
		for i, gi := range g {
			vi := float32(b*v[i]) + float32(float32(omb*gi)*gi)
			v[i] = vi
			mi := float32(rho*m[i]) + float32(omr*gi)
			m[i] = mi
			th[i] = float32(th[i]*decay) - float32(lrm*(mi/(float32(float32(math.Sqrt(float64(vi)))*isbc)+delta)))
		}
	case fusedEta:
		for i, gi := range g {
			vi := float32(b*v[i]) + float32(float32(omb*gi)*gi)
			v[i] = vi
			mi := float32(rho*m[i]) + float32(omr*gi)
			m[i] = mi
			inv := 1 / (float32(float32(math.Sqrt(float64(vi)))*isbc) + delta)
			th[i] = float32(th[i]*decay) - float32(lrm*float32(mi*inv))
			d[i] = lr * inv
		}
	default:
		panic("optim: unknown fused kernel")
	}
}
