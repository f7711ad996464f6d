package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/internal/opttest"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

func param(data ...float32) *autograd.Tensor {
	return autograd.FromSlice(append([]float32(nil), data...), len(data))
}

// TestProxGenWHandStep checks one ProxGenW step with the Adam
// preconditioner and ℓ1 against numbers computed by hand.
func TestProxGenWHandStep(t *testing.T) {
	// θ = 1, g = 0.5, α = 0.1, β1 = 0.9, β2 = 0.999, δ = 0, ζ = 0.1, λ = 0.2:
	// m = 0.05, m̂ = 0.5; v = 0.00025, v̂ = 0.25, d = sqrt(v̂) = 0.5;
	// θ̄ = (1 − 0.1·0.1)·1 = 0.99; z = 0.99 − 0.1·0.5/0.5 = 0.89;
	// η = 0.1/0.5 = 0.2, soft threshold ηλ = 0.04: θ = 0.85.
	p := param(1)
	p.Grad = []float32{0.5}
	o := New([]*Group{{Params: []*autograd.Tensor{p}, Reg: prox.L1(), Lambda: 0.2, WeightDecay: 0.1, LR: 0.1}}, ProxGenAdam(0.9, 0.999, 0))
	o.Step()
	if !opttest.Near(float64(p.Data[0]), 0.85, 1e-6, 0) {
		t.Fatalf("θ after step 1 = %.8g, want 0.85", p.Data[0])
	}
	// Weight decay after the prox would give (0.89 − 0.04)·0.99 = 0.8415
	// and coupled decay (g = 0.5 + 0.1) another value: the order matters.
	// Step 2 with g = −0.25: m = 0.02, m̂ = 0.02/0.19; v = 0.00031225,
	// v̂ = v/0.001999; θ̄ = 0.85·0.99.
	p.Grad[0] = -0.25
	o.Step()
	mh := 0.02 / 0.19
	d := math.Sqrt(0.00031225 / (1 - 0.999*0.999))
	z := 0.85*0.99 - 0.1*mh/d
	want := z - 0.1/d*0.2
	if !opttest.Near(float64(p.Data[0]), want, 1e-6, 0) {
		t.Fatalf("θ after step 2 = %.8g, want %.8g", p.Data[0], want)
	}
	if o.Steps() != 2 {
		t.Fatalf("Steps = %d", o.Steps())
	}
}

// TestCoupledWeightDecayHandStep: Adam with coupled decay adds ζθ to g.
func TestCoupledWeightDecayHandStep(t *testing.T) {
	p := param(1)
	p.Grad = []float32{0.5}
	g := &Group{Params: []*autograd.Tensor{p}, WeightDecay: 0.1, LR: 0.1}
	New([]*Group{g}, AdamConfig(0.9, 0.999, 0)).Step()
	// g' = 0.6: m̂ = 0.6, d = 0.6: θ = 1 − 0.1.
	if !opttest.Near(float64(p.Data[0]), 0.9, 1e-6, 0) {
		t.Fatalf("Adam coupled: θ = %g, want 0.9", p.Data[0])
	}
	p2 := param(1)
	p2.Grad = []float32{0.5}
	New([]*Group{{Params: []*autograd.Tensor{p2}, WeightDecay: 0.1, LR: 0.1}}, AdamWConfig(0.9, 0.999, 0)).Step()
	// AdamW: θ̄ = 0.99, then − 0.1.
	if !opttest.Near(float64(p2.Data[0]), 0.89, 1e-6, 0) {
		t.Fatalf("AdamW: θ = %g, want 0.89", p2.Data[0])
	}
}

