package optim

import (
	"fmt"
	"slices"

	"github.com/proxgen/proxgen/optim/prox"
)

// LazyProx is the lazy (dual-averaging) form of the proximal update for
// some of a ProxGen optimizer's groups. The optimizer's momentum and
// preconditioner step a real-valued iterate z without the prox, from the
// gradient at the parameters the network computes with, which are
//
//	θ_t = prox_{η_t λ R}(z_t),  η_t = α_1 + … + α_t,
//
// the proximal map of λR at z_t under the step sizes summed so far. Under
// the inner optimizer's Preconditioned metric with a stateful
// preconditioner (Adam, AdaGrad, RMSprop) each coordinate takes the sum
// of the steps it took, η_t,i = Σ_s α_s/(C_s,i + δ), as ProxGen's prox
// takes α_t/(C_t,i + δ) at each step; under the Euclidean metric (ProxQuant)
// or a stateless preconditioner (proximal SGD) every coordinate takes
// η_t = α_1 + … + α_t. With R = 0 it is the
// inner optimizer; where ProxGen pulls θ a step's worth towards R's
// minimisers after every step and keeps it there, the lazy form pulls the
// whole accumulated iterate at once, so a coordinate that the pull holds
// (a binary weight at ±s, a zero of ℓ1) leaves as soon as its accumulated
// gradient outweighs the pull. With a W-shaped regularizer and λ → ∞ it
// is BinaryConnect without the clipping; it is the regularized dual
// averaging of Xiao (2010) with the inner optimizer's step.
//
// A lazy group's Lambda, Reg and Frozen may change between steps as for
// any group (a homotopy, HardQuantize); a frozen group keeps its Data and
// its real iterate. A group regularizer acts on each tensor's groups
// (prox.GroupProx); lazy groups take no Couplings.
type LazyProx struct {
	shadowed           // the lazy parameters, whose real weights are z
	inner    *ProxGen  // shadowed.inner, as the ProxGen it is
	groups   []int     // indices of the lazy groups among inner's groups
	owner    []int     // index into groups of each lazy parameter's group
	eta      []float64 // Σ α_s of each lazy group
	// etas holds each lazy parameter's per-coordinate η_t,i (the inner
	// slot's lazyEta) under a per-coordinate metric, else nil.
	etas   [][]float32
	lambda []float64 // the lazy groups' λ, saved while the inner step runs
	// etaBuf, as long as the largest lazy parameter, holds etaFill in
	// every element under the identity or Euclidean metric, refilled only
	// when Σ α changes.
	etaBuf  []float32
	etaFill float32
	scratch []float32 // prox.GroupProx's
}

// NewLazyProx applies the regularizers of groups (each one of inner's
// groups) lazily. It copies the parameters' Data as the real iterate z_0
// (η_0 = 0, so θ_0 = z_0). It panics if a group is not inner's or has
// Couplings. Under a per-coordinate metric inner then sums the lazy
// coordinates' steps as it takes them, for this LazyProx alone: step inner
// only through it, and wrap it in one LazyProx.
func NewLazyProx(inner *ProxGen, groups ...*Group) *LazyProx {
	l := &LazyProx{shadowed: shadowed{inner: inner}, inner: inner}
	for k, g := range groups {
		gi := groupIndex("optim.NewLazyProx", inner, g)
		if len(g.Couplings) > 0 {
			panic(fmt.Sprintf("optim.NewLazyProx: group %d has couplings; lazy groups take none", gi))
		}
		l.groups = append(l.groups, gi)
		l.shadow(gi, g)
		for range g.Params {
			l.owner = append(l.owner, k)
		}
	}
	l.eta = make([]float64, len(groups))
	l.lambda = make([]float64, len(groups))
	l.etas = make([][]float32, len(l.params))
	n := 0 // the largest lazy parameter, whose length etaBuf takes
	for _, p := range l.params {
		n = max(n, len(p.Data))
	}
	l.etaBuf = make([]float32, n)
	if cfg := inner.Config(); cfg.Metric == Preconditioned && cfg.Precond.Stateful() {
		for i := range inner.slots {
			sl := &inner.slots[i]
			if j := slices.Index(l.params, sl.p); j >= 0 {
				sl.lazyEta = make([]float32, sl.n)
				l.etas[j] = sl.lazyEta
			}
		}
	}
	return l
}

