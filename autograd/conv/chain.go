package conv

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// Chains reports whether RunChained can run p followed by next handing the
// activation over in next's padded layout: both sparse, on the widened
// grid of stride 1 (see sparseConv), with p's output the size of next's
// input and the same padded row length, as the two convolutions of a
// residual block are.
func (p *Plan) Chains(next *Plan) bool {
	a, b := p.g, next.g
	return p.sparse != nil && next.sparse != nil && sparseWide(a) && sparseWide(b) &&
		p.cout == b.c && a.ho == b.h && a.wo == b.w && a.widePitch() == b.widePitch() &&
		a.widePitch()*(b.h+2*b.ph) >= a.ho*a.widePitch()+b.ph*b.widePitch()+b.pw
}

// sparseWide reports whether sparseConv computes a convolution of geometry
// g on the widened grid of stride 1, reading the padded image.
func sparseWide(g *Geom) bool { return g.wide() && g.wo >= 8 }

// RunChained sets out to next's convolution of the ReLU of p's convolution
// of the n images in x, with next's epilogue: plus residual (when not nil;
// laid out as out), clamped at zero if relu. It computes exactly what
// p.Run(n, x, t, nil, true) followed by next.Run(n, t, out, residual, relu)
// computes, but p writes its product straight into the zero-padded image
// next reads (rows of the widened grid land on the padded rows, their
// extra columns on the padding, which is then cleared), so that neither
// p's copy out of the widened grid nor next's padded copy is made. It
// panics unless p.Chains(next), or on lengths Run would refuse.
func (p *Plan) RunChained(next *Plan, n int, x, out, residual []float32, relu bool) {
	if !p.Chains(next) {
		panic(fmt.Sprintf("conv.Plan.RunChained: a %s plan of %d×%d outputs does not chain into a %s plan of %d×%d inputs",
			p.Algorithm(n), p.g.ho, p.g.wo, next.Algorithm(n), next.g.h, next.g.w))
	}
	xSize, ySize := p.InSize(), next.OutSize()
	if n < 1 || len(x) != n*xSize || len(out) != n*ySize || (residual != nil && len(residual) != n*ySize) {
		panic(fmt.Sprintf("conv.Plan.RunChained: %d images need %d input and %d output values, got %d, %d and residual %d",
			n, n*xSize, n*ySize, len(x), len(out), len(residual)))
	}
	a, b := p.g, next.g
	wp := a.widePitch()
	c := chainCall{p: p, next: next, x: x, out: out, residual: residual, relu: relu,
		offA:  p.sparse.offsets((a.h+2*a.ph)*wp, a.dh*wp, a.dw),
		offB:  next.sparse.offsets((b.h+2*b.ph)*wp, b.dh*wp, b.dw),
		spanA: wideSpan(a), spanB: wideSpan(b), serial: n < parallel.Workers()}
	c.loop(n, false)
}

// chainCall is one call of RunChained or RunBlockPadded: what the loop
// over the images needs, handed to methods rather than captured by
// closures, so that a call on one worker allocates nothing.
type chainCall struct {
	p, next          *Plan
	x, out, residual []float32 // RunBlockPadded: x and out padded
	relu             bool
	offA, offB       *kernels.CSR
	spanA, spanB     int
	serial           bool
}

// loop computes the images [0, n) of RunChained (or, if block, of
// RunBlockPadded) as parallel.For(n, 1, ...) would, on the calling
// goroutine when For would run them there.
func (c *chainCall) loop(n int, block bool) {
	if parallel.Workers() <= 1 || n == 1 {
		c.images(0, n, block)
		return
	}
	h := *c // only a parallel loop puts the call on the heap
	parallel.For(n, 1, func(lo, hi int) { h.images(lo, hi, block) })
}

// images computes the images [lo, hi).
func (c *chainCall) images(lo, hi int, block bool) {
	if block {
		c.block(lo, hi)
		return
	}
	c.chained(lo, hi)
}

