package conv

import (
	"math"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/autograd/nchwc"
	"github.com/proxgen/proxgen/internal/parallel"
)

// gatherOK reports whether a convolution of geometry g can be computed by
// gatherConv: no negative padding, so that every row of the im2col matrix
// is a zero-padded copy of the image read at an offset (see gatherImage),
// in one of three layouts. For stride 1, wide, for output rows made of
// whole runs of blas.GatherRun positions, or flat, for outputs as wide as
// the input with at least 64 positions; for a larger stride equal on both
// axes, without dilation, phase, for output rows of whole runs. Offsets
// must fit in an int32, and a 1×1 convolution with stride 1 and no padding
// needs no im2col at all.
func gatherOK(g *Geom) bool {
	return g.ph >= 0 && g.pw >= 0 && !g.direct() && (g.gatherWide() || g.gatherFlat() || g.gatherPhase()) &&
		g.gatherSize() <= math.MaxInt32
}

// gatherWide reports whether gatherConv uses the wide layout: stride 1,
// the image zero-padded as im2colWide reads it (padImage), each output row
// made of whole runs.
func (g *Geom) gatherWide() bool { return g.wide() && g.wo%blas.GatherRun == 0 }

// gatherFlat reports whether gatherConv uses the flat layout (see
// flatImage): stride 1, outputs as wide as the input (2·pw = dw·(kw−1)),
// pw < w, and at least 64 output positions (a 32-column tile of the
// product takes one image's, so fewer would leave it idle), unless the
// wide layout applies.
func (g *Geom) gatherFlat() bool {
	return g.wide() && !g.gatherWide() && g.wo == g.w && g.pw < g.w && g.cols >= 64
}

// gatherPhase reports whether gatherConv uses the phase layout (see
// phaseImage): a stride s > 1 on both axes, no dilation, output rows of
// whole runs.
func (g *Geom) gatherPhase() bool {
	return g.sh > 1 && g.sh == g.sw && g.dh == 1 && g.dw == 1 && g.wo%blas.GatherRun == 0
}

// gatherSize returns the length of the buffer gatherImage fills.
func (g *Geom) gatherSize() int {
	switch {
	case g.gatherWide():
		return g.padSize()
	case g.gatherPhase():
		return g.phaseSize()
	}
	return g.kw * g.flatCopySize()
}

// phaseSize returns the length of the buffer phaseImage fills: the phase
// planes and blas.GatherRun zeros, which the last rows read past the
// last plane.
func (g *Geom) phaseSize() int {
	pa, pb, ph, pw := g.phases()
	return g.c*pa*pb*ph*pw + blas.GatherRun
}

// phases returns the shape of the phase layout: pa × pb phase planes per
// channel (only those some kernel tap reads), each of ph rows of pw values.
func (g *Geom) phases() (pa, pb, ph, pw int) {
	s := g.sh
	return min(s, g.kh), min(s, g.kw), (g.h + 2*g.ph + s - 1) / s, (g.w + 2*g.pw + s - 1) / s
}

// phaseImage writes the phase layout of the image x for geometry g (stride
// s) into buf: for every channel ci, the planes of phase (a, b) hold the
// zero-padded image's elements (s·r + a, s·c + b) at row r, column c. Tap
// (ki, kj) at output position (oh, ow) reads the padded image at (s·oh +
// ki, s·ow + kj), which is element (oh + ki/s, ow + kj/s) of phase (ki mod
// s, kj mod s): in that plane the im2col matrix has stride 1, and each
// output row is one run.
func phaseImage(g *Geom, x, buf []float32, c0, c1 int) {
	_, _, ph, _ := g.phases()
	phaseRows(g, x, buf, c0, c1, 0, ph)
}

