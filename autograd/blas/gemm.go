package blas

import (
	"sync"

	"github.com/proxgen/proxgen/internal/parallel"
)

// parallelWork is the smallest m·n·k worth spreading over several workers:
// below it (about 50 µs of work on one core) handing work to another
// goroutine, which may have to wait for a busy core, risks more than it
// saves.
const parallelWork = 1 << 22

// workspace holds one worker's packing buffers.
type workspace struct {
	a   []float32 // packed block of A
	b   []float32 // one packed panel of B (in-place mode, right edge)
	tmp []float32 // one mr×nr tile for edge tiles the kernel cannot do
}

// freeList keeps buffers for reuse by later calls. Unlike a sync.Pool it
// is not emptied by the garbage collector, so a steady stream of calls
// allocates nothing; the buffers are bounded by the cache block sizes, so
// it holds at most a few MiB per worker.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
}

func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.items); n > 0 {
		x := f.items[n-1]
		f.items = f.items[:n-1]
		return x
	}
	return new(T)
}

func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	f.items = append(f.items, x)
	f.mu.Unlock()
}

var (
	wsFree freeList[workspace]
	bFree  freeList[[]float32] // packed blocks of B shared by the workers
)

func getWS(na, nb, nt int) *workspace {
	w := wsFree.get()
	if cap(w.a) < na {
		w.a = alignedFloats(na)
	}
	if cap(w.b) < nb {
		w.b = alignedFloats(nb)
	}
	if cap(w.tmp) < nt {
		w.tmp = alignedFloats(nt)
	}
	return w
}

func getB(n int) *[]float32 {
	p := bFree.get()
	if cap(*p) < n {
		*p = alignedFloats(n)
	}
	return p
}

