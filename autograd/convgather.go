package autograd

import (
	"math"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/parallel"
)

// gatherOK reports whether a convolution of geometry g can be computed by
// gatherConv: stride 1 and no negative padding (so that every row of the
// im2col matrix is the zero-padded image read at an offset), output rows
// made of whole runs of blas.GatherRun positions, offsets that fit in an
// int32, and not a 1×1 convolution that needs no im2col at all.
func gatherOK(g *convGeom) bool {
	return g.wide() && !g.direct() && g.wo%blas.GatherRun == 0 && g.padSize() <= math.MaxInt32
}

// useGather reports whether a convolution of geometry g that does not run
// with Winograd runs with gatherConv: whenever it can, unless the caller
// forced im2col.
func useGather(g *convGeom) bool {
	return gatherOK(g) && g.algo != algoIm2col
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
	g          *convGeom
	pa         *blas.GatherA // the m × g.rows filter matrix
	rows, runs []int32       // the blas.Gathered offsets
}

// newGatherConv prepares the convolution of geometry g with the m×g.rows
// filter matrix a (transA: a holds its transpose), packed into buf.
func newGatherConv(g *convGeom, m int, a []float32, transA bool, buf []float32) *gatherConv {
	lda := g.rows
	if transA {
		lda = m
	}
	pa := blas.Default().PackGatherA(transA, m, g.rows, a, lda, buf)
	rows, runs := gatherOffsets(g)
	return &gatherConv{g: g, pa: pa, rows: rows, runs: runs}
}

// gatherOffsets returns the blas.Gathered row and run offsets of the im2col
// matrix of geometry g in its zero-padded image (see gatherConv).
func gatherOffsets(g *convGeom) (rows, runs []int32) {
	wp := g.widePitch()
	plane := (g.h + 2*g.ph) * wp
	rows = make([]int32, 0, g.rows)
	for ci := 0; ci < g.c; ci++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				rows = append(rows, int32(ci*plane+ki*g.dh*wp+kj*g.dw))
			}
		}
	}
	runs = make([]int32, g.cols/blas.GatherRun)
	for r := range runs {
		q := r * blas.GatherRun
		runs[r] = int32(q/g.wo*wp + q%g.wo)
	}
	return rows, runs
}

// gatherPackedSize returns the buffer size newGatherConv needs for m
// filters of geometry g.
func gatherPackedSize(g *convGeom, m int) int { return blas.Default().PackedASize(m, g.rows) }

// run computes dst_i = conv(src_i) (or adds it, if accumulate) for the n
// images src_i of srcSize elements into the outputs dst_i of dstSize
// elements, in parallel over the images; with fewer images than workers,
// the output columns of each image are split too (which changes no
// result).
func (gc *gatherConv) run(n int, src []float32, srcSize int, dst []float32, dstSize int, accumulate bool) {
	g := gc.g
	p := g.cols
	parts := 1
	if w := parallel.Workers(); n < w {
		// Split on whole output rows' worth of runs, at least 64 columns.
		parts = max(1, min((w+n-1)/n, p/64))
	}
	chunk := (len(gc.runs) + parts - 1) / parts // runs per part
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	parallel.For(n*parts, 1, func(lo, hi int) {
		pad := colScratch.get(g.padSize())
		defer colScratch.put(pad)
		last := -1
		for t := lo; t < hi; t++ {
			i, part := t/parts, t%parts
			if i != last {
				padImage(g, src[i*srcSize:(i+1)*srcSize], pad)
				last = i
			}
			r0 := min(part*chunk, len(gc.runs))
			r1 := min(r0+chunk, len(gc.runs))
			if r0 == r1 {
				continue
			}
			j0, j1 := r0*blas.GatherRun, r1*blas.GatherRun
			b := blas.Gathered{Src: pad, Rows: gc.rows, Runs: gc.runs[r0:r1]}
			gc.pa.SgemmGather(j1-j0, b, beta, dst[i*dstSize+j0:(i+1)*dstSize], p)
		}
	})
}

// gatherWeightGrad reports whether the weight gradient of a convolution
// with geometry g and cout filters is computed by weightGradGather: where
// gatherConv applies and the product runs as dot products of rows (at
// most 64 filters), which read the im2col matrix in place.
func gatherWeightGrad(g *convGeom, cout int) bool {
	return useGather(g) && cout <= 64
}

