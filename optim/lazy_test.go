package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim/internal/opttest"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// TestLazyProxByHand follows two plain SGD steps (α = 0.1, then 0.05 by
// the schedule) with the ℓ1 prox applied lazily: θ = soft(z, λ·Σα).
func TestLazyProxByHand(t *testing.T) {
	w := param(0.5, -0.2, 0.04, 1)
	g := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w}, Reg: prox.L1(), Lambda: 1, LR: 0.1}
	c := SGDConfig(0, false)
	c.RegMode = RegProx
	c.Schedule = schedule.MultiStep{Milestones: []int{1}, Gamma: 0.5}
	l := NewLazyProx(New([]*Group{g}, c), g)
	if fmt.Sprint(w.Data) != "[0.5 -0.2 0.04 1]" {
		t.Fatalf("θ_0 = %v, want z_0", w.Data)
	}
	check := func(step string, got, want []float32) {
		t.Helper()
		for i := range want {
			if !opttest.Near(float64(got[i]), float64(want[i]), 1e-6, 0) {
				t.Fatalf("%s: %v, want %v", step, got, want)
			}
		}
	}
	w.Grad = []float32{1, -1, 0, 2}
	l.Step()
	// z = 0.4, −0.1, 0.04, 0.8; soft threshold 0.1.
	check("z_1", l.Real(0), []float32{0.4, -0.1, 0.04, 0.8})
	check("θ_1", w.Data, []float32{0.3, 0, 0, 0.7})
	// The gradient at θ moves z; the coordinate held at 0 moves with it.
	w.Grad = []float32{0, -2, -2, 0}
	l.Step()
	// α_2 = 0.05: z = 0.4, 0, 0.14, 0.8; threshold 0.15.
	check("z_2", l.Real(0), []float32{0.4, 0, 0.14, 0.8})
	check("θ_2", w.Data, []float32{0.25, 0, 0, 0.65})
	if !opttest.Near(l.Eta(0), 0.15, 1e-15, 0) {
		t.Fatalf("η_2 = %v, want 0.15", l.Eta(0))
	}
	if i, ok := l.Lazy("w"); !ok || i != 0 {
		t.Fatalf(`Lazy("w") = %d, %v`, i, ok)
	}
	if g.Lambda != 1 {
		t.Fatalf("λ after the step %v, want 1 restored", g.Lambda)
	}
}

// TestLazyProxZeroLambdaIsInner checks that with λ = 0 the lazy form is
// the inner optimizer, bit for bit, and that a group left out of the
// lazy set keeps its eager prox.
func TestLazyProxZeroLambdaIsInner(t *testing.T) {
	names := []string{"conv.weight", "conv.bias", "fc.weight", "fc.bias"}
	for _, lambda := range []float64{0, 0.3} {
		ps1, ps2 := bigParams(1), bigParams(1)
		mk := func(ps []*autograd.Tensor) ([]*Group, *ProxGen) {
			gs := DefaultGroups(names, ps, prox.L1(), lambda, 1e-3, 1e-2)
			return gs, New(gs, ProxGenAdam(0.9, 0.999, 1e-8))
		}
		_, plain := mk(ps1)
		gs2, inner := mk(ps2)
		var o Optimizer = inner
		if lambda == 0 {
			o = NewLazyProx(inner, gs2[0])
		} else {
			o = NewLazyProx(inner) // no lazy group: ProxGen as it is
		}
		r1, r2 := rand.New(rand.NewPCG(4, 5)), rand.New(rand.NewPCG(4, 5))
		for range 4 {
			setGrads(ps1, r1)
			setGrads(ps2, r2)
			plain.Step()
			o.Step()
		}
		sameBits(t, fmt.Sprintf("λ %v", lambda), snapshot(ps1), snapshot(ps2))
	}
}

