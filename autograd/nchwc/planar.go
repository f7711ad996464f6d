package nchwc

import (
	"fmt"
	"unsafe"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
)

// This file is the sparse convolution on planar activations: the
// register-tiled sparse×dense product of XNNPACK's sparse inference
// kernels (weights in compressed rows, the activations channel by
// channel, vectors over output pixels), with the activation laid out so
// that every nonzero weight of a 3×3 or 1×1 filter, stride 1 or 2, reads
// one contiguous run of its input as long as the whole output image, at
// an offset fixed at load: for stride 1 each channel is stored three
// times, shifted by one column each way (the three columns of the filter),
// for stride 2 its even and odd rows and columns apart. The product is
// kernels.SparseRows, which holds 64 output pixels of one output channel
// in registers (blocks of rowBlock) and adds one nonzero weight's
// broadcast times the input run to them per step, every output channel of
// a block in one call; on these layouts its loads are aligned to
// the 64-byte line wherever the image width is a multiple of 16 (and to
// 32 bytes for width 8), which makes it about 1.4× faster than on a
// padded image (measured on AMD EPYC Zen 4: 36 against 26 G
// multiply-adds/s at 50 % zeros on 16 channels of 32×32). BlockStore
// applies the epilogue (residual, ReLU) to the registers and stores a
// Shifted output's three planes from them (kernels.SparseShiftRows)
// instead of writing the sums and storing them in a second pass.

// Layout is how a Planar activation stores its channels.
type Layout uint8

const (
	// Flat is [C][H][W], the image itself (a residual or the classifier's
	// input).
	Flat Layout = iota
	// Shifted is the input of a stride-1 filter: each channel as three
	// planes of H+2 rows of W values, plane k holding x(r−1, j+k−1) at
	// row r, column j (zero outside the image), so that plane 1's rows 1
	// to H are the image.
	Shifted
	// Split is the input of a stride-2 filter with padding (k−1)/2: each
	// channel as six planes of ⌈H/2⌉+1 rows of ⌈W/2⌉ values, plane
	// (k, p) holding x(2r+p−1, 2j+k−1) at row r, column j (zero outside
	// the image).
	Split
)

// Planar is an activation of C channels and H×W pixels in one of the
// layouts of the sparse convolution; every plane starts on a 64-byte line
// (planes a multiple of 16 values apart). The values outside the image
// (padding rows and columns) are zero when made, and what writes a
// Planar writes only zeros there.
type Planar struct {
	C, H, W int
	Layout  Layout
	Data    []float32
	ps      int // values between consecutive planes
	rows    int // rows of a plane
	cols    int // values in a row of a plane
	planes  int // planes per channel
}

// NewPlanar returns a zero activation of c channels and h×w pixels in
// layout l.
func NewPlanar(c, h, w int, l Layout) *Planar {
	if c <= 0 || h <= 0 || w <= 0 {
		panic(fmt.Sprintf("nchwc.NewPlanar: %d channels, %d×%d pixels", c, h, w))
	}
	p := &Planar{C: c, H: h, W: w, Layout: l}
	switch l {
	case Flat:
		p.rows, p.cols, p.planes = h, w, 1
	case Shifted:
		p.rows, p.cols, p.planes = h+2, w, 3
	case Split:
		p.rows, p.cols, p.planes = (h+1)/2+1, (w+1)/2, 6
	default:
		panic(fmt.Sprintf("nchwc.NewPlanar: layout %d", l))
	}
	p.ps = (p.rows*p.cols + 15) &^ 15
	n := c * p.planes * p.ps
	buf := make([]float32, n+16)
	skip := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 4)
	p.Data = buf[skip : skip+n : skip+n]
	return p
}

// plane returns the offset of plane k of channel c.
func (p *Planar) plane(c, k int) int { return (c*p.planes + k) * p.ps }

// Image returns channel c's H×W values in row order, for a Flat or
// Shifted activation (in Shifted, the image rows of plane 1).
func (p *Planar) Image(c int) []float32 {
	switch p.Layout {
	case Flat:
		o := p.plane(c, 0)
		return p.Data[o : o+p.H*p.W]
	case Shifted:
		o := p.plane(c, 1) + p.W
		return p.Data[o : o+p.H*p.W]
	}
	panic("nchwc.Planar.Image: a Split activation has no image plane")
}

