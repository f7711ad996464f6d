package blas

import "fmt"

// GatherRun is the number of consecutive columns of a Gathered matrix
// that lie side by side in its source.
const GatherRun = 16

// Gathered is a k×n matrix read in place from Src, without being copied
// out first: its element (p, j) is Src[Rows[p] + Runs[j/GatherRun] +
// j%GatherRun]. Row offsets and run offsets add, so every row of the
// matrix is the same pattern of runs shifted by its own offset: the
// im2col matrix of an image is one, with a row per kernel tap and input
// channel and a run per GatherRun output positions of an output row
// (when the output width is a multiple of GatherRun and the image is
// zero-padded).
type Gathered struct {
	Src  []float32
	Rows []int32 // k offsets, one per row
	Runs []int32 // ⌈n/GatherRun⌉ offsets, one per run of columns
}

// GatherA is the left operand op(A) of SgemmGather products, packed once
// for an engine's kernel. For the AVX-512 gather kernels its rows are held
// in near-equal panels (16 rows as 8 + 8, not 12 + 4: a 4-row tile runs
// short of independent multiply-adds and long on loads); otherwise as a
// PackedA holds them.
type GatherA struct {
	kern *microKernel
	m, k int
	kc   int // length of the blocks of K
	h    int // rows per panel; panels are kern.mr values apart per column
	data []float32
}

// PackGatherA returns op(A), which is m×k, packed for SgemmGather with e's
// kernel, from the stored matrix a with row stride lda (transA: a holds
// op(A)ᵀ). It is held in buf when buf's capacity is at least
// PackedASize(m, k), else in a new slice.
func (e *Engine) PackGatherA(transA bool, m, k int, a []float32, lda int, buf []float32) *GatherA {
	kern := e.k
	mr := kern.mr
	size := e.PackedASize(m, k)
	if cap(buf) < size {
		buf = alignedFloats(size)
	}
	h := mr
	if kern.gather != nil && m > 0 {
		h = ceilDiv(m, ceilDiv(m, mr))
	}
	if h == mr {
		// PackedA's layout as it is, packed in place.
		pa := e.NewPackedA(transA, m, k, buf)
		pa.Pack(a, lda, 0, k)
		return &GatherA{kern: kern, m: m, k: k, kc: pa.kc, h: mr, data: pa.data}
	}
	tmp := getB(size)
	defer bFree.put(tmp)
	pa := e.NewPackedA(transA, m, k, *tmp)
	pa.Pack(a, lda, 0, k)
	ga := &GatherA{kern: kern, m: m, k: k, kc: pa.kc, h: h, data: buf[:size]}
	mp := roundUp(m, mr) // rows of a block, either way
	for pc := 0; pc < k; pc += pa.kc {
		kcb := min(pa.kc, k-pc)
		src, dst := pa.data[pc*mp:pc*mp+mp*kcb], ga.data[pc*mp:pc*mp+mp*kcb]
		// Row i goes from panel i/mr, place i%mr to panel i/h, place i%h.
		for i := 0; i < m; i++ {
			s, d := src[(i/mr)*kcb*mr+i%mr:], dst[(i/ga.h)*kcb*mr+i%ga.h:]
			for p := 0; p < kcb; p++ {
				d[p*mr] = s[p*mr]
			}
		}
	}
	return ga
}