// split divides items into parts near-equal consecutive ranges and returns
// the bounds of range i.
func split(items, parts, i int) (lo, hi int) {
	q, r := items/parts, items%parts
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// grid chooses how many parts to split the row tiles and the column
// panels of C into for w workers: wm·wn == w unless there are too few tiles.
func grid(w, tilesM, panels int) (wm, wn int) {
	switch {
	case w <= 1:
		return 1, 1
	case tilesM >= 4*w || tilesM >= 2*w && tilesM >= panels:
		return w, 1
	case panels >= w:
		return 1, w
	}
	return min(w, tilesM), 1
}

// gemm is the blocked driver behind Sgemm with the micro-kernel kern; the
// arguments are already checked. par allows using the worker pool.
//
// The tiles of C lie on a fixed grid of mr×nr tiles from the top-left
// corner and the K dimension is split into blocks of kc whatever the
// number of workers, and every tile is computed by the same kernel code in
// the same order, so results do not depend on how work is shared.
func gemm(kern *microKernel, par, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemmFrom(kern, par, aSource{transA: transA, a: a, lda: lda}, transB, m, n, k, alpha, b, ldb, beta, c, ldc)
}

// aSource is op(A) of a product: either the stored matrix a, packed block
// by block as the loops need it, or, if pa is not nil, a matrix packed
// beforehand.
type aSource struct {
	transA bool
	a      []float32
	lda    int
	pa     *PackedA
}

// block returns rows [i0, i0+rows) and columns [pc, pc+kcb) of op(A)
// packed as packA packs them, in buf unless a packed matrix holds the
// block as it is.
func (s aSource) block(i0, rows, pc, kcb, mr int, buf []float32) []float32 {
	if s.pa != nil {
		return s.pa.block(i0, rows, pc, kcb, buf)
	}
	packA(s.transA, s.a, s.lda, i0, rows, pc, kcb, mr, buf)
	return buf
}

// gemmFrom is gemm with op(A) given by src.
func gemmFrom(kern *microKernel, par bool, src aSource, transB bool, m, n, k int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	workers := 1
	if par && m*n*k >= parallelWork {
		workers = parallel.Workers()
	}
	// C = A·Bᵀ with few rows: transposing B to pack it would cost more than
	// the product, so take dot products of the rows of A and B instead.
	if kern.dot != nil && !src.transA && transB && m <= dotMaxM {
		a, lda := src.a, src.lda
		if src.pa != nil {
			// The rows of a packed A, unpacked: m·k values against
			// the n·k of B and the m·n·k of the product.
			tmp := getB(m * k)
			defer bFree.put(tmp)
			a, lda = (*tmp)[:m*k], k
			src.pa.unpack(a)
		}
		gemmDot(kern, workers, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// With few rows of C each panel of B is used by few tiles, so packing
	// B costs more than it saves: the kernel reads op(B) in place.
	if kern.strided && !transB && m <= kern.inPlaceM && n >= kern.nr {
		gemmInPlaceB(kern, workers, src, m, n, k, alpha, b, ldb, beta, c, ldc)
		return
	}
	gemmPacked(kern, workers, src, transB, m, n, k, alpha, b, ldb, beta, c, ldc)
}

// gemmPacked packs op(B) into a buffer shared by the workers, block by
// block, and each worker packs its own blocks of op(A).
func gemmPacked(kern *microKernel, workers int, src aSource, transB bool, m, n, k int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	mr, nr, kc := kern.mr, kern.nr, kern.kc
	nc := min(kern.nc, roundUp(n, nr))
	bp := getB(roundUp(nc, nr) * kc)
	defer bFree.put(bp)
	g := packedGEMM{kern: kern, src: src, m: m, alpha: alpha, c: c, ldc: ldc, bbuf: *bp, tilesM: ceilDiv(m, mr)}
	for jc := 0; jc < n; jc += nc {
		g.jc, g.ncb = jc, min(nc, n-jc)
		g.panels = ceilDiv(g.ncb, nr)
		g.wm, g.wn = grid(workers, g.tilesM, g.panels)
		for pc := 0; pc < k; pc += kc {
			g.pc, g.kcb = pc, min(kc, k-pc)
			g.beta = beta
			if pc > 0 {
				g.beta = 1
			}
			if workers > 1 && g.panels >= 2 {
				bbuf, jc, ncb, pc, kcb := g.bbuf, g.jc, g.ncb, g.pc, g.kcb
				parallel.For(g.panels, ceilDiv(g.panels, workers), func(lo, hi int) {
					packB(transB, b, ldb, jc, ncb, pc, kcb, nr, lo, hi, bbuf)
				})
			} else {
				packB(transB, b, ldb, g.jc, g.ncb, g.pc, g.kcb, nr, 0, g.panels, g.bbuf)
			}
			if g.wm*g.wn > 1 {
				shared := g // only a parallel product puts its state on the heap
				parallel.For(g.wm*g.wn, 1, shared.region)
			} else {
				g.region(0, 1)
			}
		}
	}
}

// packedGEMM is one block of gemmPacked (the columns [jc, jc+ncb) and the
// depth [pc, pc+kcb) of the product, op(B) packed in bbuf), split into a
// wm × wn grid of regions of C.
type packedGEMM struct {
	kern             *microKernel
	src              aSource
	m                int
	alpha, beta      float32
	c, bbuf          []float32
	ldc              int
	jc, ncb, pc, kcb int
	tilesM, panels   int
	wm, wn           int
}

// region computes the regions [lo, hi) of the grid.
func (g *packedGEMM) region(lo, hi int) {
	kern, m, kcb := g.kern, g.m, g.kcb
	mr, nr, kc := kern.mr, kern.nr, kern.kc
	na := min(kern.mc, roundUp(m, mr)) * kcb
	if g.src.pa != nil && g.src.pa.kc == kc {
		na = 0 // the blocks of A are read where they lie
	}
	ws := getWS(na, 0, mr*nr)
	for u := lo; u < hi; u++ {
		t0, t1 := split(g.tilesM, g.wm, u/g.wn)
		p0, p1 := split(g.panels, g.wn, u%g.wn)
		// Blocks of near-equal size, at most mc rows.
		r0, r1 := t0*mr, min(t1*mr, m)
		mcb := roundUp(ceilDiv(r1-r0, ceilDiv(r1-r0, kern.mc)), mr)
		for i0 := r0; i0 < r1; i0 += mcb {
			rows := min(mcb, r1-i0)
			ap := g.src.block(i0, rows, g.pc, kcb, mr, ws.a)
			for t := p0; t < p1; t++ {
				cols := min(nr, g.ncb-t*nr)
				var next []float32
				if t+1 < p1 {
					next = g.bbuf[(t+1)*kcb*nr : (t+2)*kcb*nr]
				}
				macroKernel(kern, ws, ap, kcb, rows, cols, g.bbuf[t*kcb*nr:(t+1)*kcb*nr], nr, next, g.c[i0*g.ldc+g.jc+t*nr:], g.ldc, g.alpha, g.beta)
			}
		}
	}
	wsFree.put(ws)
}

// gemmInPlaceB handles m <= kern.inPlaceM with op(B) = B: the kernel reads
// each panel of B where it lies, except a partial panel at the right edge,
// which is packed. The workers split the rows of C if there are enough,
// else its columns.
func gemmInPlaceB(kern *microKernel, workers int, src aSource, m, n, k int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panels := ceilDiv(n, kern.nr)
	tilesM := ceilDiv(m, kern.mr)
	wm, wn := grid(workers, tilesM, panels)
	g := inPlaceGEMM{kern: kern, src: src, m: m, n: n, k: k, alpha: alpha, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc,
		tilesM: tilesM, panels: panels, wm: wm, wn: wn}
	if wm*wn > 1 {
		shared := g // only a parallel product puts its state on the heap
		parallel.For(wm*wn, 1, shared.region)
		return
	}
	g.region(0, 1)
}

// inPlaceGEMM is one product of gemmInPlaceB, split into a wm × wn grid
// of regions of C.
type inPlaceGEMM struct {
	kern           *microKernel
	src            aSource
	m, n, k        int
	alpha, beta    float32
	b, c           []float32
	ldb, ldc       int
	tilesM, panels int
	wm, wn         int
}

// region computes the regions [lo, hi) of the grid.
func (g *inPlaceGEMM) region(lo, hi int) {
	kern, m, n, k := g.kern, g.m, g.n, g.k
	mr, nr, kc := kern.mr, kern.nr, kern.inPlaceKC
	b, ldb, c, ldc := g.b, g.ldb, g.c, g.ldc
	na := roundUp(m, mr) * min(kc, k)
	if g.src.pa != nil && g.src.pa.kc == kc {
		na = 0 // the blocks of A are read where they lie
	}
	ws := getWS(na, min(kc, k)*nr, mr*nr)
	for u := lo; u < hi; u++ {
		t0, t1 := split(g.tilesM, g.wm, u/g.wn)
		p0, p1 := split(g.panels, g.wn, u%g.wn)
		i0 := t0 * mr
		rows := min(t1*mr, m) - i0
		for pc := 0; pc < k; pc += kc {
			kcb := min(kc, k-pc)
			betaEff := g.beta
			if pc > 0 {
				betaEff = 1
			}
			ap := g.src.block(i0, rows, pc, kcb, mr, ws.a)
			for t := p0; t < p1; t++ {
				j := t * nr
				cols := min(nr, n-j)
				panel, ld := b[pc*ldb+j:], ldb
				if cols < nr {
					packB(false, b, ldb, j, cols, pc, kcb, nr, 0, 1, ws.b)
					panel, ld = ws.b, nr
				}
				macroKernel(kern, ws, ap, kcb, rows, cols, panel, ld, nil, c[i0*ldc+j:], ldc, g.alpha, betaEff)
			}
		}
	}
	wsFree.put(ws)
}

// dotMaxM is the most rows of C for which gemmDot computes C = A·Bᵀ.
const dotMaxM = 64

// dotKC is the length of the blocks of K in gemmDot: six rows of B of
// this length fit in the L1 cache while they meet every row of A.
const dotKC = 1024

// gemmDot computes C = alpha·A·Bᵀ + beta·C with A (m×k) and B (n×k) both
// stored with k contiguous, as 4×6 blocks of dot products, without packing.
// The workers split the blocks of C; K is taken in blocks of dotKC.
func gemmDot(kern *microKernel, workers int, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gm, gn := ceilDiv(m, 4), ceilDiv(n, 6)
	wm, wn := grid(workers, gm, gn)
	g := dotGEMM{kern: kern, m: m, n: n, k: k, alpha: alpha, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc,
		gm: gm, gn: gn, wm: wm, wn: wn}
	if wm*wn > 1 {
		shared := g // only a parallel product puts its state on the heap
		parallel.For(wm*wn, 1, shared.region)
		return
	}
	g.region(0, 1)
}

// dotGEMM is one product of gemmDot, split into a wm × wn grid of regions
// of C, each gm × gn blocks of 4×6.
type dotGEMM struct {
	kern           *microKernel
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	gm, gn, wm, wn int
}

// dotBuf holds the rows and the results of a call of a dot kernel, kept
// for reuse (dotFree) so that a product allocates nothing.
type dotBuf struct {
	rows [10]*float32
	out  [24]float32
}

var dotFree freeList[dotBuf]

// region computes the regions [lo, hi) of the grid.
func (g *dotGEMM) region(lo, hi int) {
	buf := dotFree.get()
	defer dotFree.put(buf)
	rows, out := &buf.rows, &buf.out
	m, n, k, a, b, c := g.m, g.n, g.k, g.a, g.b, g.c
	lda, ldb, ldc, alpha := g.lda, g.ldb, g.ldc, g.alpha
	for u := lo; u < hi; u++ {
		g0, g1 := split(g.gm, g.wm, u/g.wn)
		h0, h1 := split(g.gn, g.wn, u%g.wn)
		for pc := 0; pc < k; pc += dotKC {
			kcb := min(dotKC, k-pc)
			betaEff := g.beta
			if pc > 0 {
				betaEff = 1
			}
			for h := h0; h < h1; h++ {
				j0 := h * 6
				nj := min(6, n-j0)
				// Rows past the edge repeat the last one; their
				// results are dropped.
				for j := range 6 {
					rows[4+j] = &b[(j0+min(j, nj-1))*ldb+pc]
				}
				for gi := g0; gi < g1; gi++ {
					i0 := gi * 4
					ni := min(4, m-i0)
					for i := range 4 {
						rows[i] = &a[(i0+min(i, ni-1))*lda+pc]
					}
					g.kern.dot(kcb, rows, out)
					for i := 0; i < ni; i++ {
						crow := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+nj]
						res := out[i*6 : i*6+nj]
						if betaEff == 0 {
							for j, v := range res {
								crow[j] = alpha * v
							}
						} else {
							for j, v := range res {
								crow[j] = alpha*v + betaEff*crow[j]
							}
						}
					}
				}
			}
		}
	}
}

// macroKernel multiplies the packed rows×kcb block of A in ap with one
// kcb×cols panel of B (row stride ldb), updating the rows×cols block of C
// at c. next, if not nil, is the packed panel of B to be used next: the
// kernels bring it into the L2 cache piece by piece, 4·kcb values a call.
func macroKernel(kern *microKernel, ws *workspace, ap []float32, kcb, rows, cols int, bpanel []float32, ldb int, next, c []float32, ldc int, alpha, beta float32) {
	mr, nr := kern.mr, kern.nr
	for i := 0; i < rows; i += mr {
		rr := min(mr, rows-i)
		apanel := ap[(i/mr)*kcb*mr : (i/mr+1)*kcb*mr]
		var pf *float32
		if q := (i / mr) * 4 * kcb; q < len(next) {
			pf = &next[q]
		}
		if (rr == mr || kern.partialRows) && (cols == nr || kern.partialCols) {
			kern.run(rr, cols, kcb, apanel, bpanel, ldb, c[i*ldc:], ldc, alpha, beta, pf)
			continue
		}
		tmp := ws.tmp[:mr*nr]
		kern.run(mr, nr, kcb, apanel, bpanel, ldb, tmp, nr, 1, 0, pf)
		for r := 0; r < rr; r++ {
			dst := c[(i+r)*ldc : (i+r)*ldc+cols]
			src := tmp[r*nr : r*nr+cols]
			if beta == 0 {
				for x, v := range src {
					dst[x] = alpha * v
				}
			} else {
				for x, v := range src {
					dst[x] = alpha*v + beta*dst[x]
				}
			}
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, b int) int { return ceilDiv(a, b) * b }