// phaseRows is phaseImage for the rows [r0, r0+rows) of every phase plane
// alone, planes of rows·pw values (rows past the last are zero), followed
// by blas.GatherRun zeros once the last channel is written.
func phaseRows(g *Geom, x, buf []float32, c0, c1, r0, rows int) {
	s := g.sh
	pa, pb, _, pw := g.phases()
	plane := rows * pw
	hw := g.h * g.w
	for ci := c0; ci < c1; ci++ {
		img := x[ci*hw : (ci+1)*hw]
		for a := 0; a < pa; a++ {
			for b := 0; b < pb; b++ {
				dst := buf[((ci*pa+a)*pb+b)*plane : ((ci*pa+a)*pb+b+1)*plane]
				// Columns c whose image column s·c + b − pw lies in [0,
				// w), rows r whose image row s·(r0 + r) + a − ph lies in
				// [0, h).
				lo, hi := validRange(b-g.pw, s, g.w, pw)
				off := s*r0 + a - g.ph
				rlo, rhi := validRange(off, s, g.h, rows)
				clear(dst[:rlo*pw])
				clear(dst[rhi*pw:])
				for r := rlo; r < rhi; r++ {
					// The columns outside the image: a few stores
					// per row, cheaper than a call.
					row := dst[r*pw : (r+1)*pw]
					for c := range lo {
						row[c] = 0
					}
					for c := hi; c < pw; c++ {
						row[c] = 0
					}
				}
				if lo == hi || rlo == rhi {
					continue
				}
				// Image columns s·c + b − pw, c in [lo, hi), of the rows
				// s·(r0 + r) + a − ph, r in [rlo, rhi).
				at := (off+s*rlo)*g.w + s*lo + b - g.pw
				if s == 2 {
					kernels.Stride2Rows(dst[rlo*pw+lo:], pw, img[at:], 2*g.w, rhi-rlo, hi-lo)
					continue
				}
				for r := rlo; r < rhi; r++ {
					src := img[at+(r-rlo)*s*g.w:]
					d := dst[r*pw+lo : r*pw+hi]
					src = src[:s*(len(d)-1)+1]
					for c := range d {
						d[c] = src[s*c]
					}
				}
			}
		}
	}
	if c1 == g.c {
		end := g.c * pa * pb * plane
		clear(buf[end : end+blas.GatherRun])
	}
}

// flatCopySize returns the length of one copy of the image in the flat
// layout: a guard of pw zeros, the c planes of (h + 2·ph) rows of w values
// with the padding rows zero, and pw + 16 zeros, which the last runs may
// read past the last plane.
func (g *Geom) flatCopySize() int {
	return g.c*(g.h+2*g.ph)*g.w + 2*g.pw + blas.GatherRun
}

// gatherImage writes the image x in the layout gatherConv reads for
// geometry g into buf (g.gatherSize() values).
func gatherImage(g *Geom, x, buf []float32) { gatherChannels(g, x, buf, 0, g.c) }

// gatherChannels is gatherImage for the channels [c0, c1) of x alone:
// ranges that cover [0, g.c) write all of buf between them, each its own
// part.
func gatherChannels(g *Geom, x, buf []float32, c0, c1 int) {
	switch {
	case g.gatherWide():
		padChannels(g, x, buf, c0, c1)
	case g.gatherPhase():
		phaseImage(g, x, buf, c0, c1)
	default:
		flatImage(g, x, buf, c0, c1)
	}
}

