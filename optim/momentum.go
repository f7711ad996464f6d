package optim

import (
	"fmt"
	"math"
)

// Momentum describes the first-order estimate m_t of the update.
//
// The default (HeavyBall false) is the paper's exponential moving average
//
//	m_t = ρ_t m_{t−1} + (1 − ρ_t) g_t,   ρ_t = Rho·Decay^(t−1),
//
// with constant ρ_t = Rho when Decay is 0 or 1 (condition C-3(iii) of the
// paper asks for 0 < Decay < 1). With BiasCorrection the step uses
// m_t/(1 − Π_{s<=t} ρ_s), which is Adam's m̂_t for constant ρ.
//
// HeavyBall selects PyTorch's SGD momentum m_t = Rho·m_{t−1} + g_t instead,
// and Nesterov then steps along g_t + Rho·m_t. Rho = 0 means no momentum:
// the step uses g_t and no state is kept.
type Momentum struct {
	Rho            float64 // momentum coefficient ρ (ρ_1 with Decay)
	Decay          float64 // per-update decay of ρ_t; 0 or 1: constant
	BiasCorrection bool    // divide m_t by 1 − Π ρ_s (Adam's m̂_t)
	HeavyBall      bool    // PyTorch SGD's m_t = Rho·m_{t−1} + g_t
	Nesterov       bool    // with HeavyBall: step along g_t + Rho·m_t
}

// validate panics on an impossible configuration.
func (m Momentum) validate() {
	if !(m.Rho >= 0 && m.Rho < 1) && !(m.HeavyBall && m.Rho >= 0) {
		panic(fmt.Sprintf("optim: momentum Rho = %v must be in [0, 1)", m.Rho))
	}
	if !(m.Decay >= 0 && m.Decay <= 1) {
		panic(fmt.Sprintf("optim: momentum Decay = %v must be in [0, 1]", m.Decay))
	}
	if m.Nesterov && !m.HeavyBall {
		panic("optim: Nesterov momentum needs HeavyBall")
	}
}

// stateful reports whether m_t must be stored between steps.
func (m Momentum) stateful() bool { return m.Rho != 0 }

// RhoAt returns ρ_t for step t >= 1.
func (m Momentum) RhoAt(t int) float64 {
	if m.Decay == 0 || m.Decay == 1 || m.HeavyBall {
		return m.Rho
	}
	return m.Rho * math.Pow(m.Decay, float64(t-1))
}

// correction returns the divisor applied to m_t at step t: 1 − Π_{s<=t} ρ_s
// with bias correction, 1 without.
func (m Momentum) correction(t int) float64 {
	if !m.BiasCorrection || m.HeavyBall || m.Rho == 0 {
		return 1
	}
	if m.Decay == 0 || m.Decay == 1 {
		return 1 - math.Pow(m.Rho, float64(t))
	}
	// Π ρ_0 μ^(s−1) = ρ_0^t μ^(t(t−1)/2).
	tf := float64(t)
	return 1 - math.Pow(m.Rho, tf)*math.Pow(m.Decay, tf*(tf-1)/2)
}
