package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/parallel"
)

// copyGrain is the number of float32 elements a parallel copy chunk
// moves at least; copies write disjoint outputs, so it never affects results.
const copyGrain = 1 << 14

// normAxis resolves a possibly negative axis against rank, panicking with
// op's name when it is out of range.
func normAxis(op string, axis, rank int, shape []int) int {
	a := axis
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		panic(fmt.Sprintf("autograd.%s: axis %d out of range for shape %v", op, axis, shape))
	}
	return a
}

// splitAt returns the product of the dimensions before axis and after it.
func splitAt(shape []int, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, inner
}

// copyBlocks copies rows blocks of width elements from src (block stride
// srcStride, starting at srcOff) to dst (block stride dstStride, starting at
// dstOff), adding instead of overwriting when accumulate is set. Rows are
// processed in parallel; each destination element is written once.
func copyBlocks(dst []float32, dstOff, dstStride int, src []float32, srcOff, srcStride, rows, width int, accumulate bool) {
	if rows == 0 || width == 0 {
		return
	}
	grain := max(1, copyGrain/width)
	parallel.For(rows, grain, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			d := dst[dstOff+r*dstStride : dstOff+r*dstStride+width]
			s := src[srcOff+r*srcStride : srcOff+r*srcStride+width]
			if accumulate {
				for i, v := range s {
					d[i] += v
				}
			} else {
				copy(d, s)
			}
		}
	})
}

// Concat joins tensors along axis (negative counts from the end). All
// tensors must have the same rank and agree on every other dimension. The
// result is a new contiguous tensor; the gradient is routed back to the
// slice each input contributed.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("autograd.Concat: needs at least one tensor")
	}
	ts = append([]*Tensor(nil), ts...) // the graph must not see later changes to the caller's slice
	first := ts[0]
	rank := len(first.shape)
	ax := normAxis("Concat", axis, rank, first.shape)
	total := 0
	for i, t := range ts {
		if t == nil {
			panic(fmt.Sprintf("autograd.Concat: tensor %d is nil", i))
		}
		ok := len(t.shape) == rank
		for d := 0; ok && d < rank; d++ {
			ok = d == ax || t.shape[d] == first.shape[d]
		}
		if !ok {
			panic(fmt.Sprintf("autograd.Concat: shape mismatch along axis %d: tensor 0 %v vs tensor %d %v", axis, first.shape, i, t.shape))
		}
		total += t.shape[ax]
	}
	shape := cloneInts(first.shape)
	shape[ax] = total
	c := contextOf("Concat", ts...)
	out := c.empty(shape...)
	outer, inner := splitAt(shape, ax)
	stride := total * inner
	off := 0
	for _, t := range ts {
		w := t.shape[ax] * inner
		copyBlocks(out.Data, off, stride, t.Data, 0, w, outer, w, false)
		off += w
	}
	return c.record("Concat", out, func(g []float32) {
		off := 0
		for _, t := range ts {
			w := t.shape[ax] * inner
			if t.requiresGrad {
				copyBlocks(t.grad(), 0, w, g, off, stride, outer, w, true)
			}
			off += w
		}
	}, ts...)
}

// Slice returns the elements of x whose index along axis lies in [lo, hi),
// as a new contiguous tensor (axis may be negative). The gradient is added
// back into the matching region of x.
func Slice(x *Tensor, axis, lo, hi int) *Tensor {
	ax := normAxis("Slice", axis, len(x.shape), x.shape)
	if lo < 0 || hi < lo || hi > x.shape[ax] {
		panic(fmt.Sprintf("autograd.Slice: range [%d, %d) out of bounds for axis %d of shape %v", lo, hi, axis, x.shape))
	}
	shape := cloneInts(x.shape)
	shape[ax] = hi - lo
	c := contextOf("Slice", x)
	out := c.empty(shape...)
	outer, inner := splitAt(x.shape, ax)
	srcStride := x.shape[ax] * inner
	w := (hi - lo) * inner
	copyBlocks(out.Data, 0, w, x.Data, lo*inner, srcStride, outer, w, false)
	return c.record("Slice", out, func(g []float32) {
		copyBlocks(x.grad(), lo*inner, srcStride, g, 0, w, outer, w, true)
	}, x)
}