// TestBaselineHandSteps checks the remaining update rules against steps
// computed by hand on one or three coordinates.
func TestBaselineHandSteps(t *testing.T) {
	type step struct {
		g    []float32
		want []float64
	}
	cases := []struct {
		name  string
		cfg   Config
		theta []float32
		grp   Group
		steps []step
	}{
		// SGD, momentum 0.9, coupled ζ = 0.1, α = 0.1: g' = 0.5 + 0.1 = 0.6,
		// m = 0.6, θ = 0.94; g' = −0.25 + 0.094 = −0.156, m = 0.54 − 0.156 =
		// 0.384, θ = 0.94 − 0.0384.
		{"sgd-momentum", SGDConfig(0.9, false), []float32{1}, Group{WeightDecay: 0.1, LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.94}}, {[]float32{-0.25}, []float64{0.9016}}}},
		// Nesterov steps along g' + 0.9m: 0.6 + 0.54 = 1.14, θ = 0.886;
		// g' = −0.25 + 0.0886 = −0.1614, m = 0.3786, u = −0.1614 + 0.34074.
		{"sgd-nesterov", SGDConfig(0.9, true), []float32{1}, Group{WeightDecay: 0.1, LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.886}}, {[]float32{-0.25}, []float64{0.886 - 0.017934}}}},
		// AdaGrad: Σg² = 0.25, θ = 1 − 0.1·0.5/0.5; Σg² = 1.69, θ −= 0.1·1.2/1.3.
		{"adagrad", AdaGradConfig(0), []float32{1}, Group{LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.9}}, {[]float32{1.2}, []float64{0.9 - 0.12/1.3}}}},
		// RMSprop, β = 0.75: v = 0.25, θ = 1 − 0.1·1/0.5; v = 0.1875 +
		// 0.0625 = 0.25, θ = 0.8 + 0.1·0.5/0.5.
		{"rmsprop", RMSpropConfig(0.75, 0), []float32{1}, Group{LR: 0.1},
			[]step{{[]float32{1}, []float64{0.8}}, {[]float32{-0.5}, []float64{0.9}}}},
		// EMA momentum and Adam preconditioner (β = 0.75) without bias
		// correction: m = 0.05, v = 0.0625, θ = 1 − 0.1·0.05/0.25 = 0.98.
		// (With bias correction the first step is 1 − 0.1·sign(g).)
		{"adam-no-bias-correction", Config{Momentum: Momentum{Rho: 0.9}, Precond: AdamPrecond{Beta: 0.75}}, []float32{1}, Group{LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.98}}}},
		// ρ_t = 0.9·0.5^(t−1) with bias correction, identity metric: m =
		// 0.05, m̂ = 0.05/0.1, θ = 0.95; ρ_2 = 0.45, m = 0.0225 − 0.1375 =
		// −0.115, m̂ = −0.115/(1 − 0.9·0.45), θ = 0.95 − 0.1·m̂.
		{"decaying-rho", Config{Momentum: Momentum{Rho: 0.9, Decay: 0.5, BiasCorrection: true}}, []float32{1}, Group{LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.95}}, {[]float32{-0.25}, []float64{0.95 + 0.1*0.115/0.595}}}},
		// Proximal SGD with ℓ0, δ = 0.25, λ = 5.5: z = 1 − 0.1·0.5/1.25 =
		// 0.96, η = 0.1/1.25 = 0.08, 2ηλ = 0.88 < z² = 0.9216 keeps z; then
		// z = 0.92, z² = 0.8464 < 0.88 gives 0.
		{"prox-sgd-l0", Config{Precond: Identity{Delta: 0.25}}, []float32{1}, Group{Reg: prox.L0(), Lambda: 5.5, LR: 0.1},
			[]step{{[]float32{0.5}, []float64{0.96}}, {[]float32{0.5}, []float64{0}}}},
		// Subgradient ℓ1/2 with plain SGD, λ = 0.1: g' = g + 0.1·0.5·|θ|^(−1/2)·sign(θ)
		// = 0.3 + 0.1, 0 − 0.25 and 0.1 + 0 (no subgradient at θ = 0).
		{"subgradient-l1/2", func() Config { c := SGDConfig(0, false); c.RegMode = RegSubgradient; return c }(),
			[]float32{0.25, -0.04, 0}, Group{Reg: prox.Lq(0.5), Lambda: 0.1, LR: 0.1},
			[]step{{[]float32{0.3, 0, 0.1}, []float64{0.21, -0.015, -0.01}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := param(c.theta...)
			g := c.grp
			g.Params = []*autograd.Tensor{p}
			o := New([]*Group{&g}, c.cfg)
			for k, s := range c.steps {
				p.Grad = append([]float32(nil), s.g...)
				o.Step()
				for i, want := range s.want {
					if !opttest.Near(float64(p.Data[i]), want, 2e-6, 1e-7) {
						t.Fatalf("step %d coordinate %d: θ = %.8g, want %.8g", k+1, i, p.Data[i], want)
					}
				}
			}
		})
	}
}

// refConfig describes a ProxGen variant for the float64 reference.
type refConfig struct {
	name      string
	precond   string // identity, adagrad, rmsprop, adam, adam-nobc
	beta      float64
	delta     float64
	rho, mu   float64
	bc        bool
	heavy     bool
	nesterov  bool
	coupled   bool
	euclidean bool
	reg       string // "", l1, l0, l1/2
	subgrad   bool
	lr, wd    float64
	lambda    float64
}

func (c refConfig) config() Config {
	cfg := Config{
		Momentum:           Momentum{Rho: c.rho, Decay: c.mu, BiasCorrection: c.bc, HeavyBall: c.heavy, Nesterov: c.nesterov},
		CoupledWeightDecay: c.coupled,
		SubgradEps:         1e-8,
	}
	switch c.precond {
	case "identity":
		cfg.Precond = Identity{Delta: float32(c.delta)}
	case "adagrad":
		cfg.Precond = AdaGrad{Delta: float32(c.delta)}
	case "rmsprop":
		cfg.Precond = RMSprop{Beta: float32(c.beta), Delta: float32(c.delta)}
	case "adam":
		cfg.Precond = AdamPrecond{Beta: float32(c.beta), Delta: float32(c.delta), BiasCorrection: true}
	case "adam-nobc":
		cfg.Precond = AdamPrecond{Beta: float32(c.beta), Delta: float32(c.delta)}
	}
	if c.euclidean {
		cfg.Metric = Euclidean
	}
	if c.subgrad {
		cfg.RegMode = RegSubgradient
	}
	return cfg
}