// chained computes the images [lo, hi) of RunChained.
func (c *chainCall) chained(lo, hi int) {
	p, next := c.p, c.next
	a, b := p.g, next.g
	wp := a.widePitch()
	xSize, ySize := p.InSize(), next.OutSize()
	e := epilogueOf(c.residual, c.relu)
	padA, padB := colScratch.get(a.padSize()), colScratch.get(b.padSize())
	tmp := colScratch.get(next.cout * b.ho * wp)
	defer colScratch.put(padA)
	defer colScratch.put(padB)
	defer colScratch.put(tmp)
	for i := lo; i < hi; i++ {
		padImage(a, c.x[i*xSize:(i+1)*xSize], padA)
		p.reluPadded(next, padB, padA, c.offA, c.spanA, c.serial)
		var r []float32
		if e == kernels.AddReLU {
			r = c.residual[i*ySize : (i+1)*ySize]
		}
		next.sparse.mulRows(tmp, b.ho*wp, b.ho*wp, c.offB, padB, next.bias, c.spanB, c.serial)
		y := c.out[i*ySize : (i+1)*ySize]
		dropWide(b, next.cout, wp, tmp, y, r, e)
		if c.residual != nil && !c.relu {
			// kernels.Affine adds a residual only before a ReLU.
			for k, v := range c.residual[i*ySize : (i+1)*ySize] {
				y[k] += v
			}
		}
	}
}

// reluPadded writes the ReLU of p's product of the padded image src (read
// with the offsets off and window span) into dst in next's padded layout:
// the widened rows land on the padded rows, their extra columns on the
// padding, which is then cleared. p.Chains(next) must hold.
func (p *Plan) reluPadded(next *Plan, dst, src []float32, off *kernels.CSR, span int, serial bool) {
	a, b := p.g, next.g
	wp := a.widePitch()
	plane := (b.h + 2*b.ph) * wp
	at, np := b.ph*wp+b.pw, a.ho*wp
	p.sparse.mulRows(dst[at:], plane, np, off, src, p.bias, span, serial)
	for c := range p.cout {
		pl := dst[c*plane : (c+1)*plane]
		kernels.Affine(pl[at:at+np], pl[at:at+np], nil, 0, 1, 0, kernels.ReLU)
		clearPadding(b, pl)
	}
	clear(dst[p.cout*plane:])
}

// epilogueOf returns the epilogue that adds residual (when not nil) and
// applies the ReLU (if relu); kernels.Plain for a residual alone, which
// kernels.Affine does not add.
func epilogueOf(residual []float32, relu bool) kernels.Epilogue {
	switch {
	case residual != nil && relu:
		return kernels.AddReLU
	case relu:
		return kernels.ReLU
	}
	return kernels.Plain
}

// clearPadding zeroes the padding of one channel of the padded image of
// geometry g (rows of g.widePitch() values), leaving the image itself.
func clearPadding(g *Geom, pl []float32) {
	wp := g.widePitch()
	clear(pl[:g.ph*wp+g.pw])
	for r := g.ph; r < g.ph+g.h; r++ {
		end := r*wp + g.pw + g.w
		next := min((r+1)*wp+g.pw, len(pl))
		if r == g.ph+g.h-1 {
			next = len(pl)
		}
		for j := end; j < next; j++ {
			pl[j] = 0 // a few values: no call to memclr
		}
	}
}

// ChainsResidual reports whether RunBlockPadded can run p and next as a
// residual block with the identity shortcut kept in p's padded layout:
// p.Chains(next), and next's output is an image of p's input geometry, so
// that the block's output can be written in the padded layout its input
// came in.
func (p *Plan) ChainsResidual(next *Plan) bool {
	a, b := p.g, next.g
	return p.Chains(next) && next.cout == a.c && b.ho == a.h && b.wo == a.w &&
		a.ph == b.ph && a.pw == b.pw && a.padSize() == b.padSize()
}

// SameInput reports whether p and q read images of the same shape in the
// same padded layout.
func (p *Plan) SameInput(q *Plan) bool {
	a, b := p.g, q.g
	return a.c == b.c && a.h == b.h && a.w == b.w && a.ph == b.ph && a.pw == b.pw && a.padSize() == b.padSize()
}

// PaddedSize returns the number of values of one image in p's padded
// layout, the layout RunBlockPadded reads and writes.
func (p *Plan) PaddedSize() int { return p.g.padSize() }

// Pad writes the n images of x (InSize values each) into xPad in p's
// padded layout (PaddedSize values each).
func (p *Plan) Pad(n int, x, xPad []float32) {
	xs, ps := p.InSize(), p.PaddedSize()
	p.checkPadded("Pad", n, len(x), xs, len(xPad))
	if parallel.Workers() <= 1 || n == 1 {
		for i := range n { // without a closure for the pool
			padImage(p.g, x[i*xs:(i+1)*xs], xPad[i*ps:(i+1)*ps])
		}
		return
	}
	parallel.For(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			padImage(p.g, x[i*xs:(i+1)*xs], xPad[i*ps:(i+1)*ps])
		}
	})
}