// SgemmGather computes C = op(A)·B + beta·C on the calling goroutine for the
// packed op(A) (m×k), B (k×n) gathered from b, and C (m×n) with row stride
// ldc. Kernels that can read B in this form do so; the others pack its
// panels. With beta == 0, C is not read. The result equals SgemmSerial's
// with B stored out, bit for bit, whenever that product blocks K as a
// PackedA of op(A) does (n at least the kernel's tile width). It panics
// if the offsets reach outside b.Src, if len(b.Rows) != k, or if C is too
// short.
func (ga *GatherA) SgemmGather(n int, b Gathered, beta float32, c []float32, ldc int) {
	const fn = "GatherA.SgemmGather"
	m, k := ga.m, ga.k
	if n < 0 {
		panic(fmt.Sprintf("blas.%s: negative dimension n=%d (m=%d k=%d)", fn, n, m, k))
	}
	checkGathered(fn, "B", k, n, b, true)
	checkMat(fn, "C", false, m, n, k, m, n, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	kern := ga.kern
	mr, nr, kc, h := kern.mr, kern.nr, ga.kc, ga.h
	mp := roundUp(m, mr)
	// Kernels that cannot read B gathered take packed panels of it, and
	// a workspace for the edge tiles of macroKernel.
	var panel []float32
	var ws *workspace
	if kern.gather == nil || nr != 2*GatherRun {
		bp := getB(min(kc, k) * nr)
		defer bFree.put(bp)
		panel = *bp
		ws = getWS(0, 0, mr*nr)
		defer wsFree.put(ws)
	}
	for pc := 0; pc < k; pc += kc {
		kcb := min(kc, k-pc)
		betaEff := beta
		if pc > 0 {
			betaEff = 1
		}
		ap := ga.data[pc*mp : pc*mp+mp*kcb]
		offs := b.Rows[pc : pc+kcb]
		for j := 0; j < n; j += nr {
			cols := min(nr, n-j)
			if panel == nil {
				b0 := int(b.Runs[j/GatherRun])
				b1 := b0
				if cols > GatherRun {
					b1 = int(b.Runs[j/GatherRun+1])
				}
				for i := 0; i < m; i += h {
					rows := min(h, m-i)
					kern.gather(rows, cols, kcb, ap[(i/h)*kcb*mr:], b.Src, offs, b0, b1, c[i*ldc+j:], ldc, 1, betaEff)
				}
				continue
			}
			packGathered(b, offs, j, cols, nr, panel[:kcb*nr])
			macroKernel(kern, ws, ap, kcb, m, cols, panel[:kcb*nr], nr, nil, c[j:], ldc, 1, betaEff)
		}
	}
}

// SgemmGatherT computes C = A·Bᵀ + beta·C with e's kernel on the calling
// goroutine, where A (m×n) is gathered from a, B (k×n) from b, and C is
// m×k with row stride ldc: with A the gradients of a convolution's
// outputs and B the im2col matrix of its inputs, both over a group of
// images, C is the filters' gradient. Where Sgemm would compute the
// product as dot products of the rows of A and B, both are read in place;
// otherwise they are copied out. The result equals SgemmSerial(false,
// true, ...) with A and B stored out, bit for bit. With beta == 0, C is
// not read. It panics if the offsets reach outside a.Src or b.Src, if
// len(a.Rows) != m or len(b.Rows) != k, or if C is too short.
func (e *Engine) SgemmGatherT(m, n, k int, a, b Gathered, beta float32, c []float32, ldc int) {
	const fn = "SgemmGatherT"
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("blas.%s: negative dimension m=%d n=%d k=%d", fn, m, n, k))
	}
	checkGathered(fn, "A", m, n, a, false)
	checkGathered(fn, "B", k, n, b, false)
	checkMat(fn, "C", false, m, k, n, m, k, c, ldc)
	if m == 0 || k == 0 {
		return
	}
	if n == 0 {
		scaleC(m, k, beta, c, ldc)
		return
	}
	kern := e.k
	if kern.dotGather == nil || kern.dot == nil || m > dotMaxM {
		gatherRowsT(kern, m, n, k, a, b, beta, c, ldc)
		return
	}
	runs := ceilDiv(n, GatherRun)
	pp := int32Free.get()
	defer int32Free.put(pp)
	if cap(*pp) < 2*runs {
		*pp = make([]int32, 2*runs)
	}
	pairs := (*pp)[:2*runs]
	for u := range runs {
		pairs[2*u], pairs[2*u+1] = a.Runs[u], b.Runs[u]
	}
	// gemmDot's blocking: 4×6 blocks of C, K (here n) in blocks of dotKC.
	var rows [10]*float32
	var out [24]float32
	for pc := 0; pc < n; pc += dotKC {
		ncb := min(dotKC, n-pc)
		betaEff := beta
		if pc > 0 {
			betaEff = 1
		}
		offs := &pairs[2*(pc/GatherRun)]
		for j0 := 0; j0 < k; j0 += 6 {
			nj := min(6, k-j0)
			for j := range 6 {
				rows[4+j] = &b.Src[b.Rows[j0+min(j, nj-1)]]
			}
			for i0 := 0; i0 < m; i0 += 4 {
				ni := min(4, m-i0)
				for i := range 4 {
					rows[i] = &a.Src[a.Rows[i0+min(i, ni-1)]]
				}
				kern.dotGather(ncb, offs, &rows, &out)
				for i := 0; i < ni; i++ {
					crow := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+nj]
					res := out[i*6 : i*6+nj]
					if betaEff == 0 {
						copy(crow, res)
					} else {
						for j, v := range res {
							crow[j] = v + betaEff*crow[j]
						}
					}
				}
			}
		}
	}
}

