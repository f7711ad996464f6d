package optim

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// ProxSGDConfig configures Prox-SGD (Yang et al., ICLR 2020). The zero
// value is the official code's method: ε_t = ε0/sqrt(t+4) with ε0 the
// group's LR, ρ_t = 0.9/sqrt(t+4), and the Adam preconditioner
// τ_t = sqrt(r_t/(1−β^(t+1))) + δ with β = 0.999, δ = 1e-8 (the official
// code's bias correction is one step ahead), for t = 1, 2, ....
type ProxSGDConfig struct {
	// Precond builds τ_t; nil means AdamPrecond{Beta: 0.999, Delta: 1e-8,
	// BiasCorrection: true, StepOffset: 1}.
	Precond Preconditioner
	// Eps gives ε_t from each group's LR; nil means InvSqrt{Offset: 4}.
	Eps schedule.Schedule
	// Rho gives ρ_t, the weight of the new gradient in v_t, from Rho0;
	// nil means InvSqrt{Offset: 4}. (Prox-SGD's ρ weights the new
	// gradient; ProxGen's momentum ρ weights the old estimate, so
	// ProxGen's ρ = 0.9 is Prox-SGD's Constant ρ_t = 0.1.)
	Rho schedule.Schedule
	// Rho0 is the base of the Rho schedule; 0 means 0.9.
	Rho0 float64
	// ScaledGradient scales the gradient term of the subproblem by ε_t
	// but not the regularizer: x̂_t = prox^{τ_t}_{λR}(θ_t − ε_t v_t/τ_t).
	// This is not Prox-SGD as published; it is the reading under which
	// the ProxGen paper's Lasso figures come out (a zero start stays at
	// zero, because the threshold λ/τ_t lacks the step size while the
	// gradient step has it). See docs/lasso.md.
	ScaledGradient bool
}

// ProxSGD is the two-stage Prox-SGD update: the quadratic subproblem is
// solved without the step size,
//
//	v_t = (1 − ρ_t) v_{t−1} + ρ_t g_t
//	x̂_t = prox^{τ_t}_{λR}(θ_t − v_t/τ_t)   (η = 1/τ_t per coordinate)
//	θ_{t+1} = θ_t + ε_t (x̂_t − θ_t),
//
// the paper's equation (12). A group's WeightDecay is applied first as
// θ ← (1 − ε_t ζ) θ, and a group's Clip clamps x̂_t (the official code's
// clip bounds). Because θ_{t+1} is a convex combination, a coordinate
// reaches exactly zero only if ε_t = 1 or it was zero already.
type ProxSGD struct {
	cfg    ProxSGDConfig
	groups []*Group
	t      int
	slots  []slot
	segs   []segment
	gwork  []groupWork
}

// NewProxSGD returns a Prox-SGD optimizer over groups.
func NewProxSGD(groups []*Group, cfg ProxSGDConfig) *ProxSGD {
	if cfg.Precond == nil {
		cfg.Precond = AdamPrecond{Beta: 0.999, Delta: 1e-8, BiasCorrection: true, StepOffset: 1}
	}
	if cfg.Eps == nil {
		cfg.Eps = schedule.InvSqrt{Offset: 4}
	}
	if cfg.Rho == nil {
		cfg.Rho = schedule.InvSqrt{Offset: 4}
	}
	if cfg.Rho0 == 0 {
		cfg.Rho0 = 0.9
	}
	o := &ProxSGD{cfg: cfg, groups: groups}
	seen := map[string]bool{}
	for gi, g := range groups {
		if g.Names != nil && len(g.Names) != len(g.Params) {
			panic(fmt.Sprintf("optim.NewProxSGD: group %d has %d names for %d parameters", gi, len(g.Names), len(g.Params)))
		}
		for j, p := range g.Params {
			name := g.name(gi, j)
			if seen[name] {
				panic(fmt.Sprintf("optim.NewProxSGD: duplicate parameter name %q", name))
			}
			seen[name] = true
			s := slot{group: gi, p: p, name: name, n: p.Numel(), m: make([]float32, p.Numel())}
			if cfg.Precond.Stateful() {
				s.s = make([]float32, s.n)
			}
			if gr, ok := g.Reg.(prox.GroupRegularizer); ok {
				// aux holds x̂_t and then η for the whole tensor.
				s.grouped = true
				s.aux = make([]float32, 2*s.n)
				o.gwork = appendGroupWork(o.gwork, len(o.slots), gr, p.Shape())
			}
			for lo := 0; lo < s.n; lo += proxk.ChunkSize {
				o.segs = append(o.segs, segment{len(o.slots), lo, min(lo+proxk.ChunkSize, s.n)})
			}
			o.slots = append(o.slots, s)
		}
	}
	linkCouplings("optim.NewProxSGD", groups, o.slots, o.gwork)
	for i := range o.slots {
		if sl := &o.slots[i]; sl.owner != 0 {
			sl.aux = make([]float32, 2*sl.n)
		}
	}
	return o
}

// Groups implements Optimizer.
func (o *ProxSGD) Groups() []*Group { return o.groups }

// Steps implements Optimizer.
func (o *ProxSGD) Steps() int { return o.t }

// ZeroGrad implements Optimizer.
func (o *ProxSGD) ZeroGrad() { zeroGrads(o.groups) }