// At returns the value of channel c at pixel (y, x).
func (p *Planar) At(c, y, x int) float32 {
	switch p.Layout {
	case Flat, Shifted:
		return p.Image(c)[y*p.W+x]
	}
	k, j := 1+x%2, x/2 // x = 2j + k − 1
	ph, r := (y+1)%2, (y+1)/2
	return p.Data[p.plane(c, k*2+ph)+r*p.cols+j]
}

// SetImage writes the H×W values of channel c (row order) into p, in
// every plane of its layout. It does not allocate.
func (p *Planar) SetImage(c int, x []float32) {
	h, w := p.H, p.W
	if len(x) != h*w {
		panic(fmt.Sprintf("nchwc.Planar.SetImage: %d values for %d×%d pixels", len(x), h, w))
	}
	switch p.Layout {
	case Flat:
		copy(p.Image(c), x)
	case Shifted:
		at := p.plane(c, 0)
		kernels.ShiftStores(p.Data[at:], p.ps+w, w, 2*p.ps+w-1, 3*p.ps, x, len(x), nil, 0, 1, len(x), w, kernels.Plain)
	case Split:
		kernels.SplitStores(p.Data, p.plane(c, 0), p.ps, 6*p.ps, x, len(x), 1, h, w)
	}
}

// SparseFilter is a k×k convolution (k = 1 or 3, stride 1 or 2, padding
// (k−1)/2) with its nonzero weights in compressed rows, each with the
// offset of the input run it multiplies in the Planar layout of its
// input (Layout): the sparse convolution of Planar activations.
type SparseFilter struct {
	Cout, Cin, K, S int
	H, W            int // input pixels
	Ho, Wo          int // output pixels
	m               *kernels.CSR
	nnz             int
	in              *Planar // the geometry of the input layout (no data)
}

// PackSparse returns the sparse form of the filters w (cout × cin × k × k
// values, autograd's Conv2d layout), k 1 or 3, stride s 1 or 2, for
// inputs of h×w pixels: every weight that is not zero (−0 counts as
// zero), in the order of w.
func PackSparse(w []float32, cout, cin, k, s, h, wd int) *SparseFilter {
	if cout <= 0 || cin <= 0 || (k != 1 && k != 3) || (s != 1 && s != 2) || len(w) != cout*cin*k*k || h <= 0 || wd <= 0 {
		panic(fmt.Sprintf("nchwc.PackSparse: %d values for %d×%d×%d×%d, stride %d, %d×%d pixels", len(w), cout, cin, k, k, s, h, wd))
	}
	pad := (k - 1) / 2
	f := &SparseFilter{Cout: cout, Cin: cin, K: k, S: s, H: h, W: wd,
		Ho: (h+2*pad-k)/s + 1, Wo: (wd+2*pad-k)/s + 1}
	f.in = &Planar{C: cin, H: h, W: wd, Layout: f.InLayout()}
	g := NewPlanar(1, h, wd, f.InLayout()) // the geometry alone
	f.in.ps, f.in.rows, f.in.cols, f.in.planes = g.ps, g.rows, g.cols, g.planes
	rowPtr := make([]int32, cout+1)
	var off []int
	var val []float32
	for o := range cout {
		for ci := range cin {
			for ky := range k {
				for kx := range k {
					v := w[((o*cin+ci)*k+ky)*k+kx]
					if v == 0 {
						continue
					}
					off = append(off, f.offset(ci, ky, kx))
					val = append(val, v)
				}
			}
		}
		rowPtr[o+1] = int32(len(val))
	}
	f.nnz = len(val)
	f.m = kernels.NewCSR(rowPtr, off, val)
	return f
}

// offset returns the start of the run that tap (ky, kx) of input channel
// ci reads.
func (f *SparseFilter) offset(ci, ky, kx int) int {
	p := f.in
	switch {
	case f.S == 1 && f.K == 3:
		return p.plane(ci, kx) + ky*p.cols
	case f.S == 1:
		return p.plane(ci, 1) + p.cols
	case f.K == 3:
		return p.plane(ci, kx*2+ky%2) + ky/2*p.cols
	default: // 1×1, stride 2: x(2y, 2j)
		return p.plane(ci, 1*2+1)
	}
}

