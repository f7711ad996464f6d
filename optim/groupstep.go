package optim

import (
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
)

// groupWork is a run of consecutive groups of one parameter, the unit of
// work of the group proximal and subgradient passes. Work boundaries depend
// only on the parameter shapes, so results do not depend on the number of
// workers.
type groupWork struct {
	slot   int
	reg    prox.GroupRegularizer
	layout proxk.Layout
	g0, g1 int
	buf    []float32 // gather space (2·(size + len(comps))) for groups that are not contiguous or coupled
	comps  []int     // slots of the companions coupled with the parameter (Coupling)
	mem    []member  // the companions of one step (members)
}

// appendGroupWork appends the work items of a parameter of the given shape
// regularized by r: about ChunkSize elements each, whole groups only.
func appendGroupWork(ws []groupWork, slot int, r prox.GroupRegularizer, shape []int) []groupWork {
	l := proxk.LayoutOf(int(r.GroupBy()), shape)
	per := max(1, proxk.ChunkSize/max(l.Size, 1))
	for g := 0; g < l.Count; g += per {
		w := groupWork{slot: slot, reg: r, layout: l, g0: g, g1: min(g+per, l.Count)}
		if !l.Contiguous() {
			w.buf = make([]float32, 2*l.Size)
		}
		ws = append(ws, w)
	}
	return ws
}

// runGroupWork calls f for every work item, in parallel.
func runGroupWork(ws []groupWork, slots []slot, f func(w *groupWork, sl *slot)) {
	if len(ws) == 0 {
		return
	}
	parallel.For(len(ws), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			f(&ws[i], &slots[ws[i].slot])
		}
	})
}

// prox replaces each group of x by the proximal map of λ·r under the step
// sizes eta, then clamps it to [−clipAt, clipAt] when clipAt > 0. eta has
// the layout of x but starts at element off of x (off is non-zero only for
// contiguous groups). Coordinate g of each companion in comps (x its z, y
// its η) joins group g and is clamped to its own bound.
func (w *groupWork) prox(x, eta []float32, off int, lambda float32, clipAt float64, comps []member) {
	l := w.layout
	if off != 0 && !l.Contiguous() {
		panic("optim: η offset for groups that are not contiguous")
	}
	s := l.Size
	if len(comps) > 0 || !l.Contiguous() {
		// Gathered groups: strided, or grown by the companions.
		k := len(comps)
		zb, eb := w.buf[:s+k], w.buf[s+k:2*(s+k)]
		for g := w.g0; g < w.g1; g++ {
			l.Gather(zb, x, g)
			if off != 0 {
				copy(eb, eta[g*s-off:(g+1)*s-off])
			} else {
				l.Gather(eb, eta, g)
				l.PadLike(eb[:s], g)
			}
			for j, m := range comps {
				zb[s+j], eb[s+j] = m.x[g], m.y[g]
			}
			w.reg.Prox(zb, zb, eb, lambda)
			if clipAt > 0 {
				clip(zb[:s], float32(clipAt))
			}
			l.Scatter(x, zb, g)
			for j, m := range comps {
				v := zb[s+j]
				if m.clip > 0 {
					v = min(max(v, -float32(m.clip)), float32(m.clip))
				}
				m.x[g] = v
			}
		}
		return
	}
	for g := w.g0; g < w.g1; g++ {
		xg := x[g*s : (g+1)*s]
		w.reg.Prox(xg, xg, eta[g*s-off:(g+1)*s-off], lambda)
		if clipAt > 0 {
			clip(xg, float32(clipAt))
		}
	}
}

// subgradient stores λ times a subgradient of r at each group of theta in
// the same positions of out; the companions in comps (x their θ, y their
// output) join the groups as in prox.
func (w *groupWork) subgradient(out, theta []float32, lambda, eps float32, comps []member) {
	sd := w.reg.(prox.Subdifferentiable)
	l := w.layout
	if len(comps) > 0 || !l.Contiguous() {
		// Gathered groups: strided, or grown by the companions.
		s, k := l.Size, len(comps)
		tb, ob := w.buf[:s+k], w.buf[s+k:2*(s+k)]
		for g := w.g0; g < w.g1; g++ {
			l.Gather(tb, theta, g)
			for j, m := range comps {
				tb[s+j] = m.x[g]
			}
			clear(ob)
			sd.AddSubgradient(ob, tb, lambda, eps)
			l.Scatter(out, ob, g)
			for j, m := range comps {
				m.y[g] = ob[s+j]
			}
		}
		return
	}
	for g := w.g0; g < w.g1; g++ {
		og := out[g*l.Size : (g+1)*l.Size]
		clear(og)
		sd.AddSubgradient(og, theta[g*l.Size:(g+1)*l.Size], lambda, eps)
	}
}
