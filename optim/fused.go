package optim

//go:generate go run gen_adam_arm64.go

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/optim/internal/proxk"
)

// Fused kernels for the paper's Adam instance (EMA momentum with the Adam
// preconditioner). adamEMA computes what Adam.Denom followed by the
// momentum step computes (up to float32 rounding: it multiplies by
// 1/sqrt(1−β^t) and, when η is needed, by 1/d), in one pass over each
// chunk; on amd64 with AVX2 and on arm64 (NEON, fusedNone and fusedEta)
// assembly kernels do the same arithmetic 8 lanes at a time (no fused
// multiply-add, so the bits are those of the Go loops, whose products are
// converted to float32 explicitly so that no compiler fuses them either:
// Go fuses x*y+z into one instruction on arm64, and on amd64 with
// GOAMD64=v3).
//
// With the ℓ1/2 regularizer (fusedL12) the same pass also computes s, the
// variable of the ℓ1/2 fast path, and a second pass over the block, still
// in the L1 cache, finishes the prox; the result is that of
// Regularizer.Prox after the fusedEta update, bit for bit. Measured on an
// AMD Zen 4 core (one thread, VGG-16-sized parameters, times of a plain
// Adam step): one pass doing all of it took 2.4× (the chain of two square
// roots, three divisions and the rational function per element is too
// long for the out-of-order window), a software-pipelined single pass
// (s of block j with the prox of block j−1) also 2.4×, these two passes
// over 1024-element blocks 1.5×. Other proxes run as a separate pass after
// fusedEta.

// Kinds of chunk update.
const (
	fusedNone = iota // no prox
	fusedEta         // leave η = α_t/d in d for prox.Regularizer.Prox
	fusedL12         // and apply the ℓ1/2 prox with λ
)

// adamConstsLen is the number of scalars the AVX2 Adam kernels read.
const adamConstsLen = 9

// adamEMA updates one chunk: v ← βv + (1−β)g², m ← ρm + (1−ρ)g,
// d = sqrt(v)/sqrt(1−β^t) + δ, θ ← decay·θ − lrm·m/d, for fusedEta and
// fusedL12 d[i] = α_t/d, and for fusedL12 θ ← prox_{ℓ1/2}(θ) with η = d
// and λ = h.lambda, using sc.S and sc.Mask as Scratch space.
func adamEMA(th, g, m, v, d []float32, sc *proxk.Scratch, h *stepScalars, ad AdamPrecond, t int, kind int) {
	if !(ad.Beta >= 0 && ad.Beta < 1) {
		panic(fmt.Sprintf("optim.AdamPrecond: Beta = %v must be in [0, 1)", ad.Beta))
	}
	b, omb, delta := ad.Beta, 1-ad.Beta, ad.Delta
	isbc := adamInvCorrection(ad, t)
	rho, omr, lr, lrm, decay := h.rho, h.omr, h.lr, h.lrm, h.decay
	lam2 := 2 * float64(h.lambda)
	n := len(th)
	g, m, v, d = g[:n], m[:n], v[:n], d[:n]
	start := 0
	// The kernels read each scalar as 8 lanes, in this order (the NEON
	// kernels the first 4 of each 8).
	var c [8 * adamConstsLen]float32
	if (proxk.HaveAVX2 || haveNEON) && n >= 8 {
		for i, x := range [adamConstsLen]float32{b, omb, rho, omr, isbc, delta, lrm, decay, lr} {
			for l := range 8 {
				c[8*i+l] = x
			}
		}
	}
	if haveNEON && n >= 8 {
		// The same arithmetic on arm64, 8 elements an iteration; the ℓ1/2
		// prox runs as the Go loop after the fusedEta update.
		start = n &^ 7
		if kind == fusedNone {
			adamNEON(&th[0], &g[0], &m[0], &v[0], start, &c[0])
		} else {
			adamEtaNEON(&th[0], &g[0], &m[0], &v[0], &d[0], start, &c[0])
			if kind == fusedL12 {
				proxk.ProxL12Loop(th[:start], th[:start], d[:start], lam2)
			}
		}
	}
	if proxk.HaveAVX2 && n >= 8 {
		// The same arithmetic, 8 lanes at a time, on the whole multiples
		// of 8; the loops below finish the tail.
		start = n &^ 7
		switch {
		case kind == fusedNone:
			proxk.AdamAVX2(&th[0], &g[0], &m[0], &v[0], start, &c[0])
		case kind == fusedL12 && lam2 > 1e-30 && lam2 < 1e30:
			// ProxL12Slice's kernels, the first fused with the update, on
			// blocks small enough for the second to find them in L1.
			const blk = 1024
			for lo := 0; lo < start; lo += blk {
				hi := min(lo+blk, start)
				proxk.AdamL12SAVX2(&th[lo], &g[lo], &m[lo], &v[lo], &d[lo], &sc.S[lo], hi-lo, &c[0], float32(lam2))
				if proxk.L12XAVX2(&th[lo], &th[lo], &sc.S[lo], hi-lo, &sc.Mask[0], &proxk.L12Rat) != 0 {
					proxk.ForMasked(sc.Mask[:(hi-lo)/8], lo, func(i int) {
						th[i] = float32(proxk.ProxL12F64(float64(th[i]), lam2*float64(d[i])))
					})
				}
			}
		default:
			proxk.AdamEtaAVX2(&th[0], &g[0], &m[0], &v[0], &d[0], start, &c[0])
			if kind == fusedL12 {
				proxk.ProxL12Loop(th[:start], th[:start], d[:start], lam2) // lam2 outside the fast range
			}
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
	case fusedEta, fusedL12:
		for i, gi := range g {
			vi := float32(b*v[i]) + float32(float32(omb*gi)*gi)
			v[i] = vi
			mi := float32(rho*m[i]) + float32(omr*gi)
			m[i] = mi
			inv := 1 / (float32(float32(math.Sqrt(float64(vi)))*isbc) + delta)
			th[i] = float32(th[i]*decay) - float32(lrm*float32(mi*inv))
			d[i] = lr * inv
		}
		if kind == fusedL12 {
			proxk.ProxL12Loop(th, th, d, lam2)
		}
	default:
		panic("optim: unknown fused kernel")
	}
}

// adamInvCorrection returns 1/sqrt(1 − β^(t+StepOffset)), the factor of
// sqrt(v) in the fused Adam denominator (1 without bias correction).
func adamInvCorrection(ad AdamPrecond, t int) float32 {
	if !ad.BiasCorrection {
		return 1
	}
	return float32(1 / math.Sqrt(1-math.Pow(float64(ad.Beta), float64(t+ad.StepOffset))))
}

// adamSumEta adds η = α/(C_t + δ) of the step adamEMA just took, from its
// second moments v, to acc: the denominator as the fused step computes it.
func adamSumEta(acc, v []float32, lr float32, ad AdamPrecond, t int) {
	isbc, delta := adamInvCorrection(ad, t), ad.Delta
	v = v[:len(acc)]
	for i, vi := range v {
		acc[i] += lr * (1 / (float32(float32(math.Sqrt(float64(vi)))*isbc) + delta))
	}
}