// TestLazyProxSignsChange contrasts the two forms on a binary weight held
// at +s by the W-shaped ℓ1: with a gradient of constant sign smaller than
// the pull, ProxGen keeps it at +s for ever, while the lazy form's
// iterate crosses zero and the weight goes to −s.
func TestLazyProxSignsChange(t *testing.T) {
	const s, lambda, lr = 0.5, 1.0, 0.1
	run := func(lazy bool) []float32 {
		w := param(s)
		g := &Group{Params: []*autograd.Tensor{w}, Reg: prox.BinaryWAt(1, s), Lambda: lambda, LR: lr}
		c := SGDConfig(0, false)
		c.RegMode = RegProx
		var o Optimizer = New([]*Group{g}, c)
		if lazy {
			o = NewLazyProx(o.(*ProxGen), g)
		}
		for range 20 {
			// A step of 0.04 = 0.08·s, under each step's pull of αλ = 0.1
			// (in units of s).
			w.Grad = []float32{0.4}
			o.Step()
		}
		return w.Data
	}
	if got := run(false); got[0] != s {
		t.Fatalf("eager ProxGen: %v, want the weight held at +%v", got, s)
	}
	// z after 20 steps: 0.5 − 20·0.04 = −0.3, within ηλ = 2 (units of s) of −s.
	if got := run(true); got[0] != -s {
		t.Fatalf("lazy: %v, want −%v", got, s)
	}
}

// TestLazyProxFrozen checks that a frozen lazy group (after HardQuantize)
// keeps its Data and real iterate.
func TestLazyProxFrozen(t *testing.T) {
	w := param(0.3, -0.7)
	g := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w}, Reg: prox.BinaryWAt(1, 0.5), Lambda: 0.1, LR: 0.1}
	c := SGDConfig(0, false)
	c.RegMode = RegProx
	l := NewLazyProx(New([]*Group{g}, c), g)
	w.Grad = []float32{1, 1}
	l.Step()
	HardQuantize(g)
	z := append([]float32(nil), l.Real(0)...)
	for range 3 {
		w.Grad = []float32{-5, 5}
		l.Step()
	}
	if fmt.Sprint(w.Data) != "[0.5 -0.5]" || fmt.Sprint(l.Real(0)) != fmt.Sprint(z) {
		t.Fatalf("frozen: data %v real %v, want [0.5 -0.5] and %v", w.Data, l.Real(0), z)
	}
}

// TestLazyProxGroups checks a group regularizer applied lazily: θ is the
// group prox of z under η = Σα, and a zeroed group comes back when its
// iterate grows.
func TestLazyProxGroups(t *testing.T) {
	w := autograd.FromSlice([]float32{1, 1, 0.1, -0.1}, 2, 2) // filters (1, 1) and (0.1, −0.1)
	g := &Group{Params: []*autograd.Tensor{w}, Reg: prox.GroupL0(prox.ByFilter), Lambda: 0.5, LR: 0.1}
	c := SGDConfig(0, false)
	c.RegMode = RegProx
	l := NewLazyProx(New([]*Group{g}, c), g)
	// Zero a group when Σz²/(2η) ≤ λ: η = 0.1 after one step, so Σz² ≤ 0.1.
	w.Grad = []float32{0, 0, 0, 0}
	l.Step()
	if fmt.Sprint(w.Data) != "[1 1 0 0]" {
		t.Fatalf("after one step %v, want the small filter zeroed", w.Data)
	}
	// Its iterate grows by 0.1 a step while η does: after k more steps
	// z = (0.1 + 0.1k, −0.1) is zeroed while Σz² ≤ η = 0.1(1 + k) (k = 5:
	// 0.37 ≤ 0.6) and back from k = 9 on (1.01 > 1.0; k = 10: 1.22 > 1.1).
	for range 10 {
		w.Grad = []float32{0, 0, -1, 0}
		l.Step()
	}
	if w.Data[2] == 0 || w.Data[3] == 0 {
		t.Fatalf("after eleven steps %v, want the grown filter back", w.Data)
	}
}

