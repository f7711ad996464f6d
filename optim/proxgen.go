package optim

import (
	"fmt"
	"sync"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// RegMode says how an optimizer treats the groups' regularizers.
type RegMode int

const (
	// RegProx applies the proximal map of λR after the gradient step
	// (ProxGen).
	RegProx RegMode = iota
	// RegSubgradient adds λ times a (smoothed) subgradient of R to the
	// gradient before the momentum and preconditioner see it (the
	// subgradient baselines of the paper). Groups' regularizers must
	// implement Subdifferentiable.
	RegSubgradient
	// RegIgnore ignores the regularizers (plain unregularized baselines).
	RegIgnore
)

// ProxMetric selects the metric of the proximal map.
type ProxMetric int

const (
	// Preconditioned uses C_t + δI, per-coordinate step η = α_t/(C_t,i + δ)
	// (ProxGen and revised ProxQuant).
	Preconditioned ProxMetric = iota
	// Euclidean uses η = α_t for every coordinate, ignoring the
	// preconditioner (the original ProxQuant).
	Euclidean
)

// Config composes a ProxGen update. The zero value is proximal SGD without
// momentum: identity preconditioner, constant step size, decoupled weight
// decay, proximal regularization.
type Config struct {
	// Momentum builds m_t.
	Momentum Momentum
	// Precond builds C_t + δI; nil means Identity{}.
	Precond Preconditioner
	// Schedule gives α_t from each group's LR; nil means Constant{}.
	Schedule schedule.Schedule
	// CoupledWeightDecay adds ζθ to the gradient (SGD, Adam) instead of
	// the decoupled θ̄ = (1 − α_t ζ)θ applied first (ProxGenW, AdamW).
	CoupledWeightDecay bool
	// RegMode selects proximal, subgradient or no regularization.
	RegMode RegMode
	// SubgradEps smooths |θ|^(q−1) in subgradient mode (default 1e-8).
	SubgradEps float32
	// Metric selects the metric of the proximal map.
	Metric ProxMetric
}

// ProxGenAdam is the paper's Adam instance of ProxGen, as in the official
// code: EMA momentum ρ = beta1 and the Adam preconditioner with β = beta2,
// both bias-corrected, δ = delta added after the square root, decoupled
// weight decay applied first (ProxGenW when a group has WeightDecay > 0)
// and the proximal map under the preconditioned metric.
func ProxGenAdam(beta1, beta2, delta float64) Config {
	return Config{
		Momentum: Momentum{Rho: beta1, BiasCorrection: true},
		Precond:  NewAdamPrecond(float32(beta2), float32(delta)),
	}
}

// AdamConfig is torch.optim.Adam: coupled weight decay, regularizers
// ignored (set RegMode to RegSubgradient for the subgradient baseline).
func AdamConfig(beta1, beta2, eps float64) Config {
	c := ProxGenAdam(beta1, beta2, eps)
	c.CoupledWeightDecay = true
	c.RegMode = RegIgnore
	return c
}

// AdamWConfig is torch.optim.AdamW: decoupled weight decay applied first,
// regularizers ignored (set RegMode to RegSubgradient for the subgradient
// baseline).
func AdamWConfig(beta1, beta2, eps float64) Config {
	c := ProxGenAdam(beta1, beta2, eps)
	c.RegMode = RegIgnore
	return c
}

// SGDConfig is torch.optim.SGD with heavy-ball momentum (dampening 0),
// optional Nesterov and coupled weight decay; regularizers ignored (use
// RegProx for proximal SGD).
func SGDConfig(momentum float64, nesterov bool) Config {
	return Config{
		Momentum:           Momentum{Rho: momentum, HeavyBall: true, Nesterov: nesterov},
		Precond:            Identity{},
		CoupledWeightDecay: true,
		RegMode:            RegIgnore,
	}
}

// AdaGradConfig is torch.optim.Adagrad (lr_decay 0, initial accumulator 0)
// with coupled weight decay; regularizers ignored.
func AdaGradConfig(eps float64) Config {
	return Config{Precond: AdaGrad{Delta: float32(eps)}, CoupledWeightDecay: true, RegMode: RegIgnore}
}

// RMSpropConfig is torch.optim.RMSprop without momentum or centering,
// with coupled weight decay; regularizers ignored.
func RMSpropConfig(alpha, eps float64) Config {
	return Config{Precond: RMSprop{Beta: float32(alpha), Delta: float32(eps)}, CoupledWeightDecay: true, RegMode: RegIgnore}
}

// slot is one parameter and its state.
type slot struct {
	group int
	p     *autograd.Tensor
	name  string
	n     int       // number of elements at construction
	m     []float32 // momentum (nil when stateless)
	s     []float32 // preconditioner state (nil when stateless)
	// grouped is set when the group's regularizer is a GroupRegularizer
	// that the optimizer applies; aux then holds, for the whole tensor,
	// η between the gradient step and the group prox (groups that are
	// not fused, see contiguous and strided), or λ∂R in subgradient mode.
	grouped bool
	aux     []float32
	// owner is 1 + the slot index of the weight this slot is a
	// companion of (Coupling), 0 for none; aux then holds its η or λ∂R
	// as for the weight. linked is set during a step in which the slot
	// joins its weight's groups.
	owner  int
	linked bool
	// contiguous is set for grouped slots whose groups are contiguous
	// runs; fused is set during a step in which such a slot takes its
	// gradient step and group prox together, group work item by work
	// item, while the coordinates are in cache.
	contiguous, fused bool
	// strided is set for grouped slots whose groups are not contiguous
	// (ByInputChannel, never coupled) but whose regularizer sp maps in
	// memory order, step included; fused is then set as for contiguous
	// ones.
	strided bool
	sp      *stridedPass
	// lazyEta, set by NewLazyProx under a per-coordinate metric, sums
	// the step sizes η = α_t/(C_t + δ) the slot's coordinates take.
	lazyEta []float32
}

// segment is a chunk [lo, hi) of one slot.
type segment struct{ slot, lo, hi int }

// stepScalars are the per-group constants of one update.
type stepScalars struct {
	lr, lrm  float32 // α_t and α_t divided by the momentum bias correction
	rho, omr float32 // ρ_t and 1 − ρ_t
	decay    float32 // 1 − α_t ζ (decoupled) or 1
	wdc      float32 // ζ (coupled) or 0
	lambda   float32
	prox     bool
	subgrad  bool
}

// ProxGen is Algorithm 1 (and Algorithm 2, ProxGenW, when groups have a
// decoupled weight decay) with the Momentum, Preconditioner and
// Regularizer given by its Config. With RegIgnore or RegSubgradient and
// the matching Config it is also the Adam, AdamW, SGD, AdaGrad and RMSprop
// baselines.
type ProxGen struct {
	// generic disables the fused kernels (tests compare both paths).
	generic bool
	cfg     Config
	groups  []*Group
	t       int
	slots   []slot
	segs    []segment
	gwork   []groupWork
}

// New returns a ProxGen optimizer over groups. It panics on an invalid
// configuration (bad momentum, duplicate parameter names, a subgradient
// mode with a regularizer that has no subgradient).
func New(groups []*Group, cfg Config) *ProxGen {
	cfg.Momentum.validate()
	if cfg.Precond == nil {
		cfg.Precond = Identity{}
	}
	if cfg.Schedule == nil {
		cfg.Schedule = schedule.Constant{}
	}
	if cfg.SubgradEps == 0 {
		cfg.SubgradEps = 1e-8
	}
	o := &ProxGen{cfg: cfg, groups: groups}
	seen := map[string]bool{}
	for gi, g := range groups {
		if g.Names != nil && len(g.Names) != len(g.Params) {
			panic(fmt.Sprintf("optim.New: group %d has %d names for %d parameters", gi, len(g.Names), len(g.Params)))
		}
		if cfg.RegMode == RegSubgradient && g.Reg != nil {
			sd, ok := g.Reg.(prox.Subdifferentiable)
			if h, isOurs := sd.(interface{ HasSubgradient() bool }); ok && isOurs && !h.HasSubgradient() {
				ok = false
			}
			if !ok {
				panic(fmt.Sprintf("optim.New: group %d regularizer %v has no subgradient", gi, g.Reg))
			}
		}
		for j, p := range g.Params {
			name := g.name(gi, j)
			if seen[name] {
				panic(fmt.Sprintf("optim.New: duplicate parameter name %q", name))
			}
			seen[name] = true
			s := slot{group: gi, p: p, name: name, n: p.Numel()}
			if cfg.Momentum.stateful() {
				s.m = make([]float32, s.n)
			}
			if cfg.Precond.Stateful() {
				s.s = make([]float32, s.n)
			}
			if gr, ok := g.Reg.(prox.GroupRegularizer); ok && cfg.RegMode != RegIgnore {
				s.grouped = true
				o.gwork = appendGroupWork(o.gwork, len(o.slots), gr, p.Shape())
				l := proxk.LayoutOf(int(gr.GroupBy()), p.Shape())
				s.contiguous = l.Contiguous()
				s.strided = stridedOK(gr, l)
				if s.strided && cfg.RegMode == RegProx {
					s.sp = newStridedPass(gr, l)
				}
				if !s.contiguous || cfg.RegMode == RegSubgradient {
					// Contiguous fused steps keep η in a buffer per
					// work item; a stridedPass keeps it here.
					s.aux = make([]float32, s.n)
				}
			}
			for lo := 0; lo < s.n; lo += proxk.ChunkSize {
				o.segs = append(o.segs, segment{len(o.slots), lo, min(lo+proxk.ChunkSize, s.n)})
			}
			o.slots = append(o.slots, s)
		}
	}
	linkCouplings("optim.New", groups, o.slots, o.gwork)
	for i := range o.slots {
		if sl := &o.slots[i]; sl.owner != 0 {
			sl.aux = make([]float32, sl.n)
		}
	}
	return o
}

// Groups implements Optimizer.
func (o *ProxGen) Groups() []*Group { return o.groups }

// Steps implements Optimizer.
func (o *ProxGen) Steps() int { return o.t }

// Config returns the optimizer's configuration.
func (o *ProxGen) Config() Config { return o.cfg }

// ZeroGrad implements Optimizer.
func (o *ProxGen) ZeroGrad() { zeroGrads(o.groups) }

// LR returns the step size α_t the next Step will use for group i.
func (o *ProxGen) LR(i int) float64 { return o.cfg.Schedule.Rate(o.groups[i].LR, o.t+1) }

// scalars computes the constants of update t for group g.
func (o *ProxGen) scalars(g *Group, t int) stepScalars {
	lr := o.cfg.Schedule.Rate(g.LR, t)
	mo := o.cfg.Momentum
	rho := mo.RhoAt(t)
	h := stepScalars{
		lr:     float32(lr),
		lrm:    float32(lr / mo.correction(t)),
		rho:    float32(rho),
		omr:    float32(1 - rho),
		decay:  1,
		lambda: float32(g.Lambda),
	}
	if o.cfg.CoupledWeightDecay {
		h.wdc = float32(g.WeightDecay)
	} else if g.WeightDecay != 0 {
		h.decay = float32(1 - lr*g.WeightDecay)
	}
	active := g.Reg != nil && g.Lambda != 0
	h.prox = active && o.cfg.RegMode == RegProx
	h.subgrad = active && o.cfg.RegMode == RegSubgradient
	return h
}

// Step implements Optimizer.
func (o *ProxGen) Step() {
	o.t++
	hs := make([]stepScalars, len(o.groups))
	for i, g := range o.groups {
		hs[i] = o.scalars(g, o.t)
	}
	active := func(sl *slot) bool {
		return !o.groups[sl.group].Frozen && sl.p.Grad != nil
	}
	for i := range o.slots {
		sl := &o.slots[i]
		if sl.owner != 0 {
			w := &o.slots[sl.owner-1]
			h := &hs[w.group]
			sl.linked = (h.prox || h.subgrad) && active(w) && active(sl)
		}
		sl.fused = (sl.contiguous || sl.strided) && hs[sl.group].prox && active(sl)
	}
	linked := func(sl *slot) (member, bool) {
		return member{sl.p.Data, sl.aux, o.groups[sl.group].Clip}, sl.linked
	}
	if o.cfg.RegMode == RegSubgradient {
		runGroupWork(o.gwork, o.slots, func(w *groupWork, sl *slot) {
			if h := &hs[sl.group]; h.subgrad && active(sl) {
				w.subgradient(sl.aux, sl.p.Data, h.lambda, o.cfg.SubgradEps, w.members(o.slots, linked))
			}
		})
	}
	parallel.For(len(o.segs), 1, func(lo, hi int) {
		sc := proxk.ScratchPool.Get().(*proxk.Scratch)
		for i := lo; i < hi; i++ {
			if !o.slots[o.segs[i].slot].fused {
				o.stepSegment(o.segs[i], hs, sc, nil)
			}
		}
		proxk.ScratchPool.Put(sc)
	})
	if o.cfg.RegMode == RegProx {
		runGroupWork(o.gwork, o.slots, func(w *groupWork, sl *slot) {
			h := &hs[sl.group]
			if !h.prox || !active(sl) {
				return
			}
			clipAt := o.groups[sl.group].Clip
			if !sl.fused {
				w.prox(sl.p.Data, sl.aux, 0, h.lambda, clipAt, w.members(o.slots, linked))
				return
			}
			if sl.strided {
				return // stepped and mapped by its stridedPass below
			}
			// The step of the work item's groups, then their prox while
			// z and η are in cache; the step is element-wise, so its
			// split into pieces changes nothing.
			lo, hi := w.g0*w.layout.Size, w.g1*w.layout.Size
			eta := etaPool.Get().(*[]float32)
			if cap(*eta) < hi-lo {
				*eta = make([]float32, hi-lo)
			}
			*eta = (*eta)[:hi-lo]
			sc := proxk.ScratchPool.Get().(*proxk.Scratch)
			for a := lo; a < hi; a += proxk.ChunkSize {
				b := min(a+proxk.ChunkSize, hi)
				o.stepSegment(segment{w.slot, a, b}, hs, sc, (*eta)[a-lo:b-lo])
			}
			proxk.ScratchPool.Put(sc)
			w.prox(sl.p.Data, *eta, lo, h.lambda, clipAt, w.members(o.slots, linked))
			etaPool.Put(eta)
		})
		for i := range o.slots {
			sl := &o.slots[i]
			if !sl.strided || !sl.fused {
				continue
			}
			sl.sp.run(sl.p.Data, sl.aux, hs[sl.group].lambda, o.groups[sl.group].Clip, func(lo, hi int) {
				sc := proxk.ScratchPool.Get().(*proxk.Scratch)
				o.stepSegment(segment{i, lo, hi}, hs, sc, nil)
				proxk.ScratchPool.Put(sc)
			})
		}
	}
}

// etaPool holds the η buffers of fused group work items.
var etaPool = sync.Pool{New: func() any { return new([]float32) }}

// stepSegment updates one chunk of a slot. When eta is not nil and the
// group prox is deferred, η goes there instead of the slot's aux.
func (o *ProxGen) stepSegment(sg segment, hs []stepScalars, sc *proxk.Scratch, eta []float32) {
	sl := &o.slots[sg.slot]
	grp := o.groups[sl.group]
	p := sl.p
	if grp.Frozen || p.Grad == nil {
		return
	}
	if len(p.Data) != sl.n || len(p.Grad) != sl.n {
		panic(fmt.Sprintf("optim: parameter %q changed size: %d elements (grad %d), optimizer built for %d", sl.name, len(p.Data), len(p.Grad), sl.n))
	}
	h := &hs[sl.group]
	lo, hi := sg.lo, sg.hi
	n := hi - lo
	th := p.Data[lo:hi:hi]
	g := p.Grad[lo:hi:hi]
	d := sc.D[:n:n]
	// A linked companion takes part in its weight's group prox or
	// subgradient although its own group has no regularizer.
	doProx := h.prox || sl.linked && o.cfg.RegMode == RegProx
	subgrad := h.subgrad || sl.linked && o.cfg.RegMode == RegSubgradient
	deferred := doProx && (sl.grouped || sl.linked)
	if deferred {
		// η goes straight to where the group prox reads it.
		if eta != nil {
			d = eta[:n:n]
		} else {
			d = sl.aux[lo:hi:hi]
		}
	}
	if h.wdc != 0 || subgrad {
		gb := sc.G[:n:n]
		copy(gb, g)
		if h.wdc != 0 {
			wd := h.wdc
			for i, v := range th {
				gb[i] += wd * v
			}
		}
		if subgrad && (sl.grouped || sl.linked) {
			for i, v := range sl.aux[lo:hi:hi] {
				gb[i] += v
			}
		} else if subgrad {
			grp.Reg.(prox.Subdifferentiable).AddSubgradient(gb, th, h.lambda, o.cfg.SubgradEps)
		}
		g = gb
	}
	var st []float32
	if sl.s != nil {
		st = sl.s[lo:hi:hi]
	}
	needEta := doProx && o.cfg.Metric == Preconditioned
	// A lazy slot's step is the plain one; its η is summed after it.
	lazy := sl.lazyEta != nil && !doProx
	proxDone := false
	lr := h.lr
	mo := o.cfg.Momentum
	if ad, ok := o.cfg.Precond.(AdamPrecond); ok && sl.m != nil && !mo.HeavyBall && !o.generic {
		// The paper's Adam instance in one pass over the chunk (two with
		// the ℓ1/2 prox, which then is done).
		kind := fusedNone
		if needEta {
			kind = fusedEta
			if r, ok := grp.Reg.(interface{ Kind() int }); ok && r.Kind() == proxk.KindL12 {
				kind = fusedL12
			}
		}
		adamEMA(th, g, sl.m[lo:hi:hi], st, d, sc, h, ad, o.t, kind)
		proxDone = kind == fusedL12
		if lazy {
			adamSumEta(sl.lazyEta[lo:hi:hi], st, h.lr, ad, o.t)
		}
	} else {
		o.cfg.Precond.Denom(d, st, g, o.t)
		o.momentumStep(sl, lo, hi, th, g, d, h, needEta)
		if lazy {
			acc := sl.lazyEta[lo:hi:hi]
			for i, di := range d {
				acc[i] += h.lr / di
			}
		}
	}
	if doProx && !proxDone {
		if o.cfg.Metric == Euclidean {
			for i := range d {
				d[i] = lr
			}
		}
		if deferred {
			// d is sl.aux: the group prox and the clipping run once
			// the whole tensor has taken its step (Step).
			return
		}
		grp.Reg.Prox(th, th, d, h.lambda)
	}
	if grp.Clip > 0 {
		clip(th, float32(grp.Clip))
	}
}

// momentumStep is the generic update of one chunk once d = C_t + δI is
// known: it updates the momentum, takes the step and, when needEta, leaves
// η = α_t/d in d.
func (o *ProxGen) momentumStep(sl *slot, lo, hi int, th, g, d []float32, h *stepScalars, needEta bool) {
	lr, lrm, decay := h.lr, h.lrm, h.decay
	mo := o.cfg.Momentum
	switch {
	case sl.m == nil: // no momentum: m_t = g_t
		if needEta {
			for i, gi := range g {
				inv := 1 / d[i]
				th[i] = th[i]*decay - lrm*(gi*inv)
				d[i] = lr * inv
			}
		} else {
			for i, gi := range g {
				th[i] = th[i]*decay - lrm*(gi/d[i])
			}
		}
	case mo.HeavyBall:
		m := sl.m[lo:hi:hi]
		rho := h.rho
		for i, gi := range g {
			mi := rho*m[i] + gi
			m[i] = mi
			u := mi
			if mo.Nesterov {
				u = gi + rho*mi
			}
			di := d[i]
			th[i] = th[i]*decay - lrm*(u/di)
			if needEta {
				d[i] = lr / di // rare combination: keep the division exact
			}
		}
	default: // the paper's EMA
		m := sl.m[lo:hi:hi]
		rho, omr := h.rho, h.omr
		if needEta {
			// One division serves both the step and η = α_t/d.
			for i, gi := range g {
				mi := rho*m[i] + omr*gi
				m[i] = mi
				inv := 1 / d[i]
				th[i] = th[i]*decay - lrm*(mi*inv)
				d[i] = lr * inv
			}
		} else {
			for i, gi := range g {
				mi := rho*m[i] + omr*gi
				m[i] = mi
				th[i] = th[i]*decay - lrm*(mi/d[i])
			}
		}
	}
}

// clip clamps x to [−c, c].
func clip(x []float32, c float32) {
	for i, v := range x {
		if v > c {
			x[i] = c
		} else if v < -c {
			x[i] = -c
		}
	}
}

// State implements Optimizer: the moment vectors as "<name>.m" and
// "<name>.v", the update counter as Ints["step"], and a Stateful schedule's
// entries under "schedule.".
func (o *ProxGen) State() *State {
	st := NewState()
	st.Ints["step"] = int64(o.t)
	for _, sl := range o.slots {
		if sl.m != nil {
			st.Tensors[sl.name+".m"] = append([]float32(nil), sl.m...)
		}
		if sl.s != nil {
			st.Tensors[sl.name+".v"] = append([]float32(nil), sl.s...)
		}
	}
	if s, ok := o.cfg.Schedule.(schedule.Stateful); ok {
		s.SaveState(st, "schedule.")
	}
	return st
}

// LoadState implements Optimizer. It changes nothing when it returns an
// error.
func (o *ProxGen) LoadState(st *State) error {
	t, err := st.Int("step")
	if err != nil {
		return err
	}
	var loads []func()
	for _, sl := range o.slots {
		for _, e := range []struct {
			buf  []float32
			name string
		}{{sl.m, sl.name + ".m"}, {sl.s, sl.name + ".v"}} {
			if e.buf == nil {
				continue
			}
			f, err := st.checked(e.buf, e.name)
			if err != nil {
				return err
			}
			loads = append(loads, f)
		}
	}
	if s, ok := o.cfg.Schedule.(schedule.Stateful); ok {
		if err := s.LoadState(st, "schedule."); err != nil {
			return err
		}
	}
	for _, f := range loads {
		f()
	}
	o.t = int(t)
	return nil
}