// flatImage writes the flat layout of the image x for geometry g into buf:
// kw copies of the vertically zero-padded image with rows of w values
// (see flatCopySize), one per kernel column kj. Output position q = oh·w
// + ow under tap (ki, kj) then reads copy kj at ci·plane + (oh + ki·dh)·w
// + kj·dw + ow: the whole output is one run of consecutive positions. Where
// the tap's column ow + kj·dw − pw lies left or right of the image, that
// read lands on the other end of the previous or next row (or the guard
// zeros), so copy kj has the columns that tap never reads legitimately
// zeroed: the last pw − kj·dw, or the first kj·dw − pw.
func flatImage(g *Geom, x, buf []float32, c0, c1 int) {
	size, plane := g.flatCopySize(), (g.h+2*g.ph)*g.w
	hw := g.h * g.w
	for kj := 0; kj < g.kw; kj++ {
		dst := buf[kj*size : (kj+1)*size]
		if c0 == 0 {
			clear(dst[:g.pw])
		}
		lo, hi := 0, g.w // the columns kept
		if s := kj*g.dw - g.pw; s < 0 {
			hi = g.w + s
		} else {
			lo = s
		}
		for ci := c0; ci < c1; ci++ {
			pl := dst[g.pw+ci*plane : g.pw+(ci+1)*plane]
			clear(pl[:g.ph*g.w])
			// The rows are as long as the image's: the channel in one
			// copy, then the columns the tap never reads zeroed (a few
			// stores per row; small images have many short rows, where
			// a call per row would cost more than the copy).
			body := pl[g.ph*g.w : (g.ph+g.h)*g.w]
			copy(body, x[ci*hw:(ci+1)*hw])
			if lo > 0 || hi < g.w {
				for r := 0; r < g.h; r++ {
					row := body[r*g.w : (r+1)*g.w]
					for c := range lo {
						row[c] = 0
					}
					for c := hi; c < g.w; c++ {
						row[c] = 0
					}
				}
			}
			clear(pl[(g.h+g.ph)*g.w:])
		}
		if c1 == g.c {
			clear(dst[g.pw+g.c*plane:])
		}
	}
}

// useGather reports whether a convolution of geometry g that does not run
// with Winograd runs with gatherConv: whenever it can, unless the caller
// forced im2col.
func useGather(g *Geom) bool {
	return gatherOK(g) && g.algo != AlgoIm2col
}

// gatherConv computes a convolution as blas.GatherA.SgemmGather products,
// one per image: the filter matrix times the image's im2col matrix, which
// is never stored, because its row (ci, ki, kj) is the zero-padded image
// (see padImage) read from offset ci·plane + ki·dh·wp + kj·dw, and its
// columns for output row oh are that row's ho·wp-pitched positions. The
// product goes straight into the output. Each element is computed by the
// same kernel in the same order as by convGroup's im2col GEMM, so the two
// give identical results.
type gatherConv struct {
	g          *Geom
	pa         *blas.GatherA // the m × g.rows filter matrix
	rows, runs []int32       // the blas.Gathered offsets
	// bands[parts] splits one image's output rows into parts bands (see
	// gatherBands), in the wide and phase layouts; nil in the flat one.
	bands []*gatherBands
}

// maxBands is the most parts gatherConv splits one image into.
const maxBands = 8

// gatherBands is the split of one image's product in the wide or phase
// layout into bands of output rows, one per part, each computed from its
// own copy of the input rows it reads (padRows, phaseRows): the parts
// share no written memory, and each copies only its rows and the few rows
// below them that its taps reach, instead of a range of channels that the
// other parts then read. Part k computes the runs [k·chunk, (k+1)·chunk)
// of the image's output, output rows [oh0[k], oh0[k]+bandRows) at most
// less the reach; its copy holds bandRows rows of every plane from row
// oh0[k] on, which the offsets rows and runs[k] read.
type gatherBands struct {
	chunk, bandRows int
	oh0             []int
	rows            []int32
	runs            [][]int32
}

// newGatherBands returns the split of the image of geometry g (wide or
// phase layout, runs the image's run count) into parts bands.
func newGatherBands(g *Geom, runs, parts int) *gatherBands {
	wp, reach := g.widePitch(), (g.kh-1)*g.dh // row pitch, rows below a band
	if g.gatherPhase() {
		_, _, _, wp = g.phases()
		reach = (g.kh - 1) / g.sh
	}
	chunk := (runs + parts - 1) / parts
	per := blas.GatherRun
	b := &gatherBands{chunk: chunk}
	span := 0 // the most output rows of a band
	for k := range parts {
		r0, r1 := min(k*chunk, runs), min((k+1)*chunk, runs)
		if r0 == r1 {
			b.oh0 = append(b.oh0, 0)
			b.runs = append(b.runs, nil)
			continue
		}
		oh0, oh1 := r0*per/g.wo, ((r1-1)*per)/g.wo+1
		span = max(span, oh1-oh0)
		b.oh0 = append(b.oh0, oh0)
		rr := make([]int32, 0, r1-r0)
		for r := r0; r < r1; r++ {
			q := r * per
			rr = append(rr, int32((q/g.wo-oh0)*wp+q%g.wo))
		}
		b.runs = append(b.runs, rr)
	}
	b.bandRows = span + reach
	plane := b.bandRows * wp
	for ci := 0; ci < g.c; ci++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				if g.gatherPhase() {
					s := g.sh
					pa, pb, _, _ := g.phases()
					p := (ci*pa+ki%s)*pb + kj%s
					b.rows = append(b.rows, int32(p*plane+ki/s*wp+kj/s))
					continue
				}
				b.rows = append(b.rows, int32(ci*plane+ki*g.dh*wp+kj*g.dw))
			}
		}
	}
	return b
}