func (c refConfig) regularizer() prox.Regularizer {
	switch c.reg {
	case "l1":
		return prox.L1()
	case "l0":
		return prox.L0()
	case "l1/2":
		return prox.Lq(0.5)
	}
	return nil
}

// refRun runs the update rules written out directly in float64.
func refRun(c refConfig, theta []float64, grads [][]float64) []float64 {
	n := len(theta)
	th := append([]float64(nil), theta...)
	m := make([]float64, n)
	s := make([]float64, n)
	prod := 1.0
	for t := 1; t <= len(grads); t++ {
		rho := c.rho
		if c.mu > 0 && c.mu < 1 && !c.heavy {
			rho = c.rho * math.Pow(c.mu, float64(t-1))
		}
		prod *= rho
		for i := range th {
			g := grads[t-1][i]
			if c.coupled {
				g += c.wd * th[i]
			}
			if c.subgrad && th[i] != 0 {
				g += c.lambda * math.Copysign(1, th[i]) // ℓ1 subgradient
			}
			var d float64
			switch c.precond {
			case "identity":
				d = 1 + c.delta
			case "adagrad":
				s[i] += g * g
				d = math.Sqrt(s[i]) + c.delta
			case "rmsprop", "adam-nobc":
				s[i] = c.beta*s[i] + (1-c.beta)*g*g
				d = math.Sqrt(s[i]) + c.delta
			case "adam":
				s[i] = c.beta*s[i] + (1-c.beta)*g*g
				d = math.Sqrt(s[i]/(1-math.Pow(c.beta, float64(t)))) + c.delta
			}
			var u float64
			switch {
			case c.heavy:
				m[i] = c.rho*m[i] + g
				u = m[i]
				if c.nesterov {
					u = g + c.rho*m[i]
				}
			case c.rho == 0:
				u = g
			default:
				m[i] = rho*m[i] + (1-rho)*g
				u = m[i]
				if c.bc {
					u /= 1 - prod
				}
			}
			x := th[i]
			if !c.coupled {
				x *= 1 - c.lr*c.wd
			}
			z := x - c.lr*u/d
			eta := c.lr / d
			if c.euclidean {
				eta = c.lr
			}
			if !c.subgrad {
				switch c.reg {
				case "l1":
					z = math.Copysign(math.Max(math.Abs(z)-eta*c.lambda, 0), z)
				case "l0":
					if z*z <= 2*eta*c.lambda {
						z = 0
					}
				case "l1/2":
					z = proxk.ProxL12Trig(z, 2*eta*c.lambda)
				}
			}
			th[i] = z
		}
	}
	return th
}

func refCases() []refConfig {
	base := refConfig{beta: 0.99, delta: 1e-3, lr: 0.05, wd: 0.3, lambda: 0.4}
	var cs []refConfig
	add := func(name string, f func(*refConfig)) {
		c := base
		c.name = name
		f(&c)
		cs = append(cs, c)
	}
	add("proxsgd-identity-l1", func(c *refConfig) { c.precond = "identity"; c.reg = "l1" })
	add("proxsgd-ema-l0", func(c *refConfig) { c.precond = "identity"; c.rho = 0.8; c.reg = "l0" })
	add("adagrad-l1", func(c *refConfig) { c.precond = "adagrad"; c.reg = "l1" })
	add("rmsprop-l1/2", func(c *refConfig) { c.precond = "rmsprop"; c.reg = "l1/2" })
	add("adam-bc-l1/2", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.reg = "l1/2" })
	add("adam-bc-l1", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.reg = "l1" })
	add("adam-bc-l0", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.reg = "l0" })
	add("adam-nobc-l1", func(c *refConfig) { c.precond = "adam-nobc"; c.rho = 0.9; c.reg = "l1" })
	add("adam-decaying-rho", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.mu = 0.7; c.bc = true; c.reg = "l1" })
	add("adam-decaying-rho-nobc", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.mu = 0.7; c.reg = "l1/2" })
	add("adam-coupled", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.coupled = true })
	add("adam-coupled-l1", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.coupled = true; c.reg = "l1" })
	add("adamw", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true })
	add("proxquant-euclidean", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.euclidean = true; c.reg = "l1" })
	add("subgradient-l1", func(c *refConfig) { c.precond = "adam"; c.rho = 0.9; c.bc = true; c.subgrad = true; c.reg = "l1" })
	add("sgd-heavyball", func(c *refConfig) { c.precond = "identity"; c.delta = 0; c.rho = 0.9; c.heavy = true; c.coupled = true })
	add("sgd-nesterov", func(c *refConfig) {
		c.precond = "identity"
		c.delta = 0
		c.rho = 0.9
		c.heavy = true
		c.nesterov = true
		c.coupled = true
	})
	add("sgd-heavyball-prox-l1", func(c *refConfig) { c.precond = "identity"; c.delta = 0; c.rho = 0.5; c.heavy = true; c.reg = "l1" })
	return cs
}

