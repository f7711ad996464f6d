package conv

import (
	"sync"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
)

// Geom is the geometry of one 2-D convolution over a single C×H×W image:
// the image, the kernel, the stride, padding and dilation, the output
// size and the algorithm forced by the caller (made by NewGeom). A Geom
// is immutable once made and safe for concurrent use.
type Geom struct {
	c, h, w    int  // input channels, height, width
	kh, kw     int  // kernel height and width
	sh, sw     int  // strides
	ph, pw     int  // zero padding on each side
	dh, dw     int  // dilations
	ho, wo     int  // output height and width
	rows, cols int  // im2col matrix size: c·kh·kw rows × ho·wo columns
	algo       Algo // algorithm forced by the caller, or AlgoAuto
	bf16       bool // products in bfloat16 (with algo im2col)

	noWinoWeight   bool // tests and benchmarks: the weight gradient off Winograd (useWinoWeight)
	nchwWinoWeight bool // tests and benchmarks: its images transformed in NCHW (winoWeightBlocked false)
}

// OutSize returns the PyTorch output length of a convolution along one axis:
// ⌊(in + 2·pad − dil·(k−1) − 1) / stride⌋ + 1.
func OutSize(in, k, stride, pad, dil int) int {
	span := in + 2*pad - dil*(k-1) - 1
	if span < 0 {
		return 0
	}
	return span/stride + 1
}

// validRange returns the output columns [lo, hi) of a row whose input
// column o·stride + off lies inside [0, n), for o in [0, outN).
func validRange(off, stride, n, outN int) (lo, hi int) {
	if off < 0 {
		lo = (-off + stride - 1) / stride
	}
	if n-off > 0 {
		hi = (n - off + stride - 1) / stride
	}
	hi = min(hi, outN)
	lo = min(lo, hi)
	return lo, hi
}

// im2col unrolls the image x (c×h×w) into a g.rows × g.cols matrix stored
// in col with row stride ld: row (ci, ki, kj) holds, for every output
// position, the input element under kernel tap (ki, kj) of channel ci, or 0
// in the padding.
func im2col(g *Geom, x, col []float32, ld int) { im2colRows(g, x, col, ld, 0, g.ho) }

// im2colRows is im2col for the output rows [oh0, oh1) alone: the columns
// of col are their (oh1−oh0)·wo output positions.
func im2colRows(g *Geom, x, col []float32, ld, oh0, oh1 int) {
	hw := g.h * g.w
	r := 0
	for ci := 0; ci < g.c; ci++ {
		img := x[ci*hw : (ci+1)*hw]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				row := col[r*ld : r*ld+(oh1-oh0)*g.wo]
				r++
				off := kj*g.dw - g.pw
				lo, hi := validRange(off, g.sw, g.w, g.wo)
				for oh := oh0; oh < oh1; oh++ {
					dst := row[(oh-oh0)*g.wo : (oh-oh0+1)*g.wo]
					ih := oh*g.sh - g.ph + ki*g.dh
					if ih < 0 || ih >= g.h {
						clear(dst)
						continue
					}
					src := img[ih*g.w : (ih+1)*g.w]
					clear(dst[:lo])
					clear(dst[hi:])
					if g.sw == 1 {
						copy(dst[lo:hi], src[lo+off:hi+off])
						continue
					}
					for ow := lo; ow < hi; ow++ {
						dst[ow] = src[ow*g.sw+off]
					}
				}
			}
		}
	}
}

// wide reports whether im2colWide applies: stride 1 and no negative
// padding.
func (g *Geom) wide() bool {
	return g.sh == 1 && g.sw == 1 && g.ph >= 0 && g.pw >= 0
}

// widePitch returns the row length of the padded image used by
// im2colWide, which is also the number of columns per output row of the
// wide im2col matrix.
func (g *Geom) widePitch() int { return g.w + 2*g.pw }

// padSize returns the length of the padded-image buffer of im2colWide.
func (g *Geom) padSize() int {
	return g.c*(g.h+2*g.ph)*g.widePitch() + (g.kw-1)*g.dw
}

// im2colWide is im2col for stride 1 computed on the output grid widened to
// the padded width wp = g.widePitch(): output (oh, ow) for ow in [0, wp)
// reads the padded image at (oh + ki·dh, ow + kj·dw), so that every row of
// the matrix is one contiguous slice of the padded image. Columns ow >=
// g.wo are garbage and must be dropped from the product. col is a g.rows ×
// g.ho·wp matrix with row stride ld; pad is scratch of g.padSize() elements.
func im2colWide(g *Geom, x, pad, col []float32, ld int) {
	wp, hp := g.widePitch(), g.h+2*g.ph
	plane := hp * wp
	padImage(g, x, pad)
	n := g.ho * wp
	r := 0
	for ci := 0; ci < g.c; ci++ {
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				start := ci*plane + ki*g.dh*wp + kj*g.dw
				copy(col[r*ld:r*ld+n], pad[start:start+n])
				r++
			}
		}
	}
}

// col2im is the adjoint of im2col: it adds every element of col (g.rows ×
// g.cols) to the input element of dx (c×h×w) it was copied from, skipping
// padding positions. Additions happen in a fixed order.
func col2im(g *Geom, col, dx []float32) {
	if g.sw == 2 && g.sh == 2 {
		col2imStride2(g, col, dx)
		return
	}
	col2imRows(g, col, dx)
}