// size returns the length of a band's copy.
func (b *gatherBands) size(g *Geom) int {
	if g.gatherPhase() {
		pa, pb, _, pw := g.phases()
		return g.c*pa*pb*b.bandRows*pw + blas.GatherRun
	}
	return g.c*b.bandRows*g.widePitch() + (g.kw-1)*g.dw
}

// copy writes the rows of band part of the image x into pad.
func (b *gatherBands) copy(g *Geom, x, pad []float32, part int) {
	if g.gatherPhase() {
		phaseRows(g, x, pad, 0, g.c, b.oh0[part], b.bandRows)
		return
	}
	padRows(g, x, pad, b.oh0[part], b.bandRows)
}

// padRows writes the padded rows [r0, r0+rows) of every channel of the
// image x (rows of the zero-padded image as padImage lays it out, padding
// rows zero) into pad, planes rows·wp apart, followed by (kw−1)·dw zeros.
func padRows(g *Geom, x, pad []float32, r0, rows int) {
	wp := g.widePitch()
	plane := rows * wp
	for ci := range g.c {
		dst := pad[ci*plane : (ci+1)*plane]
		for r := range rows {
			row := dst[r*wp : (r+1)*wp]
			ih := r0 + r - g.ph
			if ih < 0 || ih >= g.h {
				clear(row)
				continue
			}
			for i := range g.pw {
				row[i] = 0 // a few values: no call to memclr
			}
			copyRow(row[g.pw:g.pw+g.w], x[(ci*g.h+ih)*g.w:(ci*g.h+ih+1)*g.w])
			for i := g.pw + g.w; i < wp; i++ {
				row[i] = 0
			}
		}
	}
	clear(pad[g.c*plane : g.c*plane+(g.kw-1)*g.dw])
}

// newGatherConv prepares the convolution of geometry g with the m×g.rows
// filter matrix a (transA: a holds its transpose), packed into buf.
func newGatherConv(g *Geom, m int, a []float32, transA bool, buf []float32) *gatherConv {
	lda := g.rows
	if transA {
		lda = m
	}
	pa := blas.Default().PackGatherA(transA, m, g.rows, a, lda, buf)
	rows, runs := gatherOffsets(g)
	gc := &gatherConv{g: g, pa: pa, rows: rows, runs: runs}
	if g.gatherWide() || g.gatherPhase() {
		gc.bands = make([]*gatherBands, min(maxBands, g.cols/64)+1)
		for parts := 2; parts < len(gc.bands); parts++ {
			gc.bands[parts] = newGatherBands(g, len(runs), parts)
		}
	}
	return gc
}