// Unpad is the inverse of Pad: it copies the images out of the padded
// layout.
func (p *Plan) Unpad(n int, xPad, x []float32) {
	xs := p.InSize()
	p.checkPadded("Unpad", n, len(x), xs, len(xPad))
	if parallel.Workers() <= 1 || n == 1 {
		p.unpad(0, n, xPad, x) // without a closure for the pool
		return
	}
	parallel.For(n, 1, func(lo, hi int) { p.unpad(lo, hi, xPad, x) })
}

// unpad is Unpad for the images [lo, hi).
func (p *Plan) unpad(lo, hi int, xPad, x []float32) {
	xs, ps := p.InSize(), p.PaddedSize()
	g := p.g
	wp, plane := g.widePitch(), (g.h+2*g.ph)*g.widePitch()
	for i := lo; i < hi; i++ {
		src, dst := xPad[i*ps:(i+1)*ps], x[i*xs:(i+1)*xs]
		for c := range g.c {
			for r := range g.h {
				at := c*plane + (r+g.ph)*wp + g.pw
				copyRow(dst[(c*g.h+r)*g.w:(c*g.h+r+1)*g.w], src[at:at+g.w])
			}
		}
	}
}

// checkPadded panics unless n images fit the plain and padded lengths.
func (p *Plan) checkPadded(op string, n, plain, plainSize, padded int) {
	if n < 1 || plain != n*plainSize || padded != n*p.PaddedSize() {
		panic(fmt.Sprintf("conv.Plan.%s: %d images need %d plain and %d padded values, got %d and %d",
			op, n, n*plainSize, n*p.PaddedSize(), plain, padded))
	}
}

// RunBlockPadded runs the residual block relu(next(relu(p(x))) + x) on the
// n images in xPad, in p's padded layout (see Pad), and writes the result
// in the same layout into outPad: RunChained with the identity shortcut,
// where the residual is read from the padded input at the positions the
// output is written to, and no image is copied in or out. Consecutive
// blocks of one size thus pass their activations on without a copy. It
// computes exactly what Unpad, RunChained(next, n, x, out, x, true) and
// Pad compute. It panics unless p.ChainsResidual(next), or on other
// lengths; outPad must not overlap xPad.
func (p *Plan) RunBlockPadded(next *Plan, n int, xPad, outPad []float32) {
	if !p.ChainsResidual(next) {
		panic(fmt.Sprintf("conv.Plan.RunBlockPadded: a %s plan of %d channels of %d×%d does not chain into a %s plan back to its input",
			p.Algorithm(n), p.g.c, p.g.h, p.g.w, next.Algorithm(n)))
	}
	ps := p.PaddedSize()
	if n < 1 || len(xPad) != n*ps || len(outPad) != n*ps {
		panic(fmt.Sprintf("conv.Plan.RunBlockPadded: %d images need %d padded values in and out, got %d and %d",
			n, n*ps, len(xPad), len(outPad)))
	}
	a, b := p.g, next.g
	wp := a.widePitch()
	plane := (a.h + 2*a.ph) * wp
	c := chainCall{p: p, next: next, x: xPad, out: outPad,
		offA: p.sparse.offsets(plane, a.dh*wp, a.dw), offB: next.sparse.offsets(plane, b.dh*wp, b.dw),
		spanA: wideSpan(a), spanB: wideSpan(b), serial: n < parallel.Workers()}
	c.loop(n, true)
}

// block computes the images [lo, hi) of RunBlockPadded.
func (c *chainCall) block(lo, hi int) {
	p, next := c.p, c.next
	a, b := p.g, next.g
	wp := a.widePitch()
	plane := (a.h + 2*a.ph) * wp
	at := a.ph*wp + a.pw
	npB := b.ho * wp // next's product per filter, widened
	ps := p.PaddedSize()
	mid := colScratch.get(b.padSize())
	defer colScratch.put(mid)
	for i := lo; i < hi; i++ {
		in, out := c.x[i*ps:(i+1)*ps], c.out[i*ps:(i+1)*ps]
		p.reluPadded(next, mid, in, c.offA, c.spanA, c.serial)
		next.sparse.mulRows(out[at:], plane, npB, c.offB, mid, next.bias, c.spanB, c.serial)
		for ch := range next.cout {
			pl, res := out[ch*plane:(ch+1)*plane], in[ch*plane:(ch+1)*plane]
			kernels.Affine(pl[at:at+npB], pl[at:at+npB], res[at:at+npB], 0, 1, 0, kernels.AddReLU)
			clearPadding(a, pl)
		}
		clear(out[next.cout*plane:])
	}
}