// col2imRows is col2im for any geometry, one output row at a time.
func col2imRows(g *Geom, col, dx []float32) {
	hw, p := g.h*g.w, g.cols
	for ci := 0; ci < g.c; ci++ {
		img := dx[ci*hw : (ci+1)*hw]
		for ki := 0; ki < g.kh; ki++ {
			// Output row oh adds the rows (ci, ki, kj) of col, kj in
			// order, to input row ih while it is in cache. Each input
			// element receives at most one value per (ki, kj), so the
			// order of its additions is that of (ki, kj) alone.
			for oh := 0; oh < g.ho; oh++ {
				ih := oh*g.sh - g.ph + ki*g.dh
				if ih < 0 || ih >= g.h {
					continue
				}
				dst := img[ih*g.w : (ih+1)*g.w]
				for kj := 0; kj < g.kw; kj++ {
					r := (ci*g.kh+ki)*g.kw + kj
					off := kj*g.dw - g.pw
					lo, hi := validRange(off, g.sw, g.w, g.wo)
					if lo == hi {
						continue
					}
					src := col[r*p+oh*g.wo+lo : r*p+oh*g.wo+hi]
					if g.sw == 1 {
						d := dst[lo+off : hi+off]
						for i, v := range src {
							d[i] += v
						}
						continue
					}
					d := dst[lo*g.sw+off : (hi-1)*g.sw+off+1]
					for i, v := range src {
						d[i*g.sw] += v
					}
				}
			}
		}
	}
}

// col2imStride2 is col2im for strides of 2 on both axes: each row (ci,
// ki, kj) of col is added to every second value of the input rows it
// came from, all of them in one call (kernels.AddStride2Rows). Each input
// value receives at most one value per (ki, kj), and the rows are taken
// in (ki, kj) order, so the order of the additions to each value is that
// of col2im's.
func col2imStride2(g *Geom, col, dx []float32) {
	hw, p := g.h*g.w, g.cols
	for ci := 0; ci < g.c; ci++ {
		img := dx[ci*hw : (ci+1)*hw]
		for ki := 0; ki < g.kh; ki++ {
			// Output rows oh whose input row 2·oh − ph + ki·dh lies in
			// the image.
			offH := ki*g.dh - g.ph
			olo, ohi := validRange(offH, 2, g.h, g.ho)
			if olo == ohi {
				continue
			}
			for kj := 0; kj < g.kw; kj++ {
				r := (ci*g.kh+ki)*g.kw + kj
				off := kj*g.dw - g.pw
				lo, hi := validRange(off, 2, g.w, g.wo)
				if lo == hi {
					continue
				}
				at := (2*olo+offH)*g.w + 2*lo + off
				kernels.AddStride2Rows(img[at:], 2*g.w, col[r*p+olo*g.wo+lo:], g.wo, ohi-olo, hi-lo)
			}
		}
	}
}

// im2colT writes the transposed im2col matrix of one image: xT holds the
// image in h×w×c (channels-last) order, and row (oh, ow) of colT, a g.cols ×
// g.rows matrix, lists the inputs under the kernel at that output position
// in (ki, kj, ci) order, with 0 in the padding. Because xT keeps the
// channels of a pixel together, each kernel row is one or a few contiguous
// copies.
func im2colT(g *Geom, xT, colT []float32) {
	c, k := g.c, g.rows
	run := g.kw * c
	for oh := 0; oh < g.ho; oh++ {
		for ow := 0; ow < g.wo; ow++ {
			row := colT[(oh*g.wo+ow)*k : (oh*g.wo+ow+1)*k]
			iw0 := ow*g.sw - g.pw
			for ki := 0; ki < g.kh; ki++ {
				seg := row[ki*run : (ki+1)*run]
				ih := oh*g.sh - g.ph + ki*g.dh
				if ih < 0 || ih >= g.h {
					clear(seg)
					continue
				}
				pix := xT[ih*g.w*c : (ih+1)*g.w*c]
				if g.dw == 1 && iw0 >= 0 && iw0+g.kw <= g.w {
					copy(seg, pix[iw0*c:(iw0+g.kw)*c])
					continue
				}
				for kj := 0; kj < g.kw; kj++ {
					d := seg[kj*c : (kj+1)*c]
					if iw := iw0 + kj*g.dw; iw >= 0 && iw < g.w {
						copy(d, pix[iw*c:(iw+1)*c])
					} else {
						clear(d)
					}
				}
			}
		}
	}
}

// colScratch holds im2col matrices; partialScratch holds per-chunk weight
// gradient partial sums.
var colScratch, partialScratch scratch

// scratch is a free list of float32 buffers reused across calls. Unlike a
// sync.Pool it is not emptied by the garbage collector, so steady-state
// training allocates no scratch space; it holds at most as many buffers as
// were ever in use at once (about one per worker), each grown to the
// largest size requested.
type scratch struct {
	mu   sync.Mutex
	free [][]float32
}

// get returns a buffer of length n with unspecified contents: the
// smallest free one that is large enough, or else a new one that replaces
// the smallest free one, so that callers asking for buffers of different
// sizes at once do not keep replacing each other's.
func (s *scratch) get(n int) []float32 {
	s.mu.Lock()
	best, smallest := -1, -1
	for i, b := range s.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
			best = i
		}
		if smallest < 0 || cap(b) < cap(s.free[smallest]) {
			smallest = i
		}
	}
	if best < 0 {
		best = smallest
	}
	var b []float32
	if best >= 0 {
		b = s.free[best]
		last := len(s.free) - 1
		s.free[best] = s.free[last]
		s.free = s.free[:last]
	}
	s.mu.Unlock()
	if cap(b) < n {
		b = make([]float32, n)
	}
	return b[:n]
}

// put returns a buffer obtained from get.
func (s *scratch) put(b []float32) {
	s.mu.Lock()
	s.free = append(s.free, b)
	s.mu.Unlock()
}