// gatherOffsets returns the blas.Gathered row and run offsets of the im2col
// matrix of geometry g in the layout of gatherImage: in the wide layout,
// row (ci, ki, kj) starts at ci·plane + ki·dh·wp + kj·dw and the runs of
// output row oh at oh·wp; in the flat one, row (ci, ki, kj) starts at
// kj·copy + ci·plane + ki·dh·w + kj·dw and the runs are consecutive.
func gatherOffsets(g *Geom) (rows, runs []int32) {
	if g.gatherPhase() {
		return phaseOffsets(g)
	}
	wp := g.widePitch()
	base := 0 // of the copy for kj, flat
	if !g.gatherWide() {
		wp = g.w
		base = g.flatCopySize()
	}
	plane := (g.h + 2*g.ph) * wp
	rows = make([]int32, 0, g.rows)
	for ci := 0; ci < g.c; ci++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				rows = append(rows, int32(kj*base+ci*plane+ki*g.dh*wp+kj*g.dw))
			}
		}
	}
	runs = make([]int32, (g.cols+blas.GatherRun-1)/blas.GatherRun)
	for r := range runs {
		q := r * blas.GatherRun
		runs[r] = int32(q/g.wo*wp + q%g.wo)
	}
	return rows, runs
}

// phaseOffsets is gatherOffsets for the phase layout (see phaseImage): row
// (ci, ki, kj) starts in the plane of phase (ki mod s, kj mod s) of
// channel ci at row ki/s, column kj/s, and the run of output row oh at
// oh·pw.
func phaseOffsets(g *Geom) (rows, runs []int32) {
	s := g.sh
	pa, pb, ph, pw := g.phases()
	plane := ph * pw
	rows = make([]int32, 0, g.rows)
	for ci := 0; ci < g.c; ci++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				p := (ci*pa+ki%s)*pb + kj%s
				rows = append(rows, int32(p*plane+ki/s*pw+kj/s))
			}
		}
	}
	runs = make([]int32, g.cols/blas.GatherRun)
	for r := range runs {
		q := r * blas.GatherRun
		runs[r] = int32(q/g.wo*pw + q%g.wo)
	}
	return rows, runs
}

// gatherPackedSize returns the buffer size newGatherConv needs for m
// filters of geometry g.
func gatherPackedSize(g *Geom, m int) int { return blas.Default().PackedASize(m, g.rows) }

// run computes dst_i = conv(src_i) (or adds it, if accumulate) for the n
// images src_i of srcSize elements into the outputs dst_i of dstSize
// elements, in parallel over the images; with fewer images than workers,
// the output columns of each image are split too (which changes no
// result). If after is not nil, its epilogue (with the bias) is applied
// to the columns [j0, j1) of each image's output that a product has just
// written, while they are in the cache.
func (gc *gatherConv) run(n int, src []float32, srcSize int, dst []float32, dstSize int, accumulate bool, after *planCall) {
	g := gc.g
	p := g.cols
	parts := 1
	if w := parallel.Workers(); n < w {
		// Split on whole output rows' worth of runs, at least 64 columns.
		parts = max(1, min((w+n-1)/n, p/64))
	}
	c := gatherCall{gc: gc, src: src, dst: dst, srcSize: srcSize, dstSize: dstSize,
		chunk: (len(gc.runs) + parts - 1) / parts}
	if accumulate {
		c.beta = 1
	}
	if parts > 1 && parts < len(gc.bands) {
		// Each part copies the rows its band of output rows reads.
		h, ha := c.onHeap(after)
		parallel.For(n*parts, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				h.band(gc.bands[parts], t/parts, t%parts, ha)
			}
		})
		return
	}
	if parts > 1 {
		// The parts of an image share one copy, which they make together,
		// a range of channels each.
		pads := make([][]float32, n)
		for i := range pads {
			pads[i] = colScratch.get(g.gatherSize())
		}
		cc := (g.c + parts - 1) / parts
		h, ha := c.onHeap(after)
		parallel.For(n*parts, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				i, part := t/parts, t%parts
				gatherChannels(g, src[i*srcSize:(i+1)*srcSize], pads[i], min(part*cc, g.c), min((part+1)*cc, g.c))
			}
		})
		parallel.For(n*parts, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				h.product(t/parts, t%parts, pads[t/parts], ha)
			}
		})
		for _, pad := range pads {
			colScratch.put(pad)
		}
		return
	}
	if parallel.Workers() <= 1 || n == 1 {
		c.images(0, n, after) // on the calling goroutine, allocating nothing
		return
	}
	h, ha := c.onHeap(after)
	parallel.For(n, 1, func(lo, hi int) { h.images(lo, hi, ha) })
}

