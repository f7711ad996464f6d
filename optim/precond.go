package optim

import (
	"fmt"
	"math"
)

// Preconditioner builds the diagonal metric C_t + δI of a ProxGen update.
type Preconditioner interface {
	// Stateful reports whether the preconditioner keeps one state value
	// per coordinate between steps.
	Stateful() bool
	// Denom folds the gradient g of step t (t >= 1) into state (nil when
	// not Stateful) and sets d[i] = C_t,i + δ. d, state and g have equal
	// lengths; d may not alias g.
	Denom(d, state, g []float32, t int)
}

// Identity is C_t = I (proximal SGD): d = 1 + Delta.
type Identity struct {
	Delta float32 // δ added to the unit denominator
}

// Stateful implements Preconditioner.
func (Identity) Stateful() bool { return false }

// Denom implements Preconditioner.
func (p Identity) Denom(d, _, _ []float32, _ int) {
	v := 1 + p.Delta
	for i := range d {
		d[i] = v
	}
}

// AdaGrad is C_t = sqrt(Σ_{s<=t} g_s²) (Duchi et al.): d = sqrt(sum) + Delta,
// as torch.optim.Adagrad with initial_accumulator_value 0 and eps = Delta.
type AdaGrad struct {
	Delta float32 // δ added after the square root (eps)
}

// Stateful implements Preconditioner.
func (AdaGrad) Stateful() bool { return true }

// Denom implements Preconditioner.
func (p AdaGrad) Denom(d, s, g []float32, _ int) {
	delta := p.Delta
	s = s[:len(d)]
	g = g[:len(d)]
	for i, gi := range g {
		v := s[i] + gi*gi
		s[i] = v
		d[i] = float32(math.Sqrt(float64(v))) + delta
	}
}

// RMSprop is C_t = sqrt(v_t) with v_t = Beta·v_{t−1} + (1 − Beta)·g_t²
// and no bias correction: d = sqrt(v) + Delta, as torch.optim.RMSprop with
// alpha = Beta and eps = Delta.
type RMSprop struct {
	Beta  float32 // decay of the squared-gradient average (alpha)
	Delta float32 // δ added after the square root (eps)
}

// Stateful implements Preconditioner.
func (RMSprop) Stateful() bool { return true }

// Denom implements Preconditioner.
func (p RMSprop) Denom(d, s, g []float32, _ int) {
	b, omb, delta := p.Beta, 1-p.Beta, p.Delta
	s = s[:len(d)]
	g = g[:len(d)]
	for i, gi := range g {
		v := b*s[i] + omb*gi*gi
		s[i] = v
		d[i] = float32(math.Sqrt(float64(v))) + delta
	}
}

// AdamPrecond is the Adam preconditioner C_t = sqrt(v_t/(1 − Beta^t)) with
// v_t = Beta·v_{t−1} + (1 − Beta)·g_t², so d = sqrt(v)/sqrt(1 − Beta^t) + Delta
// as in torch.optim.Adam and the official ProxGen code (δ added after the
// square root). Without BiasCorrection, d = sqrt(v) + Delta, which is the
// paper's C_t = sqrt(β C_{t−1}² + (1 − β) g_t²) read as an EMA of g².
//
// StepOffset shifts the bias correction to 1 − Beta^(t+StepOffset): the
// official Prox-SGD code corrects with β^(t+1).
type AdamPrecond struct {
	Beta           float32 // decay of the squared-gradient average (β2)
	Delta          float32 // δ added after the square root (eps)
	BiasCorrection bool    // divide v by 1 − Beta^(t+StepOffset)
	StepOffset     int     // shift of t in the bias correction
}

// NewAdamPrecond returns the Adam preconditioner with bias correction.
func NewAdamPrecond(beta, delta float32) AdamPrecond {
	return AdamPrecond{Beta: beta, Delta: delta, BiasCorrection: true}
}

// Stateful implements Preconditioner.
func (AdamPrecond) Stateful() bool { return true }

// Denom implements Preconditioner.
func (p AdamPrecond) Denom(d, s, g []float32, t int) {
	if !(p.Beta >= 0 && p.Beta < 1) {
		panic(fmt.Sprintf("optim.AdamPrecond: Beta = %v must be in [0, 1)", p.Beta))
	}
	b, omb, delta := p.Beta, 1-p.Beta, p.Delta
	s = s[:len(d)]
	g = g[:len(d)]
	if !p.BiasCorrection {
		for i, gi := range g {
			v := b*s[i] + omb*gi*gi
			s[i] = v
			d[i] = float32(math.Sqrt(float64(v))) + delta
		}
		return
	}
	sbc := float32(math.Sqrt(1 - math.Pow(float64(p.Beta), float64(t+p.StepOffset))))
	for i, gi := range g {
		v := b*s[i] + omb*gi*gi
		s[i] = v
		d[i] = float32(math.Sqrt(float64(v)))/sbc + delta
	}
}
