package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// problem is a Lasso instance: minimise (1/2n)‖y − Xθ‖² + λ‖θ‖₁.
type problem struct {
	n, p  int
	noise float64
	x     []float64 // n×p, row-major
	y     []float64
	truth []float64
}

// newProblem draws the paper's simulation: X ~ N(0, 1), s non-zeros of ±1
// at random positions, y = Xθ* + ε with ε ~ N(0, noise²).
func newProblem(n, p, s int, noise float64, seed uint64) (*problem, error) {
	if n < 1 || p < 1 || s < 0 || s > p {
		return nil, fmt.Errorf("need n >= 1, p >= 1 and 0 <= s <= p, got n=%d p=%d s=%d", n, p, s)
	}
	if !(noise >= 0) {
		return nil, fmt.Errorf("noise = %v must be >= 0", noise)
	}
	rng := rand.New(rand.NewPCG(seed, 0x1a550))
	pr := &problem{n: n, p: p, noise: noise, x: make([]float64, n*p), y: make([]float64, n), truth: make([]float64, p)}
	for i := range pr.x {
		pr.x[i] = rng.NormFloat64()
	}
	for _, j := range rng.Perm(p)[:s] {
		pr.truth[j] = 1
		if rng.IntN(2) == 0 {
			pr.truth[j] = -1
		}
	}
	for i := range n {
		var v float64
		for j := range p {
			v += pr.x[i*p+j] * pr.truth[j]
		}
		pr.y[i] = v + noise*rng.NormFloat64()
	}
	return pr, nil
}

// grad sets g = Xᵀ(Xθ − y)/n and returns the data-fit term (1/2n)‖y − Xθ‖².
func (pr *problem) grad(g []float32, theta []float32) float64 {
	n, p := pr.n, pr.p
	gg := make([]float64, p)
	var loss float64
	for i := range n {
		row := pr.x[i*p : (i+1)*p]
		r := -pr.y[i]
		for j, v := range row {
			r += v * float64(theta[j])
		}
		loss += r * r
		for j, v := range row {
			gg[j] += v * r
		}
	}
	for j := range g {
		g[j] = float32(gg[j] / float64(n))
	}
	return loss / float64(2*n)
}