// TestUpdateRulesMatchReference runs every composition for several steps
// on a small vector (values chosen so that some coordinates hit zero)
// against the float64 reference, through both the fused and the generic
// code paths.
func TestUpdateRulesMatchReference(t *testing.T) {
	theta := []float64{1.5, -0.8, 0.05, -0.02, 0.3, 0, 2.5, -1.1}
	rng := rand.New(rand.NewPCG(21, 22))
	grads := make([][]float64, 6)
	for k := range grads {
		grads[k] = make([]float64, len(theta))
		for i := range theta {
			grads[k][i] = float64(float32(rng.NormFloat64() * 0.5))
		}
	}
	for _, c := range refCases() {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generic=%v", c.name, generic), func(t *testing.T) {
				data := make([]float32, len(theta))
				for i, v := range theta {
					data[i] = float32(v)
				}
				p := param(data...)
				g := &Group{Params: []*autograd.Tensor{p}, Reg: c.regularizer(), Lambda: c.lambda, WeightDecay: c.wd, LR: c.lr}
				o := New([]*Group{g}, c.config())
				o.generic = generic
				for k := range grads {
					p.Grad = make([]float32, len(theta))
					for i, v := range grads[k] {
						p.Grad[i] = float32(v)
					}
					o.Step()
				}
				want := refRun(c, theta, grads)
				for i := range want {
					if !opttest.Near(float64(p.Data[i]), want[i], 2e-5, 1e-6) {
						t.Fatalf("coordinate %d: got %.8g, reference %.8g (all: %v vs %v)", i, p.Data[i], want[i], p.Data, want)
					}
					if (want[i] == 0) != (p.Data[i] == 0) && math.Abs(want[i]) > 1e-6 {
						t.Fatalf("coordinate %d: zero pattern differs: %g vs %g", i, p.Data[i], want[i])
					}
				}
			})
		}
	}
}

// TestMomentumDecay checks ρ_t = ρ0·μ^(t−1) and the bias correction
// 1 − Π ρ_s.
func TestMomentumDecay(t *testing.T) {
	m := Momentum{Rho: 0.9, Decay: 0.5, BiasCorrection: true}
	if got := m.RhoAt(3); !opttest.Near(got, 0.9*0.25, 1e-15, 0) {
		t.Errorf("ρ_3 = %g", got)
	}
	if got := m.correction(3); !opttest.Near(got, 1-0.9*0.45*0.225, 1e-14, 0) {
		t.Errorf("correction(3) = %g", got)
	}
	c := Momentum{Rho: 0.9, BiasCorrection: true}
	if got := c.correction(2); !opttest.Near(got, 0.19, 1e-14, 0) {
		t.Errorf("constant correction(2) = %g", got)
	}
}

// bigParams returns a few parameters spanning several chunks.
func bigParams(seed uint64) []*autograd.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	var ps []*autograd.Tensor
	for _, shape := range [][]int{{37, 3, 3, 3}, {proxk.ChunkSize*3 + 17, 2}, {5}, {11, 13}} {
		p := autograd.RandN(rng, shape...)
		ps = append(ps, p)
	}
	return ps
}

func setGrads(ps []*autograd.Tensor, rng *rand.Rand) {
	for _, p := range ps {
		if p.Grad == nil {
			p.Grad = make([]float32, p.Numel())
		}
		for i := range p.Grad {
			p.Grad[i] = float32(rng.NormFloat64())
		}
	}
}

func snapshot(ps []*autograd.Tensor) [][]float32 {
	var out [][]float32
	for _, p := range ps {
		out = append(out, append([]float32(nil), p.Data...))
	}
	return out
}

func sameBits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: parameter %d element %d: %g vs %g", what, i, j, a[i][j], b[i][j])
			}
		}
	}
}

type optCase struct {
	name string
	make func(ps []*autograd.Tensor) Optimizer
}