// gatherCall is one call of gatherConv.run: what its loops need, handed
// to methods rather than captured by closures, so that a call on the
// calling goroutine allocates nothing. The methods take the epilogue
// (after, or nil) apart: escape analysis does not tell a struct's fields
// apart, and the epilogue lives on the caller's stack.
type gatherCall struct {
	gc               *gatherConv
	src, dst         []float32
	srcSize, dstSize int
	beta             float32
	chunk            int // runs per part
}

// onHeap returns copies of c and of the epilogue after (nil if after is)
// for the loops of the worker pool, so that c and the caller's planCall
// can stay on the stack.
func (c *gatherCall) onHeap(after *planCall) (*gatherCall, *planCall) {
	h := *c
	if after == nil {
		return &h, nil
	}
	a := *after
	return &h, &a
}

// images computes the images [lo, hi) whole, each from its own copy.
func (c *gatherCall) images(lo, hi int, after *planCall) {
	g := c.gc.g
	pad := colScratch.get(g.gatherSize())
	defer colScratch.put(pad)
	for i := lo; i < hi; i++ {
		gatherImage(g, c.src[i*c.srcSize:(i+1)*c.srcSize], pad)
		c.product(i, 0, pad, after)
	}
}

// product computes part part of image i from its copy pad.
func (c *gatherCall) product(i, part int, pad []float32, after *planCall) {
	gc, p := c.gc, c.gc.g.cols
	r0 := min(part*c.chunk, len(gc.runs))
	r1 := min(r0+c.chunk, len(gc.runs))
	if r0 == r1 {
		return
	}
	j0, j1 := r0*blas.GatherRun, min(r1*blas.GatherRun, p)
	b := blas.Gathered{Src: pad, Rows: gc.rows, Runs: gc.runs[r0:r1]}
	gc.pa.SgemmGather(j1-j0, b, c.beta, c.dst[i*c.dstSize+j0:(i+1)*c.dstSize], p)
	if after != nil {
		after.after(i, j0, j1, true)
	}
}

// band computes band part of image i (see gatherBands) from its own copy
// of the rows the band reads.
func (c *gatherCall) band(bd *gatherBands, i, part int, after *planCall) {
	g, p := c.gc.g, c.gc.g.cols
	runs := bd.runs[part]
	if runs == nil {
		return
	}
	pad := colScratch.get(bd.size(g))
	defer colScratch.put(pad)
	bd.copy(g, c.src[i*c.srcSize:(i+1)*c.srcSize], pad, part)
	j0 := part * bd.chunk * blas.GatherRun
	j1 := min(j0+len(runs)*blas.GatherRun, p)
	b := blas.Gathered{Src: pad, Rows: bd.rows, Runs: runs}
	c.gc.pa.SgemmGather(j1-j0, b, c.beta, c.dst[i*c.dstSize+j0:(i+1)*c.dstSize], p)
	if after != nil {
		after.after(i, j0, j1, true)
	}
}

// gatherWeightGrad reports whether the weight gradient of a convolution
// with geometry g and cout filters is computed by weightGradGather: where
// gatherConv applies in the wide layout and the product runs as dot
// products of rows (at most 64 filters), which read the im2col matrix in
// place. Measured per layer pass at batch 128, the dot products beat
// weightGradGroup with 64 filters at 32×32 (124-125 against 132-134 ms)
// but lose in the flat layout, whose three copies of each image no longer
// fit the cache beside the group's other images (64 filters at 8×8: 11.0-
// 12.3 against 9.5-10.6 ms; 32 at 8×8: 4.0 against 3.4).
func gatherWeightGrad(g *Geom, cout int) bool {
	return useGather(g) && (g.gatherWide() || g.gatherPhase()) && cout <= 64
}

