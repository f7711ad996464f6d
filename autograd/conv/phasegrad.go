package conv

import (
	"math"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// The input gradient of a stride-2 convolution by phases. Input value
// (2i + α, 2j + β) receives w[co][ci][ki][kj]·dY[co][oh][ow] from every
// tap with 2·oh + ki − ph = 2i + α and 2·ow + kj − pw = 2j + β: the taps
// ki ≡ α + ph and kj ≡ β + pw (mod 2) alone, each at oh = i + dr, ow = j +
// dc with dr = (α + ph − ki)/2, dc = (β + pw − kj)/2. So each of the four
// phases (α, β) of dX is a stride-1 correlation of dY with the taps that
// land on it (for 3×3 with padding 1: 2×2, 2×1, 1×2 and 1×1 of them), a
// gathered product (blas.GatherA.SgemmGather) over shifted reads of one
// zero-padded copy of dY in the flat layout (flatImage), instead of the
// column matrix Wᵀ·dY, 9/4 the size of dX, and col2im. Each phase is
// computed into planes of its own and added into every second value of
// dX, the phases (α, 0) and (α, 1) together (kernels.AddInterleaveRows,
// each value's one addition as kernels.AddStride2Rows of each phase
// would make it).

// phaseGradOK reports whether the input gradient of a convolution of
// geometry g with cout filters can be computed by phases: stride 2 on
// both axes, no dilation, non-negative padding, an input twice the output
// on both axes (each phase of dX then as large as dY), float32, offsets
// that fit an int32.
func phaseGradOK(g *Geom, cout int) bool {
	if g.sh != 2 || g.sw != 2 || g.dh != 1 || g.dw != 1 || g.ph < 0 || g.pw < 0 ||
		g.h != 2*g.ho || g.w != 2*g.wo || g.bf16 {
		return false
	}
	q, _ := phaseGradGeom(g, cout)
	return q.pw < q.w && q.kw*q.flatCopySize() <= math.MaxInt32
}

// usePhaseGrad reports whether the input gradient of a convolution of
// geometry g with cout filters runs by phases: where it can, for kernels
// of more than four taps (a 1×1 kernel's column matrix is dY's size, a
// quarter of dX's, and col2im adds each value once: the same work),
// unless the caller forced im2col.
func usePhaseGrad(g *Geom, cout int) bool {
	return phaseGradOK(g, cout) && g.kh*g.kw > 4 && g.algo != AlgoIm2col
}

// phaseTaps returns the taps k of a kernel axis of size size with
// padding p that land on phase a (k ≡ a + p mod 2) in increasing order,
// and the shift (a + p − k)/2 of each.
func phaseTaps(a, size, p int) (taps, shifts []int) {
	for k := 0; k < size; k++ {
		if (a+p-k)%2 == 0 {
			taps = append(taps, k)
			shifts = append(shifts, (a+p-k)/2)
		}
	}
	return taps, shifts
}

// phaseGradGeom returns the geometry of the flat layout of dY that the
// phases read (c = cout channels of ho × wo, kh × kw shifts, padding ph
// rows on both sides and pw columns on the left), and the most negative
// column shift of any phase's taps, which that geometry's copy 0 reads.
func phaseGradGeom(g *Geom, cout int) (q *Geom, dc0 int) {
	dr0, dr1, dc0, dc1 := 0, 0, 0, 0 // shifts of 0 included: harmless
	for a := 0; a < 2; a++ {
		_, rs := phaseTaps(a, g.kh, g.ph)
		_, cs := phaseTaps(a, g.kw, g.pw)
		for _, d := range rs {
			dr0, dr1 = min(dr0, d), max(dr1, d)
		}
		for _, d := range cs {
			dc0, dc1 = min(dc0, d), max(dc1, d)
		}
	}
	q = &Geom{c: cout, h: g.ho, w: g.wo, kh: dr1 - dr0 + 1, kw: dc1 - dc0 + 1,
		ph: max(-dr0, dr1), pw: -dc0, sh: 1, sw: 1, dh: 1, dw: 1}
	return q, dc0
}

// phaseGrad is the input gradient of one convolution by phases: for each
// phase (α, β) with taps, its cin × (cout · taps) filter matrix packed for
// SgemmGather, and the offsets of its rows in the flat copy of dY.
type phaseGrad struct {
	g, q   *Geom
	phases []gradPhase
	runs   []int32
}

// gradPhase is one phase of phaseGrad.
type gradPhase struct {
	a, b int // the phase: rows 2i + a, columns 2j + b of dX
	pa   *blas.GatherA
	rows []int32
}

// phaseGradPackedSize returns the buffer size newPhaseGrad needs for a
// convolution of geometry g with cout filters.
func phaseGradPackedSize(g *Geom, cout int) int {
	size := 0
	for a := 0; a < 2; a++ {
		ta, _ := phaseTaps(a, g.kh, g.ph)
		for b := 0; b < 2; b++ {
			tb, _ := phaseTaps(b, g.kw, g.pw)
			if k := cout * len(ta) * len(tb); k > 0 {
				size += blas.Default().PackedASize(g.c, k)
			}
		}
	}
	return size
}

// newPhaseGrad prepares the input gradient of a convolution of geometry g
// with the cout filters w (Cout, Cin, kh, kw), their phase matrices
// packed into buf (phaseGradPackedSize values).
func newPhaseGrad(g *Geom, cout int, w, buf []float32) *phaseGrad {
	q, dc0 := phaseGradGeom(g, cout)
	pg := &phaseGrad{g: g, q: q}
	cin, khw := g.c, g.kh*g.kw
	plane, size := (q.h+2*q.ph)*q.w, q.flatCopySize()
	e := blas.Default()
	for a := 0; a < 2; a++ {
		ta, ra := phaseTaps(a, g.kh, g.ph)
		for b := 0; b < 2; b++ {
			tb, cb := phaseTaps(b, g.kw, g.pw)
			k := cout * len(ta) * len(tb)
			if k == 0 {
				continue // no tap lands here: this phase's gradient is zero
			}
			// The matrix cin × k, its columns (co, ki, kj), and the row
			// of the flat copy each column reads: shifts (dr, dc) are
			// the copy's tap (dr − dr0, dc − dc0).
			m := colScratch.get(cin * k)
			rows := make([]int32, 0, k)
			for co := 0; co < cout; co++ {
				for x, ki := range ta {
					for y, kj := range tb {
						col := (co*len(ta)+x)*len(tb) + y
						for ci := 0; ci < cin; ci++ {
							m[ci*k+col] = w[(co*cin+ci)*khw+ki*g.kw+kj]
						}
						// The flat layout's tap (dr + ph, dc − dc0) (see
						// flatImage and gatherOffsets): dY at (i + dr, j + dc)
						// for output (i, j).
						kc := cb[y] - dc0
						rows = append(rows, int32(kc*size+co*plane+(ra[x]+q.ph)*q.w+kc))
					}
				}
			}
			n := e.PackedASize(cin, k)
			pa := e.PackGatherA(false, cin, k, m, k, buf[:n:n])
			buf = buf[n:]
			colScratch.put(m)
			pg.phases = append(pg.phases, gradPhase{a: a, b: b, pa: pa, rows: rows})
		}
	}
	pg.runs = denseRuns(g.ho * g.wo)
	return pg
}

// run adds the input gradients of the n images of gy (cout × ho × wo
// each) into gx (cin × h × w each), in parallel over the images; each
// image is computed alone, by the same operations in the same order
// whatever the number of workers.
func (pg *phaseGrad) run(n int, gy, gx []float32) {
	g, q := pg.g, pg.q
	ySize, xSize := q.c*g.ho*g.wo, g.c*g.h*g.w
	p := g.ho * g.wo
	parallel.For(n, 1, func(lo, hi int) {
		pad := colScratch.get(q.kw * q.flatCopySize())
		planes := colScratch.get(2 * g.c * p)
		defer colScratch.put(pad)
		defer colScratch.put(planes)
		even, odd := planes[:g.c*p], planes[g.c*p:]
		for i := lo; i < hi; i++ {
			flatImage(q, gy[i*ySize:(i+1)*ySize], pad, 0, q.c)
			dx := gx[i*xSize : (i+1)*xSize]
			// Channel ci's row i of phase (a, b) is dX row 2i + a of
			// channel ci, that is row ci·ho + i of dX seen as rows of 2w
			// values (h = 2·ho), at every second value from b on.
			phs := pg.phases
			for len(phs) > 0 {
				ph := phs[0]
				b := blas.Gathered{Src: pad, Rows: ph.rows, Runs: pg.runs}
				ph.pa.SgemmGather(p, b, 0, even, p)
				if len(phs) > 1 && phs[1].a == ph.a {
					// Phases (a, 0) and (a, 1): both in one pass.
					b.Rows = phs[1].rows
					phs[1].pa.SgemmGather(p, b, 0, odd, p)
					kernels.AddInterleaveRows(dx[ph.a*g.w:], 2*g.w, even, odd, g.wo, g.c*g.ho, g.wo)
					phs = phs[2:]
					continue
				}
				kernels.AddStride2Rows(dx[ph.a*g.w+ph.b:], 2*g.w, even, g.wo, g.c*g.ho, g.wo)
				phs = phs[1:]
			}
		}
	})
}