// InLayout returns the layout of f's input: Shifted for stride 1, Split
// for stride 2.
func (f *SparseFilter) InLayout() Layout {
	if f.S == 1 {
		return Shifted
	}
	return Split
}

// RowNNZ returns the number of nonzero weights of output channel o.
func (f *SparseFilter) RowNNZ(o int) int { return f.m.Terms(o) }

// NNZ returns the number of nonzero weights.
func (f *SparseFilter) NNZ() int { return f.nnz }

// OutSize returns the number of output values of one channel, Ho·Wo.
func (f *SparseFilter) OutSize() int { return f.Ho * f.Wo }

// Rows computes the output channels [lo, hi) of f applied to in, plus
// bias (Cout values; nil: none), into out, Cout rows of OutSize values
// (out holds row lo first). Each value adds the products of its nonzero
// weights in the order of the weights, one fused multiply-add each, so
// the result does not depend on how the channels are split among calls.
func (f *SparseFilter) Rows(in *Planar, bias []float32, out []float32, lo, hi int) {
	f.Block(in, bias, out, lo, hi, 0, f.OutSize())
}

// Block is Rows for the output pixels [p0, p1) alone (in row order,
// p = y·Wo + x): it writes only those columns of out's rows, so calls on
// disjoint channels or pixels may run concurrently, and every value is
// the same bits as Rows computes, however the pixels and channels are
// split among calls.
func (f *SparseFilter) Block(in *Planar, bias []float32, out []float32, lo, hi, p0, p1 int) {
	if in.C != f.Cin || in.H != f.H || in.W != f.W || in.Layout != f.InLayout() {
		panic(fmt.Sprintf("nchwc.SparseFilter.Rows: input %d×%d×%d (layout %d) for filters %d×%d×%d×%d on %d×%d (layout %d)",
			in.C, in.H, in.W, in.Layout, f.Cout, f.Cin, f.K, f.K, f.H, f.W, f.InLayout()))
	}
	n := f.OutSize()
	if p0 < 0 || p1 > n || lo < 0 || hi > f.Cout {
		panic(fmt.Sprintf("nchwc.SparseFilter.Block: channels [%d, %d) of %d, pixels [%d, %d) of %d", lo, hi, f.Cout, p0, p1, n))
	}
	if bias == nil {
		for r := range hi - lo {
			clear(out[r*n+p0 : r*n+p1])
		}
	}
	// Blocks of rowBlock output pixels: the runs a block reads stay in the
	// L1 cache while every output channel passes over them.
	if p0 < p1 {
		kernels.SparseRowsBlock(out[p0:], n, p1-p0, f.m, in.Data[p0:], bias, lo, hi, 0, rowBlock)
	}
}

// rowBlock is the number of output pixels Rows computes at a time: 4
// vectors. Measured on AMD EPYC Zen 4 (one thread, G multiply-adds/s,
// blocks of 32, 64, 128 and 256 pixels): 16 channels of 32×32 at 50 %
// zeros 32.7, 40.6, 41.7, 37.2; 32 of 16×16 at 80 % 35.0, 42.3, 39.0,
// 30.5; 64 of 8×8 at 90 % 25.1, 31.4, 30.0, 30.1; stride 2 from 16 of
// 32×32 at 60 % 27.3, 36.0, 32.6, 27.5.
const rowBlock = 64

// Store writes the output channels [lo, hi) of a convolution, computed
// by SparseFilter.Rows into y (Cout rows of H·W values, row lo first),
// into dst: plus the residual res (nil: none, else Flat or Shifted of
// dst's channels and pixels) and through a ReLU if relu. With a
// residual, relu must hold. y may be changed.
func Store(dst *Planar, y []float32, res *Planar, relu bool, lo, hi int) {
	StoreRows(dst, y, res, relu, lo, hi, 0, dst.H)
}