// lambdaMax returns ‖Xᵀy‖∞/n, the smallest λ whose Lasso solution is 0.
func (pr *problem) lambdaMax() float64 {
	g := make([]float32, pr.p)
	pr.grad(g, make([]float32, pr.p))
	var m float64
	for _, v := range g {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// settings are the solver's hyperparameters.
type settings struct {
	method  string // proxgen or proxsgd
	variant string // Prox-SGD variant: official or scaled
	init    string // random or zero
	lambda  float64
	lr      float64
	steps   int
	seed    uint64
	initStd float64
}

// solve runs the chosen method with the Adam preconditioner on full-batch
// gradients and returns the estimate and the final objective.
func solve(pr *problem, st settings) ([]float32, float64, error) {
	theta := autograd.New(pr.p)
	switch st.init {
	case "zero":
	case "random":
		rng := rand.New(rand.NewPCG(st.seed, 0x1417))
		for i := range theta.Data {
			theta.Data[i] = float32(st.initStd * rng.NormFloat64())
		}
	default:
		return nil, 0, fmt.Errorf("-init %q: want random or zero", st.init)
	}
	groups := []*optim.Group{{Params: []*autograd.Tensor{theta}, Names: []string{"theta"}, Reg: prox.L1(), Lambda: st.lambda, LR: st.lr}}
	var opt optim.Optimizer
	switch st.method {
	case "proxgen":
		// ProxGen with the Adam preconditioner (Algorithm 1, ζ = 0); the
		// step size drops ×0.1 at 50% and 75% of the run so the iterates
		// settle instead of oscillating at the scale of α.
		cfg := optim.ProxGenAdam(0.9, 0.999, 1e-8)
		cfg.Schedule = schedule.MultiStep{Milestones: []int{st.steps / 2, st.steps * 3 / 4}, Gamma: 0.1}
		opt = optim.New(groups, cfg)
	case "proxsgd":
		// Prox-SGD with the Adam preconditioner and its official
		// ε_t = ε0/sqrt(t+3), ρ_t = 0.9/sqrt(t+3) schedules; ε0 = -lr.
		cfg := optim.ProxSGDConfig{}
		switch st.variant {
		case "official", "":
		case "scaled":
			cfg.ScaledGradient = true
		default:
			return nil, 0, fmt.Errorf("-proxsgd %q: want official or scaled", st.variant)
		}
		opt = optim.NewProxSGD(groups, cfg)
	default:
		return nil, 0, fmt.Errorf("-method %q: want proxgen or proxsgd", st.method)
	}
	theta.Grad = make([]float32, pr.p)
	for range st.steps {
		pr.grad(theta.Grad, theta.Data)
		opt.Step()
	}
	g := make([]float32, pr.p)
	obj := pr.grad(g, theta.Data) + st.lambda*prox.L1().Penalty(theta.Data)
	return theta.Data, obj, nil
}

// metrics compares an estimate with the truth.
type metrics struct {
	Zeros          int     `json:"zeros"`            // exact zeros in the estimate
	Support        int     `json:"support"`          // non-zeros in the estimate
	TrueSupport    int     `json:"true_support"`     // non-zeros in the truth
	TruePositives  int     `json:"true_positives"`   // non-zeros in both
	FalsePositives int     `json:"false_positives"`  // non-zero estimate, zero truth
	FalseNegatives int     `json:"false_negatives"`  // zero estimate, non-zero truth
	ExactSupport   bool    `json:"exact_support"`    // same support as the truth
	SignsCorrect   bool    `json:"signs_correct"`    // same sign pattern as the truth
	Below1e3       int     `json:"abs_below_1e-3"`   // |θ_j| < 1e-3
	MaxAbsOffSupp  float64 `json:"max_abs_off_supp"` // largest |θ_j| off the true support
	L2Error        float64 `json:"l2_error"`         // ‖θ − θ*‖₂
}

func compare(est []float32, truth []float64) metrics {
	var m metrics
	m.SignsCorrect = true
	var se float64
	for j, v := range est {
		e, tv := float64(v), truth[j]
		se += (e - tv) * (e - tv)
		if e == 0 {
			m.Zeros++
		} else {
			m.Support++
		}
		if math.Abs(e) < 1e-3 {
			m.Below1e3++
		}
		if tv != 0 {
			m.TrueSupport++
		} else {
			m.MaxAbsOffSupp = math.Max(m.MaxAbsOffSupp, math.Abs(e))
		}
		switch {
		case e != 0 && tv != 0:
			m.TruePositives++
		case e != 0:
			m.FalsePositives++
		case tv != 0:
			m.FalseNegatives++
		}
		if sgn(e) != sgn(tv) {
			m.SignsCorrect = false
		}
	}
	m.ExactSupport = m.FalsePositives == 0 && m.FalseNegatives == 0
	m.L2Error = math.Sqrt(se)
	return m
}

// cdLasso returns the exact Lasso minimiser by cyclic coordinate descent
// in float64 (the reference the stochastic methods are compared with). It
// stops when a sweep changes no coordinate by more than 1e-13 or after
// maxSweeps sweeps.
func cdLasso(pr *problem, lambda float64, maxSweeps int) []float64 {
	n, p := pr.n, pr.p
	th := make([]float64, p)
	r := append([]float64(nil), pr.y...) // y − Xθ
	colsq := make([]float64, p)
	for j := range p {
		for i := range n {
			colsq[j] += pr.x[i*p+j] * pr.x[i*p+j]
		}
		colsq[j] /= float64(n)
	}
	for range maxSweeps {
		var change float64
		for j := range p {
			var rho float64
			for i := range n {
				rho += pr.x[i*p+j] * r[i]
			}
			rho = rho/float64(n) + colsq[j]*th[j]
			nv := math.Copysign(math.Max(math.Abs(rho)-lambda, 0), rho) / colsq[j]
			if d := nv - th[j]; d != 0 {
				for i := range n {
					r[i] -= pr.x[i*p+j] * d
				}
				th[j] = nv
				change = math.Max(change, math.Abs(d))
			}
		}
		if change <= 1e-13 {
			break
		}
	}
	return th
}

// sameSupport reports whether est and ref have the same non-zero pattern.
func sameSupport(est []float32, ref []float64) bool {
	for j, v := range est {
		if (v != 0) != (ref[j] != 0) {
			return false
		}
	}
	return true
}

func sgn(v float64) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