// weightGradGather returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·col_iᵀ over the images i in [lo, hi) in the (Cout, Cin,
// kh, kw) layout of the weights, as the product gp (see newWeightProduct)
// of the images' output gradients and their im2col matrices, read in
// place from the padded images; ws is the most images of a call.
func weightGradGather(g *Geom, gp *groupProductT, x, gy []float32, lo, hi, ws int) []float32 {
	xSize, ps := g.c*g.h*g.w, g.gatherSize()
	ySize, cnt := gp.m*g.cols, hi-lo
	pad := colScratch.get(ws * ps)
	defer colScratch.put(pad)
	for j := 0; j < cnt; j++ {
		gatherImage(g, x[(lo+j)*xSize:(lo+j+1)*xSize], pad[j*ps:(j+1)*ps])
	}
	part := partialScratch.get(gp.m * gp.k)
	gp.sum(cnt, gy[lo*ySize:hi*ySize], pad[:cnt*ps], part)
	return part
}

// newWeightProduct returns the product of weightGradGather for ws images
// of a convolution of geometry g with cout filters, whose im2col matrix
// has the gather offsets rows and runs.
func newWeightProduct(g *Geom, cout int, rows, runs []int32, ws int) *groupProductT {
	p := g.cols
	return newGroupProductT(cout, g.rows, p, ws, planeOffsets(cout, p), denseRuns(p), cout*p, rows, runs, g.gatherSize())
}

// groupProductT is Σ_j A_j·B_jᵀ (m×k) over a group of images j, where A_j
// (m×p) is gathered from image j's slice of one source, aStride values
// apart, with the row offsets aRows and image 0's run offsets as the
// first of aRuns, and B_j (k×p) likewise. With p a whole number of runs
// the images make one product, their runs side by side (aRuns and bRuns
// then list the runs of a whole group); otherwise each image is one.
type groupProductT struct {
	m, k, p          int
	aStride, bStride int
	aRows, aRuns     []int32
	bRows, bRuns     []int32
}

// newGroupProductT returns the product for groups of up to ws images;
// its offset tables are made once, for every group.
func newGroupProductT(m, k, p, ws int, aRows, aRuns []int32, aStride int, bRows, bRuns []int32, bStride int) *groupProductT {
	if p%blas.GatherRun == 0 {
		aRuns, bRuns = stackRuns(aRuns, ws, aStride), stackRuns(bRuns, ws, bStride)
	}
	return &groupProductT{m: m, k: k, p: p, aStride: aStride, bStride: bStride,
		aRows: aRows, aRuns: aRuns, bRows: bRows, bRuns: bRuns}
}

// sum sets part to the product over the cnt images of aSrc and bSrc.
func (gp *groupProductT) sum(cnt int, aSrc, bSrc, part []float32) {
	e := blas.Default()
	r := (gp.p + blas.GatherRun - 1) / blas.GatherRun // runs per image
	if gp.p%blas.GatherRun == 0 {
		a := blas.Gathered{Src: aSrc, Rows: gp.aRows, Runs: gp.aRuns[:cnt*r]}
		b := blas.Gathered{Src: bSrc, Rows: gp.bRows, Runs: gp.bRuns[:cnt*r]}
		e.SgemmGatherT(gp.m, cnt*gp.p, gp.k, a, b, 0, part, gp.k)
		return
	}
	for j := 0; j < cnt; j++ {
		beta := float32(1)
		if j == 0 {
			beta = 0
		}
		a := blas.Gathered{Src: aSrc[j*gp.aStride:], Rows: gp.aRows, Runs: gp.aRuns[:r]}
		b := blas.Gathered{Src: bSrc[j*gp.bStride:], Rows: gp.bRows, Runs: gp.bRuns[:r]}
		e.SgemmGatherT(gp.m, gp.p, gp.k, a, b, beta, part, gp.k)
	}
}

// planeOffsets returns the offsets of c planes of p values: 0, p, 2p, ...
func planeOffsets(c, p int) []int32 {
	offs := make([]int32, c)
	for i := range offs {
		offs[i] = int32(i * p)
	}
	return offs
}

