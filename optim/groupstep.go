package optim

import (
	"math"
	"sync"

	"github.com/proxgen/proxgen/autograd/parallel"
)

// groupWork is a run of consecutive groups of one parameter, the unit of
// work of the group proximal and subgradient passes. Work boundaries depend
// only on the parameter shapes, so results do not depend on the number of
// workers.
type groupWork struct {
	slot   int
	reg    GroupRegularizer
	layout groupLayout
	g0, g1 int
	buf    []float32 // gather space (2·(size + len(comps))) for groups that are not contiguous or coupled
	comps  []int     // slots of the companions coupled with the parameter (Coupling)
	mem    []member  // the companions of one step (members)
}

// appendGroupWork appends the work items of a parameter of the given shape
// regularized by r: about chunkSize elements each, whole groups only.
func appendGroupWork(ws []groupWork, slot int, r GroupRegularizer, shape []int) []groupWork {
	l := layoutOf(r.GroupBy(), shape)
	per := max(1, chunkSize/max(l.size, 1))
	if !l.contiguous() {
		// proxStrided passes over rows of per groups: at least about 512
		// elements each, whole 8-lane vectors for runs of 3×3 kernels.
		per = max(per, (512/l.inner+8)&^7)
	}
	for g := 0; g < l.count; g += per {
		w := groupWork{slot: slot, reg: r, layout: l, g0: g, g1: min(g+per, l.count)}
		if !l.contiguous() {
			w.buf = make([]float32, 2*l.size)
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
	if off != 0 && !l.contiguous() {
		panic("optim: η offset for groups that are not contiguous")
	}
	s := l.size
	if len(comps) > 0 {
		k := len(comps)
		zb, eb := w.buf[:s+k], w.buf[s+k:2*(s+k)]
		for g := w.g0; g < w.g1; g++ {
			l.gather(zb, x, g)
			if off != 0 {
				copy(eb, eta[g*s-off:(g+1)*s-off])
			} else {
				l.gather(eb, eta, g)
			}
			for j, m := range comps {
				zb[s+j], eb[s+j] = m.x[g], m.y[g]
			}
			w.reg.Prox(zb, zb, eb, lambda)
			if clipAt > 0 {
				clip(zb[:s], float32(clipAt))
			}
			l.scatter(x, zb, g)
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
		if l.contiguous() {
			xg := x[g*s : (g+1)*s]
			w.reg.Prox(xg, xg, eta[g*s-off:(g+1)*s-off], lambda)
			if clipAt > 0 {
				clip(xg, float32(clipAt))
			}
			continue
		}
		xg, eg := w.buf[:s], w.buf[s:]
		l.gather(xg, x, g)
		l.gather(eg, eta, g)
		w.reg.Prox(xg, xg, eg, lambda)
		if clipAt > 0 {
			clip(xg, float32(clipAt))
		}
		l.scatter(x, xg, g)
	}
}

// subgradient stores λ times a subgradient of r at each group of theta in
// the same positions of out; the companions in comps (x their θ, y their
// output) join the groups as in prox.
func (w *groupWork) subgradient(out, theta []float32, lambda, eps float32, comps []member) {
	sd := w.reg.(Subdifferentiable)
	l := w.layout
	if len(comps) > 0 {
		s, k := l.size, len(comps)
		tb, ob := w.buf[:s+k], w.buf[s+k:2*(s+k)]
		for g := w.g0; g < w.g1; g++ {
			l.gather(tb, theta, g)
			for j, m := range comps {
				tb[s+j] = m.x[g]
			}
			clear(ob)
			sd.AddSubgradient(ob, tb, lambda, eps)
			l.scatter(out, ob, g)
			for j, m := range comps {
				m.y[g] = ob[s+j]
			}
		}
		return
	}
	for g := w.g0; g < w.g1; g++ {
		if l.contiguous() {
			og := out[g*l.size : (g+1)*l.size]
			clear(og)
			sd.AddSubgradient(og, theta[g*l.size:(g+1)*l.size], lambda, eps)
			continue
		}
		tg, og := w.buf[:l.size], w.buf[l.size:]
		l.gather(tg, theta, g)
		clear(og)
		sd.AddSubgradient(og, tg, lambda, eps)
		l.scatter(out, og, g)
	}
}

// stridedFold is the number of rows proxStrided sums in float32 before it
// adds the sums to its float64 ones.
const stridedFold = 32

// stridedBuf is the scratch space of proxStrided.
type stridedBuf struct {
	eta                []float32 // η of the work item's rows, row after row
	a2, ae, lo, hi, cv []float32 // per position of a row
	s2, se             []float64 // per group
	act                []int8
	fac                []float32
}

var stridedPool = sync.Pool{New: func() any { return new(stridedBuf) }}

// grow sizes b for rows of n elements, k groups and m elements in all.
func (b *stridedBuf) grow(n, k, m int) {
	if cap(b.eta) < m {
		b.eta = make([]float32, m)
	}
	if cap(b.a2) < n {
		b.a2, b.ae, b.lo, b.hi, b.cv = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	}
	if cap(b.s2) < k {
		b.s2, b.se, b.act, b.fac = make([]float64, k), make([]float64, k), make([]int8, k), make([]float32, k)
	}
}

// stridedOK reports whether proxStrided can apply r to groups of layout l
// that have no companions.
func stridedOK(r GroupRegularizer, l groupLayout) bool {
	_, ok := r.(sums32Decider)
	return ok && !l.contiguous()
}

// proxStrided is the gradient step and prox of groups that are not
// contiguous (ByInputChannel: runs of inner elements strided by stride)
// for a regularizer that is a sums32Decider, in memory order: step(lo,
// hi, eta) takes the step of elements [lo, hi) of x and leaves their η in
// eta; the work item's groups form one run of (g1 − g0)·inner elements in
// each of the outer rows, which is stepped while the group sums ‖z‖₂²,
// Σ z_i²η_i and the range of η accumulate per position (float32, folded
// into float64 per group every stridedFold rows, a fixed order that
// depends only on the shape). Each group is then decided from its sums,
// and one pass over the rows scales the groups that take the first-order
// map; those the sums leave undecided are gathered and mapped by Prox.
// The results equal Prox's up to the rounding of the sums in the factor
// of the first-order scaling; the decisions are exact.
func (w *groupWork) proxStrided(x []float32, lambda float32, clipAt float64, step func(lo, hi int, eta []float32)) {
	l := w.layout
	dec := w.reg.(sums32Decider)
	in, k := l.inner, w.g1-w.g0
	n := k * in
	b := stridedPool.Get().(*stridedBuf)
	defer stridedPool.Put(b)
	b.grow(n, k, n*l.outer)
	eta := b.eta[:n*l.outer]
	a2, ae, lo, hi := b.a2[:n], b.ae[:n], b.lo[:n], b.hi[:n]
	s2, se := b.s2[:k], b.se[:k]
	clear(a2)
	clear(ae)
	clear(s2)
	clear(se)
	for i := range lo {
		lo[i], hi[i] = math.MaxFloat32, 0
	}
	row := func(o int) int { return o*l.stride + w.g0*in }
	for o, rows := 0, 0; o < l.outer; o++ {
		r, e := row(o), eta[o*n:(o+1)*n]
		step(r, r+n, e)
		accumSums32(x[r:r+n], e, a2, ae, lo, hi)
		if rows++; rows == stridedFold || o == l.outer-1 {
			for c := range k {
				var u, v float64
				for j := c * in; j < (c+1)*in; j++ {
					u += float64(a2[j])
					v += float64(ae[j])
				}
				s2[c] += u
				se[c] += v
			}
			clear(a2)
			clear(ae)
			rows = 0
		}
	}
	// Each position adds at most stridedFold terms of one sign in float32,
	// each rounded once or twice: relative error below
	// (stridedFold + 2)·2⁻²⁴; the float64 additions add far less.
	tol := float64(stridedFold+4) * 0x1p-23
	act, fac := b.act[:k], b.fac[:k]
	scale := false
	for c := range k {
		emin, emax := lo[c*in], hi[c*in]
		for j := c*in + 1; j < (c+1)*in; j++ {
			emin, emax = min(emin, lo[j]), max(emax, hi[j])
		}
		a, f := decideUndecided, float32(0)
		if z2, ze := s2[c], se[c]; z2 >= 1e-25 && z2 <= 1e30 && ze >= 1e-25 && ze <= 1e30 {
			a, f = dec.decide32(z2, ze, float64(emin), float64(emax), tol, lambda)
		}
		act[c], fac[c] = int8(a), f
		scale = scale || a == decideScale
	}
	if scale {
		cv := b.cv[:n]
		for c := range k {
			for j := c * in; j < (c+1)*in; j++ {
				cv[j] = fac[c]
			}
		}
		for o := range l.outer {
			r, e := row(o), eta[o*n:(o+1)*n]
			// Runs of consecutive groups that scale, one call each.
			for c := 0; c < k; {
				if act[c] != decideScale {
					c++
					continue
				}
				c1 := c + 1
				for c1 < k && act[c1] == decideScale {
					c1++
				}
				xs := x[r+c*in : r+c1*in]
				scaleFirstOrderVec(xs, xs, e[c*in:c1*in], cv[c*in:c1*in])
				c = c1
			}
		}
	}
	local := groupLayout{count: k, size: l.size, outer: l.outer, inner: in, stride: n}
	for c := range k {
		switch act[c] {
		case decideZero:
			for o := range l.outer {
				clear(x[row(o)+c*in:][:in])
			}
		case decideUndecided:
			g := w.g0 + c
			xg, eg := w.buf[:l.size], w.buf[l.size:2*l.size]
			l.gather(xg, x, g)
			local.gather(eg, eta, c)
			w.reg.Prox(xg, xg, eg, lambda)
			l.scatter(x, xg, g)
		}
	}
	if clipAt > 0 {
		for o := range l.outer {
			clip(x[row(o):][:n], float32(clipAt))
		}
	}
}
