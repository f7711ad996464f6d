package autograd

import "sync"

// convGeom describes the geometry of one 2-D convolution (or pooling)
// window sweep over a single C×H×W image.
type convGeom struct {
	c, h, w    int // input channels, height, width
	kh, kw     int // kernel height and width
	sh, sw     int // strides
	ph, pw     int // zero padding on each side
	dh, dw     int // dilations
	ho, wo     int // output height and width
	rows, cols int // im2col matrix size: c·kh·kw rows × ho·wo columns
}

// outSize returns the PyTorch output length of a convolution along one axis:
// ⌊(in + 2·pad − dil·(k−1) − 1) / stride⌋ + 1.
func outSize(in, k, stride, pad, dil int) int {
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

// im2col unrolls the image x (c×h×w) into col, a g.rows × g.cols matrix
// whose row (ci, ki, kj) holds, for every output position, the input
// element under kernel tap (ki, kj) of channel ci, or 0 in the padding.
func im2col(g *convGeom, x, col []float32) {
	hw, p := g.h*g.w, g.cols
	r := 0
	for ci := 0; ci < g.c; ci++ {
		img := x[ci*hw : (ci+1)*hw]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				row := col[r*p : (r+1)*p]
				r++
				off := kj*g.dw - g.pw
				lo, hi := validRange(off, g.sw, g.w, g.wo)
				for oh := 0; oh < g.ho; oh++ {
					dst := row[oh*g.wo : (oh+1)*g.wo]
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

// col2im is the adjoint of im2col: it adds every element of col (g.rows ×
// g.cols) to the input element of dx (c×h×w) it was copied from, skipping
// padding positions. Additions happen in a fixed order.
func col2im(g *convGeom, col, dx []float32) {
	hw, p := g.h*g.w, g.cols
	r := 0
	for ci := 0; ci < g.c; ci++ {
		img := dx[ci*hw : (ci+1)*hw]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				row := col[r*p : (r+1)*p]
				r++
				off := kj*g.dw - g.pw
				lo, hi := validRange(off, g.sw, g.w, g.wo)
				if lo == hi {
					continue
				}
				for oh := 0; oh < g.ho; oh++ {
					ih := oh*g.sh - g.ph + ki*g.dh
					if ih < 0 || ih >= g.h {
						continue
					}
					src := row[oh*g.wo+lo : oh*g.wo+hi]
					dst := img[ih*g.w : (ih+1)*g.w]
					if g.sw == 1 {
						dst = dst[lo+off : hi+off]
						for i, v := range src {
							dst[i] += v
						}
						continue
					}
					for i, v := range src {
						dst[(lo+i)*g.sw+off] += v
					}
				}
			}
		}
	}
}

// scratch is a free list of float32 buffers reused across calls. Unlike a
// sync.Pool it is not emptied by the garbage collector, so steady-state
// training allocates no scratch space; it holds at most as many buffers as
// were ever in use at once (about one per worker), each grown to the
// largest size requested.
type scratch struct {
	mu   sync.Mutex
	free [][]float32
}

// get returns a buffer of length n with unspecified contents.
func (s *scratch) get(n int) []float32 {
	s.mu.Lock()
	var b []float32
	if k := len(s.free); k > 0 {
		b = s.free[k-1]
		s.free = s.free[:k-1]
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

// colScratch holds im2col matrices; partialScratch holds per-chunk weight
// gradient partial sums.
var colScratch, partialScratch scratch