// denseRuns returns the run offsets of p contiguous values.
func denseRuns(p int) []int32 {
	return planeOffsets((p+blas.GatherRun-1)/blas.GatherRun, blas.GatherRun)
}

// stackRuns returns the run offsets of cnt images stride apart, each with
// the run offsets runs.
func stackRuns(runs []int32, cnt, stride int) []int32 {
	out := make([]int32, 0, cnt*len(runs))
	for j := 0; j < cnt; j++ {
		for _, r := range runs {
			out = append(out, int32(j*stride)+r)
		}
	}
	return out
}

// gatherBackward computes both gradients of a stride-1 convolution of
// geometry g on n images from one zero-padded copy of each image's output
// gradient dY_i (see gatherImage), where gd is the geometry of the
// input-gradient convolution and wf its transposed filter matrix (see
// flipFilters). The input gradient is gatherConv's. The weight gradient
// uses the same padded image: with the input-gradient convolution's
// im2col matrix col_i of dY_i, whose row (co, a, b) is the padded dY_i
// read at an offset (see gatherOffsets),
//
//	dW[co][ci][kh−1−a][kw−1−b] = Σ_q x_i[ci][q]·col_i[(co, a, b)][q],
//
// a product of the rows of x_i and the gathered rows of col_i
// (blas.Engine.SgemmGatherT), summed over the images of each group and the
// groups in order as Backward does. gx is added to if accumulate;
// the weight gradient is added to dw.
//
// With bf not nil (the input-gradient filters of blockedFilters) the
// input gradient is the channel-blocked Winograd's (blockedImages) and wf
// is not read.
func gatherBackward(g, gd *Geom, n, cout int, x, wf, gy, gx, dw []float32, accumulate bool, bf *nchwc.WinoFilter) {
	cin, hw := g.c, g.h*g.w
	xSize, ySize := cin*hw, cout*g.cols
	var gc *gatherConv
	var rows, runs []int32
	var pb []float32 // the blocked input gradient's zero bias
	if bf == nil {
		buf := partialScratch.get(gatherPackedSize(gd, cin))
		defer partialScratch.put(buf)
		gc = newGatherConv(gd, cin, wf, true, buf)
		rows, runs = gc.rows, gc.runs
	} else {
		rows, runs = gatherOffsets(gd)
		pb = blockedBias(bf, nil)
	}
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	ws := weightGroupSize(hw)
	chunks := parallel.Chunks(n, ws)
	merge, acc := newOrderedSum(chunks, cin*gd.rows) // acc in (Cin; Cout, a, b) order
	defer partialScratch.put(acc)
	ps := gd.gatherSize()
	gp := newGroupProductT(cin, gd.rows, hw, min(ws, n), planeOffsets(cin, hw), denseRuns(hw), xSize, rows, runs, ps)
	parallel.For(n, ws, func(lo, hi int) {
		cnt := hi - lo
		pad := colScratch.get(cnt * ps)
		defer colScratch.put(pad)
		for j := 0; j < cnt; j++ {
			dy := pad[j*ps : (j+1)*ps]
			gatherImage(gd, gy[(lo+j)*ySize:(lo+j+1)*ySize], dy)
			if gc != nil {
				b := blas.Gathered{Src: dy, Rows: rows, Runs: runs}
				gc.pa.SgemmGather(hw, b, beta, gx[(lo+j)*xSize:(lo+j+1)*xSize], hw)
			}
		}
		if bf != nil {
			blockedImages(gd, bf, pb, gy, gx, accumulate, lo, hi)
		}
		part := partialScratch.get(cin * gd.rows)
		gp.sum(cnt, x[lo*xSize:hi*xSize], pad, part)
		merge.done(lo/ws, part)
	})
	khw := g.kh * g.kw
	for ci := 0; ci < cin; ci++ {
		for co := 0; co < cout; co++ {
			src := acc[ci*gd.rows+co*khw : ci*gd.rows+(co+1)*khw]
			dst := dw[(co*cin+ci)*khw : (co*cin+ci+1)*khw]
			for t, v := range src {
				dst[khw-1-t] += v
			}
		}
	}
}