func optCases() []optCase {
	names := []string{"conv.w", "fc.w", "bn.b", "emb.w"}
	plateau := func() schedule.Schedule { return schedule.NewReduceOnPlateau(0.5, 0) }
	return []optCase{
		{"proxgen-adam-l1/2-plateau", func(ps []*autograd.Tensor) Optimizer {
			c := ProxGenAdam(0.9, 0.999, 1e-8)
			c.Schedule = plateau()
			return New(DefaultGroups(names, ps, prox.Lq(0.5), 1e-2, 1e-2, 1e-2), c)
		}},
		{"sgd-nesterov", func(ps []*autograd.Tensor) Optimizer {
			return New(DefaultGroups(nil, ps, nil, 0, 1e-4, 0.1), SGDConfig(0.9, true))
		}},
		{"proxgen-adam-l1-warmup-cosine", func(ps []*autograd.Tensor) Optimizer {
			c := ProxGenAdam(0.9, 0.999, 1e-8)
			c.Schedule = schedule.Warmup{Steps: 3, StartFactor: 0.1, Then: schedule.Cosine{T: 7, Min: 1e-4}}
			return New(DefaultGroups(names, ps, prox.L1(), 1e-2, 1e-2, 1e-2), c)
		}},
		{"sgd-onecycle-three", func(ps []*autograd.Tensor) Optimizer {
			c := SGDConfig(0.9, false)
			c.Schedule = schedule.OneCycle{Total: 9, PctStart: 0.3, ThreePhase: true}
			return New(DefaultGroups(nil, ps, nil, 0, 1e-4, 0.1), c)
		}},
		{"proxgen-adam-l0-warmup-plateau", func(ps []*autograd.Tensor) Optimizer {
			c := ProxGenAdam(0.9, 0.999, 1e-8)
			c.Schedule = schedule.Warmup{Steps: 2, StartFactor: 0.5, Then: plateau()}
			return New(DefaultGroups(names, ps, prox.L0(), 1e-3, 0, 1e-2), c)
		}},
		{"adagrad-prox-l0", func(ps []*autograd.Tensor) Optimizer {
			c := AdaGradConfig(1e-10)
			c.RegMode = RegProx
			return New(DefaultGroups(names, ps, prox.L0(), 1e-3, 0, 0.05), c)
		}},
		{"proxsgd-l1", func(ps []*autograd.Tensor) Optimizer {
			return NewProxSGD(DefaultGroups(names, ps, prox.L1(), 1e-2, 1e-3, 0.06), ProxSGDConfig{})
		}},
		{"proxgen-adam-gl21", func(ps []*autograd.Tensor) Optimizer {
			return New(DefaultGroups(names, ps, prox.GroupLasso(prox.ByFilter), 0.5, 1e-2, 1e-2), ProxGenAdam(0.9, 0.999, 1e-8))
		}},
		{"proxgen-rmsprop-gl0-input", func(ps []*autograd.Tensor) Optimizer {
			c := RMSpropConfig(0.99, 1e-8)
			c.RegMode = RegProx
			return New(DefaultGroups(names, ps, prox.GroupL0(prox.ByInputChannel), 1e-3, 0, 1e-2), c)
		}},
		{"proxgen-adam-gl21-input", func(ps []*autograd.Tensor) Optimizer {
			return New(DefaultGroups(names, ps, prox.GroupLasso(prox.ByInputChannel), 0.05, 1e-2, 1e-2), ProxGenAdam(0.9, 0.999, 1e-8))
		}},
		{"adam-subgradient-gl21-input", func(ps []*autograd.Tensor) Optimizer {
			c := AdamConfig(0.9, 0.999, 1e-8)
			c.RegMode = RegSubgradient
			return New(DefaultGroups(names, ps, prox.GroupLasso(prox.ByInputChannel), 0.1, 0, 1e-2), c)
		}},
		{"proxsgd-gl21", func(ps []*autograd.Tensor) Optimizer {
			gs := DefaultGroups(names, ps, prox.GroupLasso(prox.ByFilter), 0.3, 1e-3, 0.06)
			gs[0].Clip = 1.5
			return NewProxSGD(gs, ProxSGDConfig{})
		}},
		{"binaryconnect-adam", func(ps []*autograd.Tensor) Optimizer {
			gs := DefaultGroups(names, ps, nil, 0, 0, 1e-2)
			return NewBinaryConnect(New(gs, AdamConfig(0.9, 0.999, 1e-8)), gs[0])
		}},
		{"binaryconnect-scaled-sgd", func(ps []*autograd.Tensor) Optimizer {
			gs := DefaultGroups(names, ps, nil, 0, 5e-4, 1e-2)
			return NewScaledBinaryConnect(New(gs, SGDConfig(0.9, false)), gs[0])
		}},
		{"lazy-proxgen-sgd-binw", func(ps []*autograd.Tensor) Optimizer {
			c := SGDConfig(0.9, false)
			c.RegMode = RegProx
			gs := DefaultGroups(names, ps, prox.BinaryWAt(1, 0.3), 2, 5e-4, 1e-2)
			return NewLazyProx(New(gs, c), gs[0])
		}},
		{"lazy-proxgen-adam-l12", func(ps []*autograd.Tensor) Optimizer {
			gs := DefaultGroups(names, ps, prox.Lq(0.5), 0.5, 1e-3, 1e-2)
			return NewLazyProx(New(gs, ProxGenAdam(0.9, 0.999, 1e-8)), gs[0])
		}},
		{"lazy-proxgen-adam-gl21-input", func(ps []*autograd.Tensor) Optimizer {
			gs := DefaultGroups(names, ps, prox.GroupLasso(prox.ByInputChannel), 0.05, 1e-3, 1e-2)
			return NewLazyProx(New(gs, ProxGenAdam(0.9, 0.999, 1e-8)), gs[0])
		}},
	}
}

