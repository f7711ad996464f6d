package conv

import (
	"fmt"
	"slices"
	"sync"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// SparseWeight is the weight of a convolution (Cout, Cin, kh, kw) or of a
// linear layer (out, in) stored as a compressed sparse row matrix: the
// nonzero elements of every filter (row) with their positions. It is a
// snapshot: changing the dense weight afterwards does not change it (see
// Matches). A SparseWeight is safe for concurrent use.
//
// ForwardSparse, a sparse Plan and Linear multiply it with the input; the
// product skips the zeros, which pays from a zero fraction of about a
// half on (docs/benchmarks.md has the measurements).
type SparseWeight struct {
	shape      []int
	rows, cols int // filter matrix: rows × cols = Cout × Cin·kh·kw or out × in
	kh, kw     int // kernel size; 1 × 1 for a linear weight
	rowPtr     []int32
	col        []int32
	val        []float32

	mu   sync.Mutex
	offs map[[3]int]*kernels.CSR // the matrix with the element offsets of each input layout
}

// NewSparseWeight returns the sparse form of w, a convolution weight of
// shape (Cout, Cin, kh, kw) or a linear weight of shape (out, in),
// keeping every element that is not zero (NaN included; −0 counts as
// zero). It panics for other ranks, a length that does not match the
// shape, or a matrix with 2³¹ or more nonzero elements or columns.
func NewSparseWeight(w []float32, shape []int) *SparseWeight {
	s := &SparseWeight{shape: slices.Clone(shape), kh: 1, kw: 1}
	switch len(shape) {
	case 2:
		s.rows, s.cols = shape[0], shape[1]
	case 4:
		s.rows, s.cols = shape[0], shape[1]*shape[2]*shape[3]
		s.kh, s.kw = shape[2], shape[3]
	default:
		panic(fmt.Sprintf("conv.NewSparseWeight: weight must have rank 2 (out, in) or 4 (Cout, Cin, kh, kw), got shape %v", shape))
	}
	if min(s.rows, s.cols, s.kh, s.kw) < 0 || len(w) != s.rows*s.cols {
		panic(fmt.Sprintf("conv.NewSparseWeight: %d values for a weight of shape %v", len(w), shape))
	}
	const limit = 1<<31 - 1
	if s.cols > limit {
		panic(fmt.Sprintf("conv.NewSparseWeight: weight %v has more than 2^31 columns", shape))
	}
	nnz := 0
	for _, v := range w {
		if v != 0 {
			nnz++
		}
	}
	if nnz > limit {
		panic(fmt.Sprintf("conv.NewSparseWeight: weight %v has more than 2^31 nonzero elements", shape))
	}
	s.rowPtr = make([]int32, s.rows+1)
	s.col = make([]int32, 0, nnz)
	s.val = make([]float32, 0, nnz)
	for r := range s.rows {
		for c, v := range w[r*s.cols : (r+1)*s.cols] {
			if v != 0 {
				s.col = append(s.col, int32(c))
				s.val = append(s.val, v)
			}
		}
		s.rowPtr[r+1] = int32(len(s.val))
	}
	return s
}

// Shape returns the shape of the dense weight. The caller must not modify
// it.
func (s *SparseWeight) Shape() []int { return s.shape }

// NNZ returns the number of stored (nonzero) elements.
func (s *SparseWeight) NNZ() int { return len(s.val) }

// Matches reports whether the weight w of the given shape has exactly the
// elements s was made from (every nonzero bit-identical, every other
// element ±0). It reads all of w.
func (s *SparseWeight) Matches(w []float32, shape []int) bool {
	if !slices.Equal(shape, s.shape) || len(w) != s.rows*s.cols {
		return false
	}
	for r := range s.rows {
		p := int(s.rowPtr[r])
		for c, v := range w[r*s.cols : (r+1)*s.cols] {
			if p < int(s.rowPtr[r+1]) && int(s.col[p]) == c {
				if v != s.val[p] && !(v != v && s.val[p] != s.val[p]) {
					return false
				}
				p++
				continue
			}
			if v != 0 {
				return false
			}
		}
	}
	return true
}

// offsets returns the element offset of every term in an input laid out
// with strides a (input channel), b (kernel row) and c (kernel column):
// column (ci, ki, kj) of the filter matrix reads the dense row that starts
// at ci·a + ki·b + kj·c: the matrix the sparse product multiplies with,
// its offsets checked once. The result is cached per layout.
func (s *SparseWeight) offsets(a, b, c int) *kernels.CSR {
	return s.offsetsOf([3]int{a, b, c}, func(ci, ki, kj int) int { return ci*a + ki*b + kj*c })
}

// phaseOffsets returns the offset of every term in the phase layout of
// geometry g (phaseImage): tap (ki, kj) of channel ci reads phase plane
// (ki mod s, kj mod s) from row ki div s, column kj div s on, so that the
// output on the grid widened to the phase planes' width is one run per
// term. The result is cached per layout.
func (s *SparseWeight) phaseOffsets(g *Geom) *kernels.CSR {
	st := g.sh
	pa, pb, ph, pw := g.phases()
	plane := ph * pw
	// Linear layouts have a positive channel stride: a negative first
	// key element cannot collide with theirs.
	key := [3]int{-pa * pb * plane, pw, st}
	return s.offsetsOf(key, func(ci, ki, kj int) int {
		return ((ci*pa+ki%st)*pb+kj%st)*plane + (ki/st)*pw + kj/st
	})
}

// offsetsOf returns the matrix with the offset at(ci, ki, kj) of every
// term, cached under key.
func (s *SparseWeight) offsetsOf(key [3]int, at func(ci, ki, kj int) int) *kernels.CSR {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.offs[key]; ok {
		return m
	}
	off := make([]int, len(s.col))
	khw := s.kh * s.kw
	for t, k := range s.col {
		ci, r := int(k)/khw, int(k)%khw
		off[t] = at(ci, r/s.kw, r%s.kw)
	}
	if s.offs == nil || len(s.offs) >= 8 {
		s.offs = map[[3]int]*kernels.CSR{}
	}
	m := kernels.NewCSR(s.rowPtr, off, s.val)
	s.offs[key] = m
	return m
}

// mulRows computes dst row r = bias[r] (or 0) + Σ_t val[t]·src[off[t]+j]
// for the filters r of s, j in [0, n), with row stride ldd, in parallel
// over filters; m holds s's values with the offsets off of src's layout
// (offsets), span is the offset window of kernels.SparseRows.
//
// If serial, it runs on the calling goroutine.
func (s *SparseWeight) mulRows(dst []float32, ldd, n int, m *kernels.CSR, src []float32, bias []float32, span int, serial bool) {
	if serial || parallel.Workers() == 1 {
		// On the calling goroutine, without the closure parallel.For would
		// put on the heap.
		sparseRows(dst, ldd, n, m, src, bias, 0, s.rows, span)
		return
	}
	parallel.For(s.rows, parallel.Grain(s.rows, 4), func(lo, hi int) {
		sparseRows(dst[lo*ldd:], ldd, n, m, src, bias, lo, hi, span)
	})
}

// sparseRows sets the rows [lo, hi) of the product (dst holds row lo
// first): from the bias, or from zero when bias is nil.
func sparseRows(dst []float32, ldd, n int, m *kernels.CSR, src, bias []float32, lo, hi, span int) {
	if bias == nil {
		for r := range hi - lo {
			clear(dst[r*ldd : r*ldd+n])
		}
	}
	kernels.SparseRows(dst, ldd, n, m, src, bias, lo, hi, span)
}

// windowRows is the number of im2col rows in one offset window of the
// sparse product (see kernels.Rows): with the 256-column blocks of spmm that
// is 128 KiB of the im2col matrix, which stays in the L2 cache.
const windowRows = 128

// wideSpan returns the offset window of the sparse product on the widened
// grid of geometry g: 16 input channels keep the padded rows a window reads
// in the cache; an image of at most wideWhole values stays there whole,
// and without windows (0) each filter's accumulators are loaded and stored
// once per column block instead of once per window.
func wideSpan(g *Geom) int {
	if g.padSize() <= wideWhole {
		return 0
	}
	return 16 * (g.h + 2*g.ph) * g.widePitch()
}

// wideWhole is the largest padded image (in values, 128 KiB) that the
// sparse product reads without offset windows.
const wideWhole = 32 << 10

// mustMatchSparse panics unless s was made for a weight of the given
// shape.
func mustMatchSparse(op string, shape []int, s *SparseWeight) {
	if !slices.Equal(shape, s.shape) {
		panic(fmt.Sprintf("conv.%s: sparse weight of shape %v for weight %v", op, s.shape, shape))
	}
}

// ForwardSparse sets out to what Forward(g, n, m, x, w, bias, out)
// computes, where s is the sparse form of w (m = s.Shape()[0]): the
// product skips the zero weights. Each output channel is the sum of its
// nonzero weights times the matching rows of the im2col matrix, added in
// the order of the weights. For stride 1 and output rows of at least
// eight positions those rows are read straight from the zero-padded image
// on the widened grid of im2colWide, so no im2col matrix is built; the
// product runs in windows of 16 input channels (the padded rows they read
// stay in the cache). Results equal Forward's to float32 rounding (a
// different summation order) and are bit-identical for every number of
// workers. It panics if s is not a convolution weight of g's kernel and
// channels, or on lengths Forward would refuse.
func ForwardSparse(g *Geom, s *SparseWeight, n int, x, bias, out []float32) {
	if len(s.shape) != 4 || s.shape[1] != g.c || s.kh != g.kh || s.kw != g.kw {
		panic(fmt.Sprintf("conv.ForwardSparse: sparse weight of shape %v for geometry %s", s.shape, g))
	}
	m := s.rows
	xSize, ySize := g.c*g.h*g.w, m*g.cols
	if n < 0 || len(x) != n*xSize || len(out) != n*ySize || (bias != nil && len(bias) != m) {
		panic(fmt.Sprintf("conv.ForwardSparse: %d images and %d filters of geometry %s need %d input, %d output and 0 or %d bias values, got %d, %d and %d",
			n, m, g, n*xSize, n*ySize, m, len(x), len(out), len(bias)))
	}
	sparseConv(g, s, n, x, out, bias, nil, kernels.Plain, false)
}

// sparseConv sets out to the convolution of geometry g of the n images in
// x with the sparse filters s, plus bias (if not nil): ForwardSparse's
// product. If serial, each image's filters run on one
// worker (the images still run in parallel).
//
// The epilogue e (kernels.ReLU, or kernels.AddReLU with residual, laid
// out as out) is applied to each image while its product is in the cache,
// in the same pass that drops the widened grid's extra columns; with
// kernels.Plain and a nil residual there is none. The residual is read
// only with AddReLU.
func sparseConv(g *Geom, s *SparseWeight, n int, x, out, bias, residual []float32, e kernels.Epilogue, serial bool) {
	c := sparseCall{g: g, s: s, x: x, out: out, bias: bias, residual: residual, e: e, serial: serial,
		xSize: g.c * g.h * g.w, ySize: s.rows * g.cols}
	grain := 1
	switch {
	case g.direct():
		c.kind = sparseDirect
		c.off = s.offsets(g.h*g.w, 0, 0)
	case sparseWide(g):
		c.kind = sparseWideGrid
		c.wp = g.widePitch()
		c.off = s.offsets((g.h+2*g.ph)*c.wp, g.dh*c.wp, g.dw)
		c.span = wideSpan(g)
	case g.sh > 1 && g.sh == g.sw && g.dh == 1 && g.dw == 1 && g.ph >= 0 && g.pw >= 0 && g.wo >= 8:
		// Strided: each image in the phase layout, where every term reads
		// one run per output row of the grid widened to the phase planes'
		// width (no im2col matrix).
		c.kind = sparsePhase
		c.off = s.phaseOffsets(g)
		_, _, _, c.wp = g.phases()
	default:
		c.kind = sparseIm2col
		grain = groupSize(g.cols)
	}
	if parallel.Workers() <= 1 || parallel.Chunks(n, grain) <= 1 {
		for lo := 0; lo < n; lo += grain {
			c.images(lo, min(lo+grain, n)) // on the calling goroutine, allocating nothing
		}
		return
	}
	h := c // only a parallel loop puts the call on the heap
	parallel.For(n, grain, h.images)
}

// sparseCall is one call of sparseConv: what its loop over the images
// needs, handed to a method rather than captured by closures.
type sparseCall struct {
	g                      *Geom
	s                      *SparseWeight
	x, out, bias, residual []float32
	xSize, ySize           int
	e                      kernels.Epilogue
	serial                 bool
	kind                   sparseKind
	off                    *kernels.CSR // the product's offsets (but im2col's)
	wp, span               int          // widened row length, offset window
}

// sparseKind is how sparseConv reads an image.
type sparseKind uint8

const (
	sparseDirect   sparseKind = iota // 1×1, stride 1, no padding: the image itself
	sparseWideGrid                   // the padded image on the widened grid
	sparsePhase                      // the phase layout on its widened grid
	sparseIm2col                     // an im2col matrix per group of images
)

// res returns image i's residual, or nil.
func (c *sparseCall) res(i int) []float32 {
	if c.e != kernels.AddReLU {
		return nil
	}
	return c.residual[i*c.ySize : (i+1)*c.ySize]
}

// finish applies the epilogue to image i in place.
func (c *sparseCall) finish(i int) {
	if c.e != kernels.Plain {
		y := c.out[i*c.ySize : (i+1)*c.ySize]
		kernels.Affine(y, y, c.res(i), 0, 1, 0, c.e)
	}
}

// images computes the images [lo, hi).
func (c *sparseCall) images(lo, hi int) {
	g, s := c.g, c.s
	cout, p := s.rows, g.cols
	xSize, ySize := c.xSize, c.ySize
	switch c.kind {
	case sparseDirect:
		for i := lo; i < hi; i++ {
			s.mulRows(c.out[i*ySize:(i+1)*ySize], p, p, c.off, c.x[i*xSize:(i+1)*xSize], c.bias, windowRows*p, c.serial)
			c.finish(i)
		}
	case sparseWideGrid, sparsePhase:
		np := g.ho * c.wp
		size := g.padSize()
		if c.kind == sparsePhase {
			size = g.phaseSize()
		}
		buf, tmp := colScratch.get(size), colScratch.get(cout*np)
		defer colScratch.put(buf)
		defer colScratch.put(tmp)
		for i := lo; i < hi; i++ {
			span := c.span
			if c.kind == sparsePhase {
				phaseImage(g, c.x[i*xSize:(i+1)*xSize], buf, 0, g.c)
				span = 0
			} else {
				padImage(g, c.x[i*xSize:(i+1)*xSize], buf)
			}
			s.mulRows(tmp, np, np, c.off, buf, c.bias, span, c.serial)
			dropWide(g, cout, c.wp, tmp, c.out[i*ySize:(i+1)*ySize], c.res(i), c.e)
		}
	default:
		cnt := hi - lo
		ld := cnt * p
		off := s.offsets(g.kh*g.kw*ld, g.kw*ld, ld)
		col := colScratch.get(g.rows * ld)
		defer colScratch.put(col)
		for j := 0; j < cnt; j++ {
			im2col(g, c.x[(lo+j)*xSize:(lo+j+1)*xSize], col[j*p:], ld)
		}
		if cnt == 1 {
			s.mulRows(c.out[lo*ySize:(lo+1)*ySize], p, p, off, col, c.bias, windowRows*ld, c.serial)
			c.finish(lo)
			return
		}
		tmp := colScratch.get(cout * ld)
		defer colScratch.put(tmp)
		s.mulRows(tmp, ld, ld, off, col, c.bias, windowRows*ld, c.serial)
		for j := 0; j < cnt; j++ {
			for o := 0; o < cout; o++ {
				copy(c.out[(lo+j)*ySize+o*p:(lo+j)*ySize+(o+1)*p], tmp[o*ld+j*p:o*ld+(j+1)*p])
			}
			c.finish(lo + j)
		}
	}
}

// padImage writes the zero-padded image of x into pad, laid out as
// im2colWide reads it.
func padImage(g *Geom, x, pad []float32) { padChannels(g, x, pad, 0, g.c) }

// padChannels is padImage for the channels [c0, c1) alone; the channel
// range that ends at g.c also clears what follows the last plane.
func padChannels(g *Geom, x, pad []float32, c0, c1 int) {
	wp, hp := g.widePitch(), g.h+2*g.ph
	plane := hp * wp
	// One pass over pad: each plane's top padding rows and the left
	// padding of its first row, then every image row followed by the
	// right padding of its row and the left padding of the next, and the
	// bottom padding rows with what follows the last plane.
	for ci := c0; ci < c1; ci++ {
		dst := pad[ci*plane : (ci+1)*plane]
		clear(dst[:g.ph*wp+g.pw])
		for ih := 0; ih < g.h; ih++ {
			at := (ih+g.ph)*wp + g.pw
			copyRow(dst[at:at+g.w], x[(ci*g.h+ih)*g.w:(ci*g.h+ih+1)*g.w])
			if ih < g.h-1 {
				for i := range dst[at+g.w : at+wp] {
					dst[at+g.w+i] = 0 // a few values: no call to memclr
				}
			}
		}
		clear(dst[(g.h-1+g.ph)*wp+g.pw+g.w:])
	}
	if c1 == g.c {
		clear(pad[g.c*plane : g.padSize()])
	}
}

// copyRow is copy(dst, src) for len(dst) == len(src), moving whole
// blocks of 8 values inline: image rows are short, and padImage copies
// one per call, where calling memmove costs as much as the copy. (A
// block copied through a local variable compiles to vector moves; one
// assigned straight from src, which might overlap dst, calls memmove.)
func copyRow(dst, src []float32) {
	n := len(dst) &^ 7
	for i := 0; i < n; i += 8 {
		v := *(*[8]float32)(src[i:])
		*(*[8]float32)(dst[i:]) = v
	}
	if n < len(dst) {
		copy(dst[n:], src[n:len(dst)])
	}
}

// dropWide copies the product on a widened grid (cout planes of g.ho rows
// of wp positions) to y, dropping the extra columns, and applies the
// epilogue e on the way (kernels.Plain: a plain copy; the residual r, laid
// out as y, is read only with kernels.AddReLU).
func dropWide(g *Geom, cout, wp int, wide, y, r []float32, e kernels.Epilogue) {
	for o := 0; o < cout; o++ {
		for oh := 0; oh < g.ho; oh++ {
			src := wide[(o*g.ho+oh)*wp:]
			at := (o*g.ho + oh) * g.wo
			dst := y[at : at+g.wo]
			if e == kernels.Plain {
				copy(dst, src[:g.wo])
				continue
			}
			var ro []float32
			if r != nil {
				ro = r[at:]
			}
			kernels.Affine(dst, src, ro, 0, 1, 0, e)
		}
	}
}

// Linear sets out (batch × out values) to x·Wᵀ + bias for the linear
// weight W (out × in) whose sparse form s is and the batch rows of x (in
// values each); bias has out values, or is nil. Each output feature sums
// its nonzero weights times the matching input features, over the batch
// at once, in the order of the weights: the results equal the dense
// product's to float32 rounding and are bit-identical for every number of
// workers. It panics if s is not a linear weight or on other lengths.
func (s *SparseWeight) Linear(batch int, x, bias, out []float32) {
	nOut, in := s.rows, s.cols
	if len(s.shape) != 2 || batch < 0 || len(x) != batch*in || len(out) != batch*nOut || (bias != nil && len(bias) != nOut) {
		panic(fmt.Sprintf("conv.SparseWeight.Linear: a batch of %d for weight %v needs %d input, %d output and 0 or %d bias values, got %d, %d and %d",
			batch, s.shape, batch*in, batch*nOut, nOut, len(x), len(out), len(bias)))
	}
	if batch == 0 {
		return
	}
	off := s.offsets(batch, 0, 0)
	if batch == 1 {
		s.mulRows(out, 1, 1, off, x, bias, 0, false)
		return
	}
	// Features as rows: yᵀ = W·xᵀ.
	xT, yT := colScratch.get(in*batch), colScratch.get(nOut*batch)
	defer colScratch.put(xT)
	defer colScratch.put(yT)
	kernels.Transpose(batch, in, x, xT)
	s.mulRows(yT, batch, batch, off, xT, bias, windowRows*batch, false)
	kernels.Transpose(nOut, batch, yT, out)
}