// weightGradGather returns, in a buffer from partialScratch, the weight
// gradient Σ dY_i·col_iᵀ over the images i in [lo, hi) in the (Cout, Cin,
// kh, kw) layout of the weights, as one product of the images' output
// gradients side by side and their im2col matrices side by side, read in
// place from the padded images (blas.Engine.SgemmGatherT). rows and runs
// are g's gather offsets; ws is the most images of a call.
func weightGradGather(g *convGeom, cout int, rows, runs []int32, x, gy []float32, lo, hi, ws int) []float32 {
	xSize, p, ps := g.c*g.h*g.w, g.cols, g.padSize()
	ySize, cnt := cout*p, hi-lo
	pad := colScratch.get(ws * ps)
	defer colScratch.put(pad)
	for j := 0; j < cnt; j++ {
		padImage(g, x[(lo+j)*xSize:(lo+j+1)*xSize], pad[j*ps:(j+1)*ps])
	}
	a := blas.Gathered{Src: gy[lo*ySize : hi*ySize], Rows: planeOffsets(cout, p), Runs: stackRuns(denseRuns(p), cnt, ySize)}
	b := blas.Gathered{Src: pad[:cnt*ps], Rows: rows, Runs: stackRuns(runs, cnt, ps)}
	part := partialScratch.get(cout * g.rows)
	blas.Default().SgemmGatherT(cout, cnt*p, g.rows, a, b, 0, part, g.rows)
	return part
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
func denseRuns(p int) []int32 { return planeOffsets(p/blas.GatherRun, blas.GatherRun) }

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

// useGatherBackward reports whether both gradients of a stride-1
// convolution on n images with cin input channels are computed by
// gatherBackward, given the geometry gd of its input-gradient
// convolution: where that convolution runs as a gatherConv and the weight
// gradient's products are dot products (at most 64 input channels). The
// choice must not depend on the number of workers, which would change the
// rounding of the weight gradient; with fewer groups of images than
// workers, some idle.
func useGatherBackward(gd *convGeom, cin int) bool {
	return useGather(gd) && cin <= 64
}

// gatherBackward computes both gradients of a stride-1 convolution of
// geometry g on n images from one zero-padded copy of each image's output
// gradient dY_i (see padImage), where gd is the geometry of the
// input-gradient convolution and wf its transposed filter matrix (see
// flipFilters). The input gradient is gatherConv's. The weight gradient
// uses the same padded image: with the input-gradient convolution's
// im2col matrix col_i of dY_i, whose row (co, a, b) is dYpad read from
// co·plane + a·dh·wp + b·dw,
//
//	dW[co][ci][kh−1−a][kw−1−b] = Σ_q x_i[ci][q]·col_i[(co, a, b)][q],
//
// a product of the rows of x_i and the gathered rows of col_i
// (blas.Engine.SgemmGatherT), summed over the images of each group and the
// groups in order as convBackward does. gx is added to if accumulate;
// the weight gradient is added to dw.
func gatherBackward(g, gd *convGeom, n, cout int, x, wf, gy, gx, dw []float32, accumulate bool) {
	cin, hw := g.c, g.h*g.w
	xSize, ySize := cin*hw, cout*g.cols
	buf := partialScratch.get(gatherPackedSize(gd, cin))
	defer partialScratch.put(buf)
	gc := newGatherConv(gd, cin, wf, true, buf)
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	ws := weightGroupSize(hw)
	chunks := parallel.Chunks(n, ws)
	acc := partialScratch.get(cin * gd.rows) // in (Cin; Cout, a, b) order
	defer partialScratch.put(acc)
	clear(acc)
	merge := &orderedSum{
		pending: make([][]float32, chunks),
		add: func(part []float32) {
			for i, v := range part {
				acc[i] += v
			}
		},
	}
	// The offsets of a full group of images; shorter groups use their
	// first runs.
	ps := gd.padSize()
	aRows := planeOffsets(cin, hw)
	aRuns := stackRuns(denseRuns(hw), min(ws, n), xSize)
	bRuns := stackRuns(gc.runs, min(ws, n), ps)
	e := blas.Default()
	parallel.For(n, ws, func(lo, hi int) {
		cnt := hi - lo
		pad := colScratch.get(cnt * ps)
		defer colScratch.put(pad)
		for j := 0; j < cnt; j++ {
			dy := pad[j*ps : (j+1)*ps]
			padImage(gd, gy[(lo+j)*ySize:(lo+j+1)*ySize], dy)
			b := blas.Gathered{Src: dy, Rows: gc.rows, Runs: gc.runs}
			gc.pa.SgemmGather(hw, b, beta, gx[(lo+j)*xSize:(lo+j+1)*xSize], hw)
		}
		r := cnt * hw / blas.GatherRun
		a := blas.Gathered{Src: x[lo*xSize : hi*xSize], Rows: aRows, Runs: aRuns[:r]}
		b := blas.Gathered{Src: pad, Rows: gc.rows, Runs: bRuns[:r]}
		part := partialScratch.get(cin * gd.rows)
		e.SgemmGatherT(cin, cnt*hw, gd.rows, a, b, 0, part, gd.rows)
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