func TestLazyProxRejectsCouplings(t *testing.T) {
	w := autograd.FromSlice([]float32{1, 2, 3, 4}, 2, 2)
	gamma := param(1, 1)
	g := &Group{Params: []*autograd.Tensor{w}, Reg: prox.GroupLasso(prox.ByFilter), Lambda: 0.1, LR: 0.1}
	other := &Group{Params: []*autograd.Tensor{gamma}, LR: 0.1}
	Couple([]*Group{g, other}, w, gamma)
	opt := New([]*Group{g, other}, ProxGenAdam(0.9, 0.999, 1e-8))
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a group with couplings")
		}
	}()
	NewLazyProx(opt, g)
}

// TestLazyProxBinaryLimitIsBinaryConnect checks the W-shaped limit λ → ∞:
// the lazy form computes with sign(z) and steps z with that gradient,
// which is BinaryConnect at ±1 (bit for bit while no clipping happens).
func TestLazyProxBinaryLimitIsBinaryConnect(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	init := make([]float32, 64)
	for i := range init {
		init[i] = float32(rng.Float64() - 0.5)
	}
	w1, w2 := param(init...), param(init...)
	g1 := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w1}, LR: 0.05}
	g2 := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w2}, Reg: prox.BinaryW(1), Lambda: 1e12, LR: 0.05}
	bc := NewBinaryConnect(New([]*Group{g1}, SGDConfig(0.9, false)), g1)
	c := SGDConfig(0.9, false)
	c.RegMode = RegProx
	lazy := NewLazyProx(New([]*Group{g2}, c), g2)
	flips := 0
	for step := range 30 {
		grad := make([]float32, len(init))
		for i := range grad {
			grad[i] = float32(0.02 * rng.NormFloat64()) // small: no real weight reaches the clip at ±1
		}
		before := append([]float32(nil), w1.Data...)
		w1.Grad, w2.Grad = grad, append([]float32(nil), grad...)
		bc.Step()
		lazy.Step()
		sameBits(t, fmt.Sprintf("step %d data", step), [][]float32{w1.Data}, [][]float32{w2.Data})
		sameBits(t, fmt.Sprintf("step %d real", step), [][]float32{bc.Real(0)}, [][]float32{lazy.Real(0)})
		for i := range before {
			if before[i] != w1.Data[i] {
				flips++
			}
		}
	}
	if flips == 0 {
		t.Fatal("no sign changed: the test checks nothing")
	}
}

// TestGroupProxMatchesOptimizer checks prox.GroupProx against the
// optimizer's own group maps: a ProxGen step without momentum, gradient
// or preconditioner is the prox of αλR alone.
func TestGroupProxMatchesOptimizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	shape := []int{20, 8, 3, 3} // 20 filters: a partial last block
	// λ near each kind's typical group (Σz²/2α for ℓ0, ‖z‖/α for the
	// lasso), so that some groups go and some stay.
	for _, tc := range []struct {
		r      prox.GroupRegularizer
		lambda float32
	}{
		{prox.GroupL0(prox.ByFilter), 32}, {prox.GroupL0(prox.ByInputChannel), 81}, {prox.GroupL0(prox.ByBlock), 6},
		{prox.GroupLasso(prox.ByFilter), 25}, {prox.GroupLasso(prox.ByInputChannel), 40}, {prox.GroupLasso(prox.ByBlock), 10},
		{prox.GroupHalf(prox.ByFilter), 20}, {prox.GroupHalf(prox.ByInputChannel), 46}, {prox.GroupHalf(prox.ByBlock), 7},
	} {
		r, lambda := tc.r, tc.lambda
		z := make([]float32, 20*72)
		for i := range z {
			z[i] = float32(0.3 * rng.NormFloat64())
		}
		w := autograd.FromSlice(append([]float32(nil), z...), shape...)
		w.Grad = make([]float32, len(z))
		const lr = 0.1
		g := &Group{Params: []*autograd.Tensor{w}, Reg: r, Lambda: float64(lambda), LR: lr}
		c := SGDConfig(0, false)
		c.RegMode = RegProx
		New([]*Group{g}, c).Step()
		got := make([]float32, len(z))
		etas := make([]float32, len(z))
		for i := range etas {
			etas[i] = lr
		}
		prox.GroupProx(r, got, z, shape, etas, lambda, nil)
		zeros := 0
		for i := range got {
			if !opttest.Near(float64(got[i]), float64(w.Data[i]), 1e-6, 1e-7) {
				t.Fatalf("%v: element %d: GroupProx %v, optimizer %v", r, i, got[i], w.Data[i])
			}
			if got[i] == 0 {
				zeros++
			}
		}
		if zeros == 0 || zeros == len(z) {
			t.Fatalf("%v: %d of %d zero: the test checks nothing", r, zeros, len(z))
		}
		scratch := prox.GroupProx(r, got, z, shape, etas, lambda, nil)
		if a := testing.AllocsPerRun(10, func() { scratch = prox.GroupProx(r, got, z, shape, etas, lambda, scratch) }); a != 0 {
			t.Errorf("%v: GroupProx with its returned scratch allocates %v times a call", r, a)
		}
	}
}

