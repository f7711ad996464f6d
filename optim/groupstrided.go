package optim

import (
	"math"
	"sync"

	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
)

// The gradient step and group prox of a tensor whose groups are not
// contiguous (ByInputChannel: group c holds the runs W[o, c, :, :], inner
// elements each, one in each of outer rows of count·inner elements), for
// the group maps that decide most groups from float32 sums
// (Decider), in memory order instead of group by group:
//
//  1. blocks of stridedFold whole rows take the gradient step, η going to
//     the slot's aux, and each row, still in cache, adds z_i², z_i²η_i and
//     the range of η to per-position float32 sums, which the block then
//     folds into float64 sums per group;
//  2. the blocks' sums are added per group in block order (a fixed order
//     that depends only on the shape, so results do not depend on the
//     number of workers) and each group is decided: keep, zero, or scale
//     by the first-order group-lasso map;
//  3. one pass over the rows, while the tensor is in the last-level
//     cache, scales the groups that take the first-order map and zeroes
//     those that are zero; the groups the sums leave undecided (near a
//     threshold) are gathered and mapped by Prox.
//
// The decisions are exact (the sums' error bound is accounted for); the
// results equal Prox's up to the rounding of the sums in the factor of
// the first-order scaling.

// stridedFold is the number of rows of a block of stridedPass: each
// position adds at most this many float32 terms before they are folded
// into float64.
const stridedFold = 32

// stridedPass is the memory-order step and prox of one slot.
type stridedPass struct {
	l      proxk.Layout
	dec    proxk.Decider
	blocks int
	part   []float64 // per block, Σz² of each group then Σz²η of each group
	prange []float32 // per block, min η of each group then max η of each group
	act    []int8
	fac    []float32
	cv     []float32 // the scaling factor of each position of a row
	buf    []float32 // gather space for undecided groups
}

// stridedOK reports whether a stridedPass can apply r to groups of layout
// l (which must not be coupled).
func stridedOK(r prox.GroupRegularizer, l proxk.Layout) bool {
	_, ok := r.(proxk.Decider)
	return ok && !l.Contiguous() && l.Rows == 0 && l.Count > 0
}

// newStridedPass returns the pass of a tensor with layout l regularized by
// r; stridedOK(r, l) must hold.
func newStridedPass(r prox.GroupRegularizer, l proxk.Layout) *stridedPass {
	blocks := (l.Outer + stridedFold - 1) / stridedFold
	return &stridedPass{
		l: l, dec: r.(proxk.Decider), blocks: blocks,
		part:   make([]float64, 2*l.Count*blocks),
		prange: make([]float32, 2*l.Count*blocks),
		act:    make([]int8, l.Count),
		fac:    make([]float32, l.Count),
		cv:     make([]float32, l.Stride),
		buf:    make([]float32, 2*l.Size),
	}
}

// rowSums are the per-position float32 sums of a block of rows.
type rowSums struct{ a2, ae, lo, hi []float32 }

var rowSumsPool = sync.Pool{New: func() any { return new(rowSums) }}

// run takes the step of every row, step(lo, hi) taking that of elements
// [lo, hi) of x (at most ChunkSize) with η going to eta, then maps the
// groups of x with λ and clamps them to ±clipAt when clipAt > 0.
func (p *stridedPass) run(x, eta []float32, lambda float32, clipAt float64, step func(lo, hi int)) {
	l := p.l
	n, k, in := l.Stride, l.Count, l.Inner
	parallel.For(p.blocks, 1, func(b0, b1 int) {
		rs := rowSumsPool.Get().(*rowSums)
		defer rowSumsPool.Put(rs)
		if cap(rs.a2) < n {
			rs.a2, rs.ae, rs.lo, rs.hi = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		}
		a2, ae, lo, hi := rs.a2[:n], rs.ae[:n], rs.lo[:n], rs.hi[:n]
		for b := b0; b < b1; b++ {
			clear(a2)
			clear(ae)
			for i := range lo {
				lo[i], hi[i] = math.MaxFloat32, 0
			}
			for o := b * stridedFold; o < min((b+1)*stridedFold, l.Outer); o++ {
				for a := o * n; a < (o+1)*n; a += proxk.ChunkSize {
					e := min(a+proxk.ChunkSize, (o+1)*n)
					step(a, e)
					j, m := a-o*n, e-o*n
					proxk.AccumSums32(x[a:e], eta[a:e], a2[j:m], ae[j:m], lo[j:m], hi[j:m])
				}
			}
			s2, se := p.part[2*k*b:][:k], p.part[2*k*b+k:][:k]
			emin, emax := p.prange[2*k*b:][:k], p.prange[2*k*b+k:][:k]
			for c := range k {
				var u, v float64
				mn, mx := lo[c*in], hi[c*in]
				for j := c * in; j < (c+1)*in; j++ {
					u += float64(a2[j])
					v += float64(ae[j])
					mn, mx = min(mn, lo[j]), max(mx, hi[j])
				}
				s2[c], se[c], emin[c], emax[c] = u, v, mn, mx
			}
		}
	})
	// Each position adds at most stridedFold terms of one sign in float32,
	// each rounded once or twice: relative error below
	// (stridedFold + 2)·2⁻²⁴; the float64 additions add far less.
	tol := float64(stridedFold+4) * 0x1p-23
	scale, zero := false, false
	for c := range k {
		var z2, ze float64
		emin, emax := float32(math.MaxFloat32), float32(0)
		for b := range p.blocks {
			z2 += p.part[2*k*b+c]
			ze += p.part[2*k*b+k+c]
			emin, emax = min(emin, p.prange[2*k*b+c]), max(emax, p.prange[2*k*b+k+c])
		}
		a, f := proxk.DecideUndecided, float32(0)
		if proxk.Sums32InRange(z2, ze) {
			a, f = p.dec.Decide32(z2, ze, float64(emin), float64(emax), tol, lambda)
		}
		p.act[c], p.fac[c] = int8(a), f
		scale = scale || a == proxk.DecideScale
		zero = zero || a == proxk.DecideZero
		for j := c * in; j < (c+1)*in; j++ {
			p.cv[j] = f
		}
	}
	if scale || zero {
		parallel.For(p.blocks, 1, func(b0, b1 int) {
			for o := b0 * stridedFold; o < min(b1*stridedFold, l.Outer); o++ {
				xr, er := x[o*n:(o+1)*n], eta[o*n:(o+1)*n]
				// Runs of consecutive groups with the same decision, one
				// call each.
				for c := 0; c < k; {
					a := p.act[c]
					c1 := c + 1
					for c1 < k && p.act[c1] == a {
						c1++
					}
					xs := xr[c*in : c1*in]
					switch a {
					case proxk.DecideScale:
						proxk.ScaleFirstOrderVec(xs, xs, er[c*in:c1*in], p.cv[c*in:c1*in])
					case proxk.DecideZero:
						clear(xs)
					}
					c = c1
				}
			}
		})
	}
	xg, eg := p.buf[:l.Size], p.buf[l.Size:]
	for c := range k {
		if p.act[c] != proxk.DecideUndecided {
			continue
		}
		l.Gather(xg, x, c)
		l.Gather(eg, eta, c)
		p.dec.(prox.GroupRegularizer).Prox(xg, xg, eg, lambda)
		l.Scatter(x, xg, c)
	}
	if clipAt > 0 {
		parallel.For(p.blocks, 1, func(b0, b1 int) {
			clip(x[b0*stridedFold*n:min(b1*stridedFold, l.Outer)*n], float32(clipAt))
		})
	}
}