// TestResumeBitIdentical saves the state after some steps, restores it
// into a fresh optimizer over copies of the parameters and checks that
// both continue identically, bit for bit.
func TestResumeBitIdentical(t *testing.T) {
	for _, oc := range optCases() {
		t.Run(oc.name, func(t *testing.T) {
			ps := bigParams(1)
			o := oc.make(ps)
			src := rand.NewPCG(2, 3)
			rng := rand.New(src)
			observe := func(o Optimizer, k int) {
				if pg, ok := o.(*ProxGen); ok {
					s := pg.cfg.Schedule
					if w, ok := s.(schedule.Warmup); ok {
						s = w.Then
					}
					if r, ok := s.(*schedule.ReduceOnPlateau); ok {
						r.Observe(float64(k % 3)) // non-monotone: reduces sometimes
					}
				}
			}
			for k := range 5 {
				setGrads(ps, rng)
				o.Step()
				observe(o, k)
			}
			st := o.State()
			saved := snapshot(ps)
			srcState := *src
			// Continue the original.
			for k := 5; k < 9; k++ {
				setGrads(ps, rng)
				o.Step()
				observe(o, k)
			}
			// Rebuild from the saved parameters and state.
			ps2 := bigParams(99)
			for i, p := range ps2 {
				copy(p.Data, saved[i])
			}
			o2 := oc.make(ps2)
			if err := o2.LoadState(st); err != nil {
				t.Fatal(err)
			}
			// BinaryConnect rewrites Data from its real weights; others
			// must hold the saved values.
			if !strings.HasPrefix(oc.name, "binaryconnect") {
				sameBits(t, "restored params", saved, snapshot(ps2))
			}
			rng2 := rand.New(&srcState)
			for k := 5; k < 9; k++ {
				setGrads(ps2, rng2)
				o2.Step()
				observe(o2, k)
			}
			if o2.Steps() != o.Steps() {
				t.Fatalf("steps %d vs %d", o2.Steps(), o.Steps())
			}
			sameBits(t, "after resume", snapshot(ps), snapshot(ps2))
		})
	}
}

func TestLoadStateErrors(t *testing.T) {
	ps := bigParams(1)
	o := New(DefaultGroups(nil, ps, prox.L1(), 1e-2, 0, 1e-2), ProxGenAdam(0.9, 0.999, 1e-8))
	setGrads(ps, rand.New(rand.NewPCG(1, 1)))
	o.Step()
	good := o.State()
	bad := NewState()
	for k, v := range good.Tensors {
		bad.Tensors[k] = v
	}
	bad.Ints["step"] = 7
	key := good.Keys()[0]
	bad.Tensors[key] = bad.Tensors[key][:3]
	o2 := New(DefaultGroups(nil, bigParams(1), prox.L1(), 1e-2, 0, 1e-2), ProxGenAdam(0.9, 0.999, 1e-8))
	if err := o2.LoadState(bad); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("short tensor: err = %v", err)
	}
	if o2.Steps() != 0 {
		t.Fatalf("failed load changed the step counter")
	}
	delete(bad.Tensors, key)
	if err := o2.LoadState(bad); err == nil {
		t.Fatal("missing tensor accepted")
	}
	if err := o2.LoadState(NewState()); err == nil {
		t.Fatal("empty state accepted")
	}
	if err := o2.LoadState(good); err != nil {
		t.Fatal(err)
	}
}

// TestDeterministicAcrossWorkers runs the same steps with 1 and 3
// workers.
func TestDeterministicAcrossWorkers(t *testing.T) {
	for _, oc := range optCases() {
		run := func(workers int) [][]float32 {
			old := parallel.SetWorkers(workers)
			defer parallel.SetWorkers(old)
			ps := bigParams(4)
			o := oc.make(ps)
			rng := rand.New(rand.NewPCG(5, 5))
			for range 3 {
				setGrads(ps, rng)
				o.Step()
			}
			return snapshot(ps)
		}
		sameBits(t, oc.name, run(1), run(3))
	}
}