// int32Free keeps the run offset tables of SgemmGatherT.
var int32Free freeList[[]int32]

// checkGathered checks that the gathered rows×n matrix g has its offsets
// and that they lie inside g.Src: every run whole if whole, else (for
// kernels that mask their loads) the last run only as long as the n
// columns need.
func checkGathered(fn, name string, rows, n int, g Gathered, whole bool) {
	runs := ceilDiv(n, GatherRun)
	if len(g.Rows) != rows || len(g.Runs) < runs {
		panic(fmt.Sprintf("blas.%s: the %dx%d %s needs %d row offsets and %d run offsets, have %d and %d",
			fn, rows, n, name, rows, runs, len(g.Rows), len(g.Runs)))
	}
	if rows == 0 || n == 0 {
		return
	}
	lo, hi := offsetRange(g.Rows)
	rlo, rhi := offsetRange(g.Runs[:runs])
	end := rhi + GatherRun // past the furthest run
	if last := n - (runs-1)*GatherRun; !whole && last < GatherRun {
		end = int(g.Runs[runs-1]) + last
		if runs > 1 {
			_, full := offsetRange(g.Runs[:runs-1])
			end = max(end, full+GatherRun)
		}
	}
	if lo+rlo < 0 || hi+end > len(g.Src) {
		panic(fmt.Sprintf("blas.%s: offsets of %s reach [%d, %d) but len(Src) = %d (%dx%d)",
			fn, name, lo+rlo, hi+end, len(g.Src), rows, n))
	}
}

// gatherRowsT is SgemmGatherT for kernels without a gathering dot
// product: it copies A and blocks of rows of B out and multiplies them as
// SgemmSerial does.
func gatherRowsT(kern *microKernel, m, n, k int, a, b Gathered, beta float32, c []float32, ldc int) {
	const block = 64 // rows of B per product
	ap := getB(m * n)
	defer bFree.put(ap)
	am := (*ap)[:m*n]
	gatherRows(a, 0, m, n, am)
	bp := getB(min(block, k) * n)
	defer bFree.put(bp)
	for j0 := 0; j0 < k; j0 += block {
		nj := min(block, k-j0)
		bm := (*bp)[:nj*n]
		gatherRows(b, j0, nj, n, bm)
		gemm(kern, false, false, true, m, nj, n, 1, am, n, bm, n, beta, c[j0:], ldc)
	}
}

// gatherRows copies rows [r0, r0+nr) of the gathered matrix g, n columns
// each, into dst.
func gatherRows(g Gathered, r0, nr, n int, dst []float32) {
	for r := 0; r < nr; r++ {
		row := dst[r*n : (r+1)*n]
		for t := 0; t < n; t += GatherRun {
			s := int(g.Rows[r0+r]) + int(g.Runs[t/GatherRun])
			copy(row[t:min(t+GatherRun, n)], g.Src[s:])
		}
	}
}

// packGathered packs columns [j0, j0+cols) of the rows of b at the
// offsets offs into a panel of nr columns, zero past cols.
func packGathered(b Gathered, offs []int32, j0, cols, nr int, panel []float32) {
	for p, off := range offs {
		dst := panel[p*nr : (p+1)*nr]
		for c := 0; c < cols; {
			j := j0 + c
			w := min(cols-c, GatherRun-j%GatherRun)
			s := int(off) + int(b.Runs[j/GatherRun]) + j%GatherRun
			copy(dst[c:c+w], b.Src[s:s+w])
			c += w
		}
		clear(dst[cols:])
	}
}

// offsetRange returns the least and the greatest of offs (0, 0 if empty).
func offsetRange(offs []int32) (lo, hi int) {
	for i, o := range offs {
		if i == 0 || int(o) < lo {
			lo = int(o)
		}
		if i == 0 || int(o) > hi {
			hi = int(o)
		}
	}
	return lo, hi
}
