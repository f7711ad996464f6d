package proxk

// Layout describes the groups of one tensor: count groups of size
// elements each; group g holds, for o < outer and j < inner, the element
// o·stride + g·inner + j.
type Layout struct {
	Count, Size  int
	Outer, Inner int
	Stride       int
}

// LayoutOf returns the groups of a tensor of the given shape.
func LayoutOf(byInput bool, shape []int) Layout {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if len(shape) < 2 || n == 0 {
		return Layout{Count: n, Size: 1, Outer: 1, Inner: 1, Stride: n}
	}
	if byInput {
		k := n / (shape[0] * shape[1])
		return Layout{Count: shape[1], Size: shape[0] * k, Outer: shape[0], Inner: k, Stride: shape[1] * k}
	}
	k := n / shape[0]
	return Layout{Count: shape[0], Size: k, Outer: 1, Inner: k, Stride: n}
}

// Contiguous reports whether every group is one contiguous run.
func (l Layout) Contiguous() bool { return l.Outer == 1 }

// Gather copies group g of src into dst[:l.Size].
func (l Layout) Gather(dst, src []float32, g int) {
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