// TestLazyProxFirstStepIsEager checks the lazy form against ProxGen's own
// (eager) step: from θ_0 = z_0 the first lazy step maps z_1 = θ_0 − η_1 m_1
// under η_1, which is the eager update, for every metric — Adam's
// per-coordinate η = α/(C + δ), the identity's and ProxQuant's Euclidean
// α — and for element-wise and group regularizers.
func TestLazyProxFirstStepIsEager(t *testing.T) {
	shape := []int{20, 8, 3, 3}
	configs := map[string]func() Config{
		"proxgen-adam": func() Config { return ProxGenAdam(0.9, 0.999, 1e-8) },
		"proxgen-sgd": func() Config {
			c := SGDConfig(0.9, false)
			c.RegMode = RegProx
			return c
		},
		"proxquant": func() Config { return ProxQuantConfig(0.9, 0.999, 1e-8) },
		"adagrad": func() Config {
			c := AdaGradConfig(1e-10)
			c.RegMode = RegProx
			return c
		},
	}
	regs := []struct {
		r      prox.Regularizer
		lambda float64
	}{
		{prox.L1(), 3}, {prox.GroupL0(prox.ByBlock), 2}, {prox.GroupLasso(prox.ByFilter), 40}, {prox.GroupHalf(prox.ByBlock), 4},
	}
	for name, cfg := range configs {
		for _, rc := range regs {
			rng := rand.New(rand.NewPCG(5, 6))
			theta := make([]float32, 20*72)
			grad := make([]float32, len(theta))
			for i := range theta {
				theta[i] = float32(0.05 * rng.NormFloat64())
				grad[i] = float32(rng.NormFloat64())
			}
			run := func(lazy bool) []float32 {
				w := autograd.FromSlice(append([]float32(nil), theta...), shape...)
				w.Grad = append([]float32(nil), grad...)
				g := &Group{Params: []*autograd.Tensor{w}, Reg: rc.r, Lambda: rc.lambda, LR: 0.01}
				o := New([]*Group{g}, cfg())
				if lazy {
					NewLazyProx(o, g).Step()
				} else {
					o.Step()
				}
				return w.Data
			}
			eager, lazy := run(false), run(true)
			zeros := 0
			for i := range eager {
				if !opttest.Near(float64(lazy[i]), float64(eager[i]), 1e-5, 1e-7) {
					t.Fatalf("%s, %v: element %d: lazy %v, eager %v", name, rc.r, i, lazy[i], eager[i])
				}
				if eager[i] == 0 {
					zeros++
				}
			}
			if zeros == 0 || zeros == len(eager) {
				t.Fatalf("%s, %v: %d of %d zero: the test checks nothing", name, rc.r, zeros, len(eager))
			}
		}
	}
}