func TestGroupsAndFlags(t *testing.T) {
	w := autograd.New(4, 3)
	b := autograd.New(4)
	c := autograd.New(2, 1, 3, 3)
	gs := DefaultGroups([]string{"w", "b", "c"}, []*autograd.Tensor{w, b, c}, prox.L1(), 0.1, 0.01, 1e-3)
	if len(gs) != 2 || len(gs[0].Params) != 2 || gs[0].Reg == nil || gs[1].Reg != nil || gs[1].Names[0] != "b" {
		t.Fatalf("DefaultGroups split wrong: %+v %+v", gs[0], gs[1])
	}
	copy(w.Data, []float32{1, -2, 0, 0, 0.0005, 0, 0, 0, 0, 0, 0, 0})
	b.Data[0] = 5
	if got := Penalty(gs); !opttest.Near(got, 0.1*3.0005, 1e-8, 0) {
		t.Errorf("Penalty = %g", got)
	}
	zero, a, _ := Sparsity(gs)
	if !opttest.Near(zero, 27.0/30, 1e-12, 0) || !opttest.Near(a, 28.0/30, 1e-12, 0) {
		t.Errorf("Sparsity = %g %g", zero, a)
	}

	// Frozen groups and parameters without a gradient are skipped; Clip
	// clamps.
	p, q, r := param(3, -3), param(1), param(0.5)
	p.Grad = []float32{-100, 100}
	r.Grad = []float32{1}
	g1 := &Group{Params: []*autograd.Tensor{p}, LR: 1, Clip: 2}
	g2 := &Group{Params: []*autograd.Tensor{q, r}, LR: 1, Frozen: true}
	o := New([]*Group{g1, g2}, SGDConfig(0, false))
	o.Step()
	if p.Data[0] != 2 || p.Data[1] != -2 || q.Data[0] != 1 || r.Data[0] != 0.5 {
		t.Fatalf("clip/frozen: %v %v %v", p.Data, q.Data, r.Data)
	}
	g2.Frozen = false
	o.Step()
	if q.Data[0] != 1 || r.Data[0] != -0.5 {
		t.Fatalf("nil grad / unfrozen: %v %v", q.Data, r.Data)
	}
	o.ZeroGrad()
	if p.Grad[0] != 0 || r.Grad[0] != 0 {
		t.Fatal("ZeroGrad left gradients")
	}

	for _, f := range []func(){
		func() { New([]*Group{{Params: []*autograd.Tensor{p, q}, Names: []string{"a", "a"}}}, Config{}) },
		func() {
			New([]*Group{{Params: []*autograd.Tensor{p}, Reg: prox.L0(), Lambda: 1}}, Config{RegMode: RegSubgradient})
		},
		func() { New(nil, Config{Momentum: Momentum{Rho: 1}}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("invalid configuration accepted")
				}
			}()
			f()
		}()
	}
}

// TestProxSGDReference checks Prox-SGD against its update written out in
// float64, and its two behaviours the paper points out.
func TestProxSGDReference(t *testing.T) {
	theta := []float64{1, -0.5, 0.02, 0}
	grads := [][]float64{{0.3, -0.2, 0.5, 0.1}, {-0.1, 0.4, 0.2, -0.3}, {0.2, 0.1, -0.4, 0.05}}
	const lam, eps0, rho0, beta, delta, wd = 0.1, 0.5, 0.9, 0.999, 1e-8, 0.2
	data := make([]float32, len(theta))
	for i, v := range theta {
		data[i] = float32(v)
	}
	p := param(data...)
	o := NewProxSGD([]*Group{{Params: []*autograd.Tensor{p}, Reg: prox.L1(), Lambda: lam, LR: eps0, WeightDecay: wd}}, ProxSGDConfig{})
	th := append([]float64(nil), theta...)
	v := make([]float64, len(th))
	r := make([]float64, len(th))
	for k, g := range grads {
		tt := float64(k + 1)
		e := eps0 / math.Sqrt(tt+4)
		rho := rho0 / math.Sqrt(tt+4)
		for i := range th {
			th[i] *= 1 - e*wd
			v[i] = (1-rho)*v[i] + rho*g[i]
			r[i] = beta*r[i] + (1-beta)*g[i]*g[i]
			tau := math.Sqrt(r[i]/(1-math.Pow(beta, tt+1))) + delta
			x := th[i] - v[i]/tau
			x = math.Copysign(math.Max(math.Abs(x)-lam/tau, 0), x)
			th[i] += e * (x - th[i])
		}
		p.Grad = make([]float32, len(g))
		for i, x := range g {
			p.Grad[i] = float32(x)
		}
		o.Step()
	}
	for i := range th {
		if !opttest.Near(float64(p.Data[i]), th[i], 1e-5, 1e-7) {
			t.Fatalf("coordinate %d: %g, reference %g", i, p.Data[i], th[i])
		}
	}
	// From θ = 0 with |v| <= λ the iterate stays exactly zero; from a
	// random start the convex combination never reaches exact zero.
	z := param(0, 0, 0)
	oz := NewProxSGD([]*Group{{Params: []*autograd.Tensor{z}, Reg: prox.L1(), Lambda: 1, LR: 0.5}}, ProxSGDConfig{})
	nz := param(0.3, -0.2, 0.01)
	on := NewProxSGD([]*Group{{Params: []*autograd.Tensor{nz}, Reg: prox.L1(), Lambda: 1, LR: 0.5}}, ProxSGDConfig{})
	for range 50 {
		z.Grad = []float32{0.5, -0.9, 0.1}
		nz.Grad = []float32{0.5, -0.9, 0.1}
		oz.Step()
		on.Step()
	}
	for i := range z.Data {
		if z.Data[i] != 0 {
			t.Errorf("zero start: coordinate %d left zero: %g", i, z.Data[i])
		}
		if nz.Data[i] == 0 {
			t.Errorf("random start: coordinate %d reached exact zero", i)
		}
	}
}

