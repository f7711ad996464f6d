package blas

import (
	"sync"

	"github.com/proxgen/proxgen/autograd/parallel"
)

// parallelWork is the smallest m·n·k worth spreading over several workers.
const parallelWork = 96 * 96 * 96

// minChunkPanels is the fewest B panels a worker's column chunk gets.
const minChunkPanels = 4

// workspace holds one worker's packing buffers; they are reused through
// wsPool so that a call allocates nothing in the steady state.
type workspace struct {
	a   []float32 // packed block of A
	tmp []float32 // one mr×nr tile for partial tiles at the edges
}

var wsPool, bPool sync.Pool

func getWS(na, nt int) *workspace {
	w, _ := wsPool.Get().(*workspace)
	if w == nil {
		w = new(workspace)
	}
	if cap(w.a) < na {
		w.a = alignedFloats(na)
	}
	if cap(w.tmp) < nt {
		w.tmp = alignedFloats(nt)
	}
	return w
}

func getB(n int) *[]float32 {
	p, _ := bPool.Get().(*[]float32)
	if p == nil {
		p = new([]float32)
	}
	if cap(*p) < n {
		*p = alignedFloats(n)
	}
	return p
}

// gemm is the blocked driver behind Sgemm; the arguments are already
// checked. par allows using the worker pool.
func gemm(par, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	kern := active.Load()
	mr, nr := kern.mr, kern.nr
	workers := 1
	if par && m*n*k >= parallelWork {
		workers = parallel.Workers()
	}
	kc := kern.kc
	nc := min(kern.nc, roundUp(n, nr))

	// Split the rows of C into blocks of at most kern.mc rows (a multiple of
	// mr) and, when there are too few blocks for the workers, the columns
	// of each nc block into chunks of whole panels. Tile boundaries stay on
	// the global mr×nr grid, so the split never changes the results.
	rowBlocks := ceilDiv(m, kern.mc)
	if workers > 1 && rowBlocks < workers {
		rowBlocks = min(workers, ceilDiv(m, mr))
	}
	mcb := roundUp(ceilDiv(m, rowBlocks), mr)
	rowBlocks = ceilDiv(m, mcb)

	bp := getB(roundUp(nc, nr) * kc)
	defer bPool.Put(bp)
	bbuf := *bp

	for jc := 0; jc < n; jc += nc {
		ncb := min(nc, n-jc)
		panels := ceilDiv(ncb, nr)
		colChunks := 1
		if workers > 1 && rowBlocks < 2*workers {
			colChunks = max(1, min(ceilDiv(2*workers, rowBlocks), panels/minChunkPanels))
		}
		chunkPanels := ceilDiv(panels, colChunks)
		colChunks = ceilDiv(panels, chunkPanels)
		units := rowBlocks * colChunks

		for pc := 0; pc < k; pc += kc {
			kcb := min(kc, k-pc)
			betaEff := beta
			if pc > 0 {
				betaEff = 1
			}
			if workers > 1 && panels >= 2*minChunkPanels {
				g := ceilDiv(panels, 2*workers)
				parallel.For(panels, g, func(lo, hi int) {
					packB(transB, b, ldb, jc, ncb, pc, kcb, nr, lo, hi, bbuf)
				})
			} else {
				packB(transB, b, ldb, jc, ncb, pc, kcb, nr, 0, panels, bbuf)
			}

			body := func(lo, hi int) {
				ws := getWS(mcb*kcb, mr*nr)
				packed := -1
				for u := lo; u < hi; u++ {
					rb, cb := u/colChunks, u%colChunks
					i0 := rb * mcb
					rows := min(mcb, m-i0)
					if rb != packed {
						packA(transA, a, lda, i0, rows, pc, kcb, mr, ws.a)
						packed = rb
					}
					t0 := cb * chunkPanels
					t1 := min(t0+chunkPanels, panels)
					macroKernel(kern, ws, kcb, rows, ncb, t0, t1, bbuf, c[i0*ldc+jc:], ldc, alpha, betaEff)
				}
				wsPool.Put(ws)
			}
			if workers > 1 && units > 1 {
				parallel.For(units, 1, body)
			} else {
				body(0, units)
			}
		}
	}
}

// macroKernel multiplies the packed rows×kcb block of A in ws.a with B
// panels [t0, t1) of bp, updating the rows×ncb block of C at c.
func macroKernel(kern *microKernel, ws *workspace, kcb, rows, ncb, t0, t1 int, bp, c []float32, ldc int, alpha, beta float32) {
	mr, nr := kern.mr, kern.nr
	ap := ws.a
	for t := t0; t < t1; t++ {
		j := t * nr
		cols := min(nr, ncb-j)
		bpanel := bp[t*kcb*nr : (t+1)*kcb*nr]
		for i := 0; i < rows; i += mr {
			rr := min(mr, rows-i)
			apanel := ap[(i/mr)*kcb*mr : (i/mr+1)*kcb*mr]
			if rr == mr && cols == nr {
				kern.run(kcb, apanel, bpanel, c[i*ldc+j:], ldc, alpha, beta)
				continue
			}
			tmp := ws.tmp[:mr*nr]
			kern.run(kcb, apanel, bpanel, tmp, nr, 1, 0)
			for r := 0; r < rr; r++ {
				dst := c[(i+r)*ldc+j : (i+r)*ldc+j+cols]
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
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, b int) int { return ceilDiv(a, b) * b }