// Step implements Optimizer.
func (o *ProxSGD) Step() {
	o.t++
	type scal struct{ eps, rho, decay, gs float32 }
	hs := make([]scal, len(o.groups))
	rho := min(max(o.cfg.Rho.Rate(o.cfg.Rho0, o.t), 0), 1)
	for i, g := range o.groups {
		eps := o.cfg.Eps.Rate(g.LR, o.t)
		hs[i] = scal{eps: float32(eps), rho: float32(rho), decay: float32(1 - eps*g.WeightDecay), gs: 1}
		if o.cfg.ScaledGradient {
			hs[i].gs = float32(eps)
		}
	}
	active := func(sl *slot) bool { return !o.groups[sl.group].Frozen && sl.p.Grad != nil }
	for i := range o.slots {
		if sl := &o.slots[i]; sl.owner != 0 {
			sl.linked = active(&o.slots[sl.owner-1]) && active(sl)
		}
	}
	parallel.For(len(o.segs), 1, func(lo, hi int) {
		sc := proxk.ScratchPool.Get().(*proxk.Scratch)
		defer proxk.ScratchPool.Put(sc)
		for k := lo; k < hi; k++ {
			sg := o.segs[k]
			sl := &o.slots[sg.slot]
			grp := o.groups[sl.group]
			p := sl.p
			if grp.Frozen || p.Grad == nil {
				continue
			}
			if len(p.Data) != sl.n || len(p.Grad) != sl.n {
				panic(fmt.Sprintf("optim: parameter %q changed size: %d elements (grad %d), optimizer built for %d", sl.name, len(p.Data), len(p.Grad), sl.n))
			}
			h := hs[sl.group]
			a, b := sg.lo, sg.hi
			n := b - a
			th, g, v := p.Data[a:b:b], p.Grad[a:b:b], sl.m[a:b:b]
			var st []float32
			if sl.s != nil {
				st = sl.s[a:b:b]
			}
			d, xh := sc.D[:n:n], sc.G[:n:n]
			o.cfg.Precond.Denom(d, st, g, o.t)
			omr := 1 - h.rho
			for i, gi := range g {
				th[i] *= h.decay
				vi := omr*v[i] + h.rho*gi
				v[i] = vi
				inv := 1 / d[i]
				xh[i] = th[i] - h.gs*(vi*inv)
				d[i] = inv
			}
			if sl.grouped || sl.linked {
				// The group prox, the clipping and the step toward x̂
				// run once the whole tensor (and those coupled with
				// it) has its x̂ and η.
				copy(sl.aux[a:b], xh)
				copy(sl.aux[sl.n+a:sl.n+b], d)
				continue
			}
			if grp.Reg != nil && grp.Lambda != 0 {
				grp.Reg.Prox(xh, xh, d, float32(grp.Lambda))
			}
			if grp.Clip > 0 {
				clip(xh, float32(grp.Clip))
			}
			blend(th, xh, h.eps)
		}
	})
	if len(o.gwork) == 0 {
		return
	}
	linked := func(sl *slot) (member, bool) {
		return member{sl.aux[:sl.n], sl.aux[sl.n:], o.groups[sl.group].Clip}, sl.linked
	}
	runGroupWork(o.gwork, o.slots, func(w *groupWork, sl *slot) {
		if grp := o.groups[sl.group]; active(sl) {
			// λ = 0 leaves x̂ unchanged but for the clipping.
			w.prox(sl.aux[:sl.n], sl.aux[sl.n:], 0, float32(grp.Lambda), grp.Clip, w.members(o.slots, linked))
		}
	})
	parallel.For(len(o.segs), 1, func(lo, hi int) {
		for _, sg := range o.segs[lo:hi] {
			sl := &o.slots[sg.slot]
			if (sl.grouped || sl.linked) && active(sl) {
				blend(sl.p.Data[sg.lo:sg.hi], sl.aux[sg.lo:sg.hi], hs[sl.group].eps)
			}
		}
	})
}

// blend moves th toward x by the fraction eps: θ ← θ + ε(x − θ).
func blend(th, x []float32, eps float32) {
	x = x[:len(th)]
	for i, v := range x {
		th[i] += eps * (v - th[i])
	}
}

// State implements Optimizer: v_t as "<name>.m", the preconditioner state
// as "<name>.v", the counter as Ints["step"] and Stateful schedules under
// "eps_schedule." and "rho_schedule.".
func (o *ProxSGD) State() *State {
	st := NewState()
	st.Ints["step"] = int64(o.t)
	for _, sl := range o.slots {
		st.Tensors[sl.name+".m"] = append([]float32(nil), sl.m...)
		if sl.s != nil {
			st.Tensors[sl.name+".v"] = append([]float32(nil), sl.s...)
		}
	}
	if s, ok := o.cfg.Eps.(schedule.Stateful); ok {
		s.SaveState(st, "eps_schedule.")
	}
	if s, ok := o.cfg.Rho.(schedule.Stateful); ok {
		s.SaveState(st, "rho_schedule.")
	}
	return st
}

// LoadState implements Optimizer.
func (o *ProxSGD) LoadState(st *State) error {
	t, err := st.Int("step")
	if err != nil {
		return err
	}
	var loads []func()
	for i := range o.slots {
		sl := &o.slots[i]
		f, err := st.checked(sl.m, sl.name+".m")
		if err != nil {
			return err
		}
		loads = append(loads, f)
		if sl.s != nil {
			f, err := st.checked(sl.s, sl.name+".v")
			if err != nil {
				return err
			}
			loads = append(loads, f)
		}
	}
	if s, ok := o.cfg.Eps.(schedule.Stateful); ok {
		if err := s.LoadState(st, "eps_schedule."); err != nil {
			return err
		}
	}
	if s, ok := o.cfg.Rho.(schedule.Stateful); ok {
		if err := s.LoadState(st, "rho_schedule."); err != nil {
			return err
		}
	}
	for _, f := range loads {
		f()
	}
	o.t = int(t)
	return nil
}