func TestBinaryConnect(t *testing.T) {
	w := param(0.5, -0.2, 0, 1.7)
	g := &Group{Params: []*autograd.Tensor{w}, LR: 0.1}
	bc := NewBinaryConnect(New([]*Group{g}, SGDConfig(0, false)), g)
	if fmt.Sprint(w.Data) != "[1 -1 1 1]" {
		t.Fatalf("binarised data %v", w.Data)
	}
	w.Grad = []float32{1, -3, 2, -1}
	bc.Step()
	// Real weights: clip(0.5, -0.2, 0, 1) − 0.1·g, clipped: 0.4, 0.1, −0.2, 1.
	want := []float32{0.4, 0.1, -0.2, 1}
	for i, v := range bc.Real(0) {
		if !opttest.Near(float64(v), float64(want[i]), 1e-6, 0) {
			t.Fatalf("real weights %v, want %v", bc.Real(0), want)
		}
	}
	if fmt.Sprint(w.Data) != "[1 1 -1 1]" {
		t.Fatalf("data after step %v", w.Data)
	}
}

// TestScaledBinaryConnect checks the ±s binarisation, s the mean |w| of
// the real weights after each step, and the lookup of a parameter's scale.
func TestScaledBinaryConnect(t *testing.T) {
	w := param(0.5, -0.2, 0, 1.7)
	g := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w}, LR: 0.1}
	bc := NewScaledBinaryConnect(New([]*Group{g}, SGDConfig(0, false)), g)
	// Real weights 0.5, −0.2, 0, 1 (clipped): s = 1.7/4 = 0.425.
	if fmt.Sprint(w.Data) != "[0.425 -0.425 0.425 0.425]" || bc.Scale(0) != 0.425 {
		t.Fatalf("binarised data %v, scale %v", w.Data, bc.Scale(0))
	}
	w.Grad = []float32{1, -3, 2, -1}
	bc.Step()
	// Real weights 0.4, 0.1, −0.2, 1: s = 1.7/4 again, signs + + − +.
	if fmt.Sprint(w.Data) != "[0.425 0.425 -0.425 0.425]" {
		t.Fatalf("data after step %v", w.Data)
	}
	if i, ok := bc.Binarised("w"); !ok || i != 0 {
		t.Fatalf(`Binarised("w") = %d, %v`, i, ok)
	}
	if _, ok := bc.Binarised("b"); ok {
		t.Fatal(`Binarised("b") found a parameter that is not binarised`)
	}
}

func TestHardQuantizeAndProxQuant(t *testing.T) {
	// Original ProxQuant: Adam step, then the W-shaped ℓ1 prox with
	// threshold α·λ regardless of the preconditioner, then clipping.
	w := param(0.9, -0.3, 1.4)
	w.Grad = []float32{0.01, 0.01, -0.01}
	g := &Group{Params: []*autograd.Tensor{w}, Reg: prox.BinaryW(1), Lambda: 0.5, LR: 0.1, Clip: 1}
	New([]*Group{g}, ProxQuantConfig(0.9, 0.999, 0)).Step()
	// z = 0.8, −0.4, 1.5; shrink toward ±1 by 0.05: 0.85, −0.45, 1.45 → clip 1.
	want := []float32{0.85, -0.45, 1}
	for i, v := range w.Data {
		if !opttest.Near(float64(v), float64(want[i]), 1e-6, 0) {
			t.Fatalf("ProxQuant: %v, want %v", w.Data, want)
		}
	}
	HardQuantize(g)
	if fmt.Sprint(w.Data) != "[1 -1 1]" || !g.Frozen {
		t.Fatalf("HardQuantize: %v frozen=%v", w.Data, g.Frozen)
	}
	// With its wells at ±s, the weights go to ±s.
	w = param(0.2, -0.01, 0, 3)
	g = &Group{Params: []*autograd.Tensor{w}, Reg: prox.BinaryWAt(1, 0.125)}
	HardQuantize(g)
	if fmt.Sprint(w.Data) != "[0.125 -0.125 0.125 0.125]" || !g.Frozen {
		t.Fatalf("HardQuantize at ±0.125: %v frozen=%v", w.Data, g.Frozen)
	}
}