// Lazy reports the index of the parameter called name among the lazy ones
// (for Real), and whether it is one of them.
func (l *LazyProx) Lazy(name string) (int, bool) {
	i := l.index(name)
	return i, i >= 0
}

// Eta returns α_1 + … + α_t, the step sizes summed so far, of the k-th
// lazy group: every coordinate's η_t unless the metric is per coordinate
// (see Etas).
func (l *LazyProx) Eta(k int) float64 { return l.eta[k] }

// Etas returns the per-coordinate η_t,i = Σ_s α_s/(C_s,i + δ) of the i-th
// lazy parameter under a per-coordinate metric, and nil otherwise. The
// slice is the optimizer's: it changes with each Step.
func (l *LazyProx) Etas(i int) []float32 { return l.etas[i] }

// Step implements Optimizer: the inner step on z with the lazy groups' λ
// set to 0, then θ = prox_{η_t λ R}(z).
func (l *LazyProx) Step() {
	gs := l.inner.Groups()
	for k, gi := range l.groups {
		l.lambda[k] = gs[gi].Lambda
		gs[gi].Lambda = 0
		if !gs[gi].Frozen {
			l.eta[k] += l.inner.LR(gi)
		}
	}
	for i, p := range l.params {
		if !gs[l.groups[l.owner[i]]].Frozen {
			copy(p.Data, l.real[i])
		}
	}
	l.inner.Step()
	for k, gi := range l.groups {
		gs[gi].Lambda = l.lambda[k]
	}
	for i, p := range l.params {
		if !gs[l.groups[l.owner[i]]].Frozen {
			copy(l.real[i], p.Data)
			l.apply(i)
		}
	}
}

// apply writes θ = prox_{η λ R}(z) of the i-th lazy parameter into its Data.
func (l *LazyProx) apply(i int) {
	k := l.owner[i]
	g := l.inner.Groups()[l.groups[k]]
	p := l.params[i]
	if g.Reg == nil || g.Lambda == 0 || l.eta[k] == 0 {
		copy(p.Data, l.real[i])
		return
	}
	eta := l.etas[i]
	if eta == nil {
		if e := float32(l.eta[k]); l.etaFill != e {
			for j := range l.etaBuf {
				l.etaBuf[j] = e
			}
			l.etaFill = e
		}
		eta = l.etaBuf[:len(p.Data)]
	}
	if gr, ok := g.Reg.(prox.GroupRegularizer); ok {
		l.scratch = prox.GroupProx(gr, p.Data, l.real[i], p.Shape(), eta, float32(g.Lambda), l.scratch)
		return
	}
	g.Reg.Prox(p.Data, l.real[i], eta, float32(g.Lambda))
}

// State implements Optimizer: the inner state plus the real iterates as
// "<name>.real", each lazy group's Σ α_s as "lazy.eta.<group index>" and,
// under a per-coordinate metric, each parameter's η_t,i as
// "<name>.lazy_eta".
func (l *LazyProx) State() *State {
	st := l.state()
	for k, gi := range l.groups {
		st.SetFloat64(fmt.Sprintf("lazy.eta.%d", gi), l.eta[k])
	}
	for i, e := range l.etas {
		if e != nil {
			st.Tensors[l.names[i]+".lazy_eta"] = append([]float32(nil), e...)
		}
	}
	return st
}

// LoadState implements Optimizer. It restores the real iterates and the
// step sizes η; the parameters' Data (θ) are the caller's to restore, as
// for ProxGen. It changes nothing when it returns an error.
func (l *LazyProx) LoadState(st *State) error {
	eta := make([]float64, len(l.eta))
	var loads []func()
	err := l.loadState(st, "lazy prox", func() error {
		for k, gi := range l.groups {
			v, err := st.Float64(fmt.Sprintf("lazy.eta.%d", gi))
			if err != nil {
				return err
			}
			eta[k] = v
		}
		for i, e := range l.etas {
			if e == nil {
				continue
			}
			f, err := st.checked(e, l.names[i]+".lazy_eta")
			if err != nil {
				return err
			}
			loads = append(loads, f)
		}
		return nil
	})
	if err != nil {
		return err
	}
	copy(l.eta, eta)
	for _, f := range loads {
		f()
	}
	return nil
}