// StoreRows is Store for the image rows [r0, r1) alone (r0 even for a
// Split dst): it reads only those rows of y and res, and writes those
// rows of dst's channels [lo, hi) with their padding columns (in a Split
// dst, the plane rows they map to) and, in a Shifted dst, zeros into the
// padding columns of the rows either side; each value is the same bits
// as Store writes. Calls on runs of rows of one dst that are not next to
// each other, or on disjoint channels, may run concurrently.
func StoreRows(dst *Planar, y []float32, res *Planar, relu bool, lo, hi, r0, r1 int) {
	if res != nil && (!relu || res.C != dst.C || res.H != dst.H || res.W != dst.W) {
		panic(fmt.Sprintf("nchwc.Store: residual %d×%d×%d (relu %v) for %d×%d×%d", res.C, res.H, res.W, relu, dst.C, dst.H, dst.W))
	}
	if r0 < 0 || r1 > dst.H || (dst.Layout == Split && r0%2 != 0) {
		panic(fmt.Sprintf("nchwc.StoreRows: rows [%d, %d) of %d (layout %d)", r0, r1, dst.H, dst.Layout))
	}
	if lo >= hi || r0 >= r1 {
		return
	}
	w := dst.W
	n := dst.H * w
	e, r, ldr := epilogue(res, relu, lo, r0, w)
	if dst.Layout == Shifted {
		// Every channel in one pass.
		at := dst.plane(lo, 0) + r0*w
		kernels.ShiftStores(dst.Data[at:], dst.ps+w, w, 2*dst.ps+w-1, 3*dst.ps, y[r0*w:], n, r, ldr, hi-lo, (r1-r0)*w, w, e)
		return
	}
	for c := lo; c < hi; c++ {
		v := y[(c-lo)*n+r0*w : (c-lo)*n+r1*w]
		var r []float32
		if res != nil {
			r = res.Image(c)[r0*w : r1*w]
		}
		if dst.Layout != Split {
			kernels.Affine(dst.Image(c)[r0*w:r1*w], v, r, 0, 1, 0, e) // Plain: a copy
			continue
		}
		if e != kernels.Plain {
			kernels.Affine(v, v, r, 0, 1, 0, e)
		}
	}
	if dst.Layout == Split {
		// Image row y goes to plane row (y+1)/2 of its parity: rows from
		// an even r0 on start r0/2 plane rows down.
		kernels.SplitStores(dst.Data, dst.plane(lo, 0)+r0/2*dst.cols, dst.ps, 6*dst.ps, y[r0*w:], n, hi-lo, r1-r0, w)
	}
}

// epilogue returns the epilogue of a store with residual res (nil: none)
// and ReLU relu and, with a residual, its values from channel lo's image
// row r0 on (rows of w values), a channel every ldr values.
func epilogue(res *Planar, relu bool, lo, r0, w int) (e kernels.Epilogue, r []float32, ldr int) {
	switch {
	case res != nil:
		e = kernels.AddReLU
		r, ldr = res.Data[res.plane(lo, 0)+r0*w:], res.planes*res.ps
		if res.Layout == Shifted {
			r = res.Data[res.plane(lo, 1)+(r0+1)*w:]
		}
	case relu:
		e = kernels.ReLU
	}
	return e, r, ldr
}

