package proxk

import "fmt"

// Kinds of grouping (the values of prox.GroupBy).
const (
	GroupFilter = iota // one group per output filter (index 0)
	GroupInput         // one group per input channel (index 1)
	GroupBlock         // BlockWidth output channels at one position of the other indices
)

// BlockWidth is the number of output channels in a GroupBlock group: the
// float32 lanes of an AVX-512 vector, the channel block of the blocked
// convolution kernels (autograd/nchwc), which load exactly these weights
// as one vector.
const BlockWidth = 16

// Layout describes the groups of one tensor: Count groups of Size
// elements each; group g holds, for o < Outer and j < Inner, the element
// o·Stride + g·Inner + j. A blocked layout (Rows > 0, GroupBlock) is
// different: the tensor is Rows output channels of Stride elements each,
// and group g holds the element (BlockWidth·b + o)·Stride + j for o < Size,
// b = g / Stride, j = g mod Stride; the last block holds only the rows
// that exist (Gather pads it with zeros, Scatter writes only them).
type Layout struct {
	Count, Size  int
	Outer, Inner int
	Stride       int
	Rows         int
}

// LayoutOf returns the groups of the given kind (GroupFilter, GroupInput,
// GroupBlock) of a tensor of the given shape; a tensor of rank below 2
// makes one group per coordinate. It panics on an unknown kind.
func LayoutOf(kind int, shape []int) Layout {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if len(shape) < 2 || n == 0 {
		return Layout{Count: n, Size: 1, Outer: 1, Inner: 1, Stride: n}
	}
	switch kind {
	case GroupFilter:
		k := n / shape[0]
		return Layout{Count: shape[0], Size: k, Outer: 1, Inner: k, Stride: n}
	case GroupInput:
		k := n / (shape[0] * shape[1])
		return Layout{Count: shape[1], Size: shape[0] * k, Outer: shape[0], Inner: k, Stride: shape[1] * k}
	case GroupBlock:
		rows, cols := shape[0], n/shape[0]
		size := min(BlockWidth, rows)
		blocks := (rows + BlockWidth - 1) / BlockWidth
		return Layout{Count: blocks * cols, Size: size, Outer: size, Inner: 1, Stride: cols, Rows: rows}
	}
	panic(fmt.Sprintf("proxk.LayoutOf: unknown kind of grouping %d", kind))
}

// Len returns the number of elements of the tensor the layout describes.
func (l Layout) Len() int {
	if l.Rows > 0 {
		return l.Rows * l.Stride
	}
	return l.Count * l.Size
}

// blockRows returns, for a blocked layout, the first row of group g, its
// column and the number of rows it holds.
func (l Layout) blockRows(g int) (r0, col, rows int) {
	r0, col = g/l.Stride*BlockWidth, g%l.Stride
	return r0, col, min(l.Size, l.Rows-r0)
}

// PadLike sets the padding positions of group g gathered into dst (the
// rows a last, partial block lacks) to dst[0]: a step size η gathered
// there must be a positive one of the group, as the padded coordinates
// (zero) then change no sum or decision of a group map.
func (l Layout) PadLike(dst []float32, g int) {
	if l.Rows == 0 {
		return
	}
	_, _, rows := l.blockRows(g)
	for o := rows; o < l.Size; o++ {
		dst[o] = dst[0]
	}
}

// Contiguous reports whether every group is one contiguous run.
func (l Layout) Contiguous() bool { return l.Outer == 1 && l.Rows == 0 }

// Gather copies group g of src into dst[:l.Size].
func (l Layout) Gather(dst, src []float32, g int) {
	if l.Rows > 0 {
		r0, col, rows := l.blockRows(g)
		for o := range rows {
			dst[o] = src[(r0+o)*l.Stride+col]
		}
		clear(dst[rows:l.Size])
		return
	}
	in := l.Inner
	if in >= 32 {
		for o := range l.Outer {
			base := o*l.Stride + g*in
			copy(dst[o*in:(o+1)*in], src[base:base+in])
		}
		return
	}
	// Short runs (a 3×3 kernel per input channel): a loop costs less
	// than a call to copy per run.
	for o := range l.Outer {
		d, s := dst[o*in:(o+1)*in], src[o*l.Stride+g*in:][:in]
		for i, v := range s {
			d[i] = v
		}
	}
}

// Scatter copies src[:l.Size] back into group g of dst.
func (l Layout) Scatter(dst, src []float32, g int) {
	if l.Rows > 0 {
		r0, col, rows := l.blockRows(g)
		for o := range rows {
			dst[(r0+o)*l.Stride+col] = src[o]
		}
		return
	}
	in := l.Inner
	if in >= 32 {
		for o := range l.Outer {
			base := o*l.Stride + g*in
			copy(dst[base:base+in], src[o*in:(o+1)*in])
		}
		return
	}
	for o := range l.Outer {
		d, s := dst[o*l.Stride+g*in:][:in], src[o*in:(o+1)*in]
		for i, v := range s {
			d[i] = v
		}
	}
}

// Decisions of the group maps from float32 sums of a group (GroupSums32,
// or the strided accumulation of stridedPass.run).
const (
	DecideUndecided = iota // near a threshold: the full map decides
	DecideKeep             // x = z
	DecideZero             // x = 0
	DecideScale            // x = z − z·t, t = e(1 − e), e = c·η: ScaleFirstOrder
)

// Decider is a group map that decides most groups from ‖z‖₂² and
// Σ z_i²·η_i summed in float32 with relative error at most tol and the
// range [emin, emax] of η (sums in [1e-25, 1e30]); c is the factor of
// DecideScale. The decisions are exact: the error bound is accounted for.
type Decider interface {
	Decide32(z2, ze, emin, emax, tol float64, lambda float32) (act int, c float32)
}