// TestLazyProxAdamByHand follows two Adam steps (no momentum, β2 = 0.5,
// bias-corrected) of one coordinate with the ℓ1 prox applied lazily: each
// coordinate's threshold is λ·Σ α/(C_t + δ), the sum of its own steps.
func TestLazyProxAdamByHand(t *testing.T) {
	w := param(0.3, 0.3)
	g := &Group{Names: []string{"w"}, Params: []*autograd.Tensor{w}, Reg: prox.L1(), Lambda: 1, LR: 0.1}
	c := ProxGenAdam(0, 0.5, 0)
	l := NewLazyProx(New([]*Group{g}, c), g)
	// Step 1: v = 0.5·g², v̂ = g², C = |g|: z moves by α·sign(g), η = α/|g|.
	w.Grad = []float32{1, 4}
	l.Step()
	// z = 0.2, 0.2; η = 0.1, 0.025: θ = 0.1, 0.175.
	want := func(step string, got []float32, v ...float64) {
		t.Helper()
		for i := range v {
			if !opttest.Near(float64(got[i]), v[i], 1e-6, 1e-7) {
				t.Fatalf("%s: %v, want %v", step, got, v)
			}
		}
	}
	want("z_1", l.Real(0), 0.2, 0.2)
	want("θ_1", w.Data, 0.1, 0.175)
	// Step 2, gradient 2 for both: v = 0.25·g1² + 0.5·4, v̂ = v/0.75.
	w.Grad = []float32{2, 2}
	l.Step()
	c1 := math.Sqrt((0.25*1 + 0.5*4) / 0.75)  // √3
	c2 := math.Sqrt((0.25*16 + 0.5*4) / 0.75) // √8
	z1, z2 := 0.2-0.1*2/c1, 0.2-0.1*2/c2
	e1, e2 := 0.1+0.1/c1, 0.025+0.1/c2
	soft := func(z, e float64) float64 { return math.Copysign(math.Max(math.Abs(z)-e, 0), z) }
	want("η_2", l.Etas(0), e1, e2)
	want("z_2", l.Real(0), z1, z2)
	want("θ_2", w.Data, soft(z1, e1), soft(z2, e2))
	if w.Data[0] != 0 || w.Data[1] == 0 {
		t.Fatalf("θ_2 = %v: want the first coordinate at zero and the second not (the test's premise)", w.Data)
	}
}

// TestLazyProxGroupsOwnEta checks that under the identity metric each lazy
// group's parameters take their own group's Σ α over steps and schedules:
// θ = soft(z, λ·Σα) with α the group's step, for tensors of unequal sizes
// stepped alternately, so that a step size left over from another group
// would show.
func TestLazyProxGroupsOwnEta(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	mk := func(n int) *autograd.Tensor {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return autograd.FromSlice(x, n)
	}
	a, b, c := mk(3), mk(17), mk(5)
	ga := &Group{Params: []*autograd.Tensor{a, b}, Reg: prox.L1(), Lambda: 0.5, LR: 0.1}
	gb := &Group{Params: []*autograd.Tensor{c}, Reg: prox.L1(), Lambda: 2, LR: 0.01}
	cfg := SGDConfig(0, false)
	cfg.RegMode = RegProx
	cfg.Schedule = schedule.MultiStep{Milestones: []int{2}, Gamma: 0.5}
	l := NewLazyProx(New([]*Group{ga, gb}, cfg), ga, gb)
	sums := []float64{0, 0}
	for step := range 4 {
		for _, p := range []*autograd.Tensor{a, b, c} {
			p.Grad = make([]float32, len(p.Data))
			for i := range p.Grad {
				p.Grad[i] = float32(rng.NormFloat64())
			}
		}
		l.Step()
		scale := 1.0
		if step >= 2 {
			scale = 0.5
		}
		sums[0] += 0.1 * scale
		sums[1] += 0.01 * scale
		for i, p := range []*autograd.Tensor{a, b, c} {
			k, lambda := 0, 0.5
			if i == 2 {
				k, lambda = 1, 2
			}
			th := lambda * sums[k]
			for j, z := range l.Real(i) {
				want := math.Copysign(max(0, math.Abs(float64(z))-th), float64(z))
				if !opttest.Near(float64(p.Data[j]), want, 1e-6, 1e-7) {
					t.Fatalf("step %d, parameter %d[%d]: θ %v, want soft(%v, %v) = %v", step, i, j, p.Data[j], z, th, want)
				}
			}
		}
	}
}