// BlockStore is Block for the output rows [r0, r1) (pixels [r0·Wo,
// r1·Wo)) into y followed by StoreRows(dst, y, res, relu, lo, hi, r0, r1),
// with the same results in dst and the same contract; y's contents are
// then undefined. With a bias it applies the epilogue to the registers
// that summed each block of a channel (kernels.SparseShiftRows,
// kernels.SparseAffineRows) and stores a Shifted or Flat output from
// them, without writing y and reading it back (a Split output from y,
// without a pass of the epilogue over it): that store was about a sixth
// of the sparse ResNet-20's time on AMD EPYC Zen 4 (docs/benchmarks.md).
func (f *SparseFilter) BlockStore(in *Planar, bias, y []float32, dst, res *Planar, relu bool, lo, hi, r0, r1 int) {
	if bias == nil {
		f.Block(in, bias, y, lo, hi, r0*f.Wo, r1*f.Wo)
		StoreRows(dst, y, res, relu, lo, hi, r0, r1)
		return
	}
	if in.C != f.Cin || in.H != f.H || in.W != f.W || in.Layout != f.InLayout() || dst.C != f.Cout || dst.H != f.Ho || dst.W != f.Wo {
		panic(fmt.Sprintf("nchwc.SparseFilter.BlockStore: input %d×%d×%d (layout %d), output %d×%d×%d for filters %d×%d×%d×%d on %d×%d (layout %d)",
			in.C, in.H, in.W, in.Layout, dst.C, dst.H, dst.W, f.Cout, f.Cin, f.K, f.K, f.H, f.W, f.InLayout()))
	}
	if res != nil && (!relu || res.C != dst.C || res.H != dst.H || res.W != dst.W) {
		panic(fmt.Sprintf("nchwc.SparseFilter.BlockStore: residual %d×%d×%d (relu %v) for %d×%d×%d", res.C, res.H, res.W, relu, dst.C, dst.H, dst.W))
	}
	if r0 < 0 || r1 > dst.H || lo < 0 || hi > f.Cout || (dst.Layout == Split && r0%2 != 0) {
		panic(fmt.Sprintf("nchwc.SparseFilter.BlockStore: channels [%d, %d) of %d, rows [%d, %d) of %d (layout %d)", lo, hi, f.Cout, r0, r1, dst.H, dst.Layout))
	}
	if lo >= hi || r0 >= r1 {
		return
	}
	w, n := dst.W, f.OutSize()
	e, r, ldr := epilogue(res, relu, lo, r0, w)
	b := in.Data[r0*w:]
	switch dst.Layout {
	case Shifted:
		at := dst.plane(lo, 0) + r0*w
		kernels.SparseShiftRows(dst.Data[at:], dst.ps+w, w, 2*dst.ps+w-1, 3*dst.ps, y, f.m, b, bias, lo, hi, (r1-r0)*w, w, r, ldr, e, rowBlock)
	case Flat:
		kernels.SparseAffineRows(dst.Data[dst.plane(lo, 0)+r0*w:], dst.ps, f.m, b, bias, lo, hi, (r1-r0)*w, r, ldr, e, rowBlock)
	case Split:
		if e == kernels.Plain {
			f.Block(in, bias, y, lo, hi, r0*w, r1*w)
		} else {
			kernels.SparseAffineRows(y[r0*w:], n, f.m, b, bias, lo, hi, (r1-r0)*w, r, ldr, e, rowBlock)
		}
		kernels.SplitStores(dst.Data, dst.plane(lo, 0)+r0/2*dst.cols, dst.ps, 6*dst.ps, y[r0*w:], n, hi-lo, r1-r0, w)
	}
}

// CopyRows copies the image rows [r0, r1) of every channel of src, in
// every plane of its layout where they appear (the padding columns of
// those plane rows included), into p, of the same shape and layout: so
// that a worker computing a band of a convolution's output on its own
// buffers can take the rows next to its band (the halo its filters read)
// from the buffers of the worker that computed them. It writes nothing
// else of p.
func (p *Planar) CopyRows(src *Planar, r0, r1 int) {
	if src.C != p.C || src.H != p.H || src.W != p.W || src.Layout != p.Layout || r0 < 0 || r1 > p.H {
		panic(fmt.Sprintf("nchwc.Planar.CopyRows: rows [%d, %d) of %d×%d×%d (layout %d) into %d×%d×%d (layout %d)",
			r0, r1, src.C, src.H, src.W, src.Layout, p.C, p.H, p.W, p.Layout))
	}
	if r0 >= r1 {
		return
	}
	for c := range p.C {
		switch p.Layout {
		case Flat:
			o := p.plane(c, 0)
			copy(p.Data[o+r0*p.W:o+r1*p.W], src.Data[o+r0*p.W:o+r1*p.W])
		case Shifted:
			for k := range 3 {
				o := p.plane(c, k)
				copy(p.Data[o+(r0+1)*p.W:o+(r1+1)*p.W], src.Data[o+(r0+1)*p.W:o+(r1+1)*p.W])
			}
		case Split:
			// Image row y is row (y+1)/2 of the planes of parity (y+1)%2:
			// the rows of one parity are a run of plane rows.
			for ph := range 2 {
				y0 := r0 + (r0+ph+1)%2 // the first row of the band with (y+1)%2 = ph
				if y0 >= r1 {
					continue
				}
				a, b := (y0+1)/2*p.cols, ((r1-1-(r1-1+ph+1)%2)+1)/2*p.cols+p.cols
				for kx := range 3 {
					o := p.plane(c, kx*2+ph)
					copy(p.Data[o+a:o+b], src.Data[o+a:o+b])
				}
			}
		}
	}
}
