package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/internal/parallel"
)

// poolGeometry validates the operands of a square 2-D pooling op and
// returns the per-plane geometry (with c = 1). A zero stride means kernel,
// as in PyTorch. It panics naming op and the shape on invalid arguments.
func poolGeometry(op string, x *Tensor, kernel, stride, padding int) *poolGeom {
	if x.Rank() != 4 {
		panic(fmt.Sprintf("autograd.%s: input must have rank 4 (N,C,H,W), got shape %v", op, x.shape))
	}
	if stride == 0 {
		stride = kernel
	}
	if kernel < 1 || stride < 1 || padding < 0 {
		panic(fmt.Sprintf("autograd.%s: invalid kernel %d, stride %d or padding %d for input %v", op, kernel, stride, padding, x.shape))
	}
	if 2*padding > kernel {
		panic(fmt.Sprintf("autograd.%s: padding %d must be at most half the kernel size %d (input %v)", op, padding, kernel, x.shape))
	}
	g := &poolGeom{
		c: 1, h: x.shape[2], w: x.shape[3],
		kh: kernel, kw: kernel, sh: stride, sw: stride,
		ph: padding, pw: padding, dh: 1, dw: 1,
	}
	g.ho = conv.OutSize(g.h, kernel, stride, padding, 1)
	g.wo = conv.OutSize(g.w, kernel, stride, padding, 1)
	if g.ho < 1 || g.wo < 1 {
		panic(fmt.Sprintf("autograd.%s: input %v is too small for kernel %d with stride %d and padding %d", op, x.shape, kernel, stride, padding))
	}
	g.rows = kernel * kernel
	g.cols = g.ho * g.wo
	return g
}

// poolGeom is the geometry of a pooling window's sweep over one plane
// (c = 1): the plane, the window, the stride and padding (no dilation:
// dh = dw = 1) and the output size; rows is the window's size and cols the
// output's.
type poolGeom struct {
	c, h, w    int // channels (1), height, width
	kh, kw     int // window height and width
	sh, sw     int // strides
	ph, pw     int // padding on each side
	dh, dw     int // dilations (1)
	ho, wo     int // output height and width
	rows, cols int // window size, output positions
}

// window returns the input rows [h0, h1) and columns [w0, w1) covered by
// output position (oh, ow), clipped to the image.
func (g *poolGeom) window(oh, ow int) (h0, h1, w0, w1 int) {
	h0, w0 = oh*g.sh-g.ph, ow*g.sw-g.pw
	h1, w1 = min(h0+g.kh, g.h), min(w0+g.kw, g.w)
	return max(h0, 0), h1, max(w0, 0), w1
}

// poolGrain returns how many planes of hw elements one parallel chunk
// handles. Planes are independent, so the split never affects results.
func poolGrain(hw int) int {
	return max(1, (1<<14)/max(hw, 1))
}

// MaxPool2d returns the maximum over kernel×kernel windows of every plane of
// x (N, C, H, W), as torch.nn.functional.max_pool2d does with floor
// rounding: padding adds implicit −∞ borders (at most kernel/2 wide), and a
// zero stride means kernel. The gradient flows to the first maximum of each
// window in row-major scan order, as on PyTorch's CPU; NaN counts as the
// maximum.
func MaxPool2d(x *Tensor, kernel, stride, padding int) *Tensor {
	g := poolGeometry("MaxPool2d", x, kernel, stride, padding)
	planes, hw, p := x.shape[0]*x.shape[1], g.h*g.w, g.cols
	c := contextOf("MaxPool2d", x)
	out := c.empty(x.shape[0], x.shape[1], g.ho, g.wo)
	// The index within its plane of each output's maximum, stored as the
	// bits of a float32 so that the buffer can come from the arena.
	var arg []float32
	if c.needsGrad(x) {
		arg = c.alloc(len(out.Data), false)
	}
	plane := maxPoolPlane
	two := g.kh == 2 && g.sh == 2 && g.ph == 0
	if two {
		plane = maxPool2Plane
	}
	parallel.For(planes, poolGrain(hw), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			var a []float32
			if arg != nil {
				a = arg[pl*p : (pl+1)*p]
			}
			plane(g, x.Data[pl*hw:(pl+1)*hw], out.Data[pl*p:(pl+1)*p], a)
		}
	})
	return c.record("MaxPool2d", out, func(gy []float32) {
		if two {
			gx, store := x.gradTarget()
			parallel.For(planes, poolGrain(hw), func(lo, hi int) {
				for pl := lo; pl < hi; pl++ {
					maxPool2Grad(g, gy[pl*p:(pl+1)*p], arg[pl*p:(pl+1)*p], gx[pl*hw:(pl+1)*hw], store, true)
				}
			})
			return
		}
		gx := x.grad()
		parallel.For(planes, poolGrain(hw), func(lo, hi int) {
			for pl := lo; pl < hi; pl++ {
				gxp := gx[pl*hw : (pl+1)*hw]
				for o, v := range gy[pl*p : (pl+1)*p] {
					gxp[math.Float32bits(arg[pl*p+o])] += v
				}
			}
		})
	}, x)
}

// maxPoolPlane writes the window maxima of the plane src into dst and, if
// arg is not nil, the index in src of each maximum, the first in row-major
// scan order or the last NaN, as the bits of a float32 (math.Float32bits
// reads it back).
func maxPoolPlane(g *poolGeom, src, dst []float32, arg []float32) {
	for oh := 0; oh < g.ho; oh++ {
		for ow := 0; ow < g.wo; ow++ {
			h0, h1, w0, w1 := g.window(oh, ow)
			best, m := h0*g.w+w0, float32(math.Inf(-1))
			for ih := h0; ih < h1; ih++ {
				for iw := w0; iw < w1; iw++ {
					if v := src[ih*g.w+iw]; v > m || v != v {
						m, best = v, ih*g.w+iw
					}
				}
			}
			o := oh*g.wo + ow
			dst[o] = m
			if arg != nil {
				arg[o] = math.Float32frombits(uint32(best))
			}
		}
	}
}

// maxPool2Plane is maxPoolPlane for 2×2 windows with stride 2 and no
// padding, whose windows all lie inside the plane.
func maxPool2Plane(g *poolGeom, src, dst []float32, arg []float32) {
	maxPool2(g, src, dst, arg, true)
}

// pool2Runs splits the windows of a 2×2, stride-2 pool without padding
// between the AVX2 kernels, where asm allows them and the CPU has them,
// and the Go loops. It calls kern for each run of n windows (n a multiple
// of 8) that a kernel takes, eight at a time: four windows from the plane
// element at on, four more half elements further, then on by adv
// elements, with output index o on; and rest for each output row oh from
// column ow0 on that is left to the Go loop. The kernels take whole planes
// whose rows are four or eight windows wide (four from each of two rows
// for four) and otherwise runs of eight windows along a row.
func pool2Runs(g *poolGeom, asm bool, kern func(at, o, n, half, adv int), rest func(oh, ow0 int)) {
	w, wo := g.w, g.wo
	asm = asm && haveAVX2
	oh0 := 0 // the rows before oh0 are done
	if asm && (wo == 8 || wo == 4 && g.ho >= 2) {
		half, adv := 8, 2*w
		oh0 = g.ho
		if wo == 4 {
			half, adv = 2*w, 4*w
			oh0 = g.ho &^ 1
		}
		kern(0, 0, oh0*wo, half, adv)
	}
	for oh := oh0; oh < g.ho; oh++ {
		ow0 := 0
		if asm && wo >= 8 {
			ow0 = wo &^ 7
			kern(2*oh*w, oh*wo, ow0, 8, 16)
		}
		rest(oh, ow0)
	}
}

// pool2Last returns the index of the last plane element that a kernel
// run of pool2Runs reads or writes.
func pool2Last(w, at, n, half, adv int) int { return at + (n/8-1)*adv + half + w + 7 }

// maxPool2 is maxPool2Plane; asm allows the AVX2 kernel (see pool2Runs),
// so that the tests can compare it with the Go loop. Starting from the
// window's first element gives what maxPoolPlane's start from −∞ gives.
func maxPool2(g *poolGeom, src, dst []float32, arg []float32, asm bool) {
	w, wo := g.w, g.wo
	pool2Runs(g, asm, func(at, o, n, half, adv int) {
		_, _ = src[pool2Last(w, at, n, half, adv)], dst[o+n-1]
		var ap *float32
		if arg != nil {
			_ = arg[o+n-1]
			ap = &arg[o]
		}
		maxPool2AVX2(&src[at], &dst[o], ap, n, w, half, adv, at)
	}, func(oh, ow0 int) {
		r0 := src[2*oh*w : 2*oh*w+2*wo]
		r1 := src[(2*oh+1)*w : (2*oh+1)*w+2*wo]
		d := dst[oh*wo : (oh+1)*wo]
		for ow := ow0; ow < wo; ow++ {
			i := 2 * ow
			m, k := r0[i], 0
			if v := r0[i+1]; v > m || v != v {
				m, k = v, 1
			}
			if v := r1[i]; v > m || v != v {
				m, k = v, w
			}
			if v := r1[i+1]; v > m || v != v {
				m, k = v, w+1
			}
			d[ow] = m
			if arg != nil {
				arg[oh*wo+ow] = math.Float32frombits(uint32(2*oh*w + i + k))
			}
		}
	})
}

// maxPool2Grad is the backward pass of maxPool2 for one plane: it adds
// each output gradient gy[o] to gx at the index arg[o] of its maximum.
// If store, gx has unspecified contents and every element is written: as
// if it were zeroed first. asm allows the AVX2 kernel (see pool2Runs).
func maxPool2Grad(g *poolGeom, gy, arg, gx []float32, store, asm bool) {
	w, wo := g.w, g.wo
	if store {
		// The elements outside every window: a last odd row and column.
		clear(gx[2*g.ho*w:])
		for r := 0; r < 2*g.ho && 2*wo < w; r++ {
			clear(gx[r*w+2*wo : (r+1)*w])
		}
	}
	pool2Runs(g, asm, func(at, o, n, half, adv int) {
		_, _, _ = gx[pool2Last(w, at, n, half, adv)], gy[o+n-1], arg[o+n-1]
		maxPool2GradAVX2(&gx[at], &gy[o], &arg[o], n, w, half, adv, at, store)
	}, func(oh, ow0 int) {
		for ow := ow0; ow < wo; ow++ {
			o, at := oh*wo+ow, 2*oh*w+2*ow
			if store {
				gx[at], gx[at+1], gx[at+w], gx[at+w+1] = 0, 0, 0, 0
			}
			gx[math.Float32bits(arg[o])] += gy[o]
		}
	})
}

// AvgPool2d returns the mean over kernel×kernel windows of every plane of x
// (N, C, H, W), as torch.nn.functional.avg_pool2d does by default: floor
// rounding, zero padding (at most kernel/2 wide) that counts towards the
// divisor (count_include_pad), and a zero stride meaning kernel.
func AvgPool2d(x *Tensor, kernel, stride, padding int) *Tensor {
	g := poolGeometry("AvgPool2d", x, kernel, stride, padding)
	planes, hw, p := x.shape[0]*x.shape[1], g.h*g.w, g.cols
	c := contextOf("AvgPool2d", x)
	out := c.empty(x.shape[0], x.shape[1], g.ho, g.wo)
	// PyTorch's count_include_pad divisor is the window size clipped to the
	// padded input; with floor rounding and padding <= kernel/2 every window
	// lies inside the padded input, so it is always kernel².
	div := float32(kernel * kernel)
	parallel.For(planes, poolGrain(hw), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			src := x.Data[pl*hw : (pl+1)*hw]
			dst := out.Data[pl*p : (pl+1)*p]
			for oh := 0; oh < g.ho; oh++ {
				for ow := 0; ow < g.wo; ow++ {
					h0, h1, w0, w1 := g.window(oh, ow)
					var s float32
					for ih := h0; ih < h1; ih++ {
						for _, v := range src[ih*g.w+w0 : ih*g.w+w1] {
							s += v
						}
					}
					dst[oh*g.wo+ow] = s / div
				}
			}
		}
	})
	return c.record("AvgPool2d", out, func(gy []float32) {
		gx := x.grad()
		parallel.For(planes, poolGrain(hw), func(lo, hi int) {
			for pl := lo; pl < hi; pl++ {
				gxp := gx[pl*hw : (pl+1)*hw]
				gyp := gy[pl*p : (pl+1)*p]
				for oh := 0; oh < g.ho; oh++ {
					for ow := 0; ow < g.wo; ow++ {
						h0, h1, w0, w1 := g.window(oh, ow)
						d := gyp[oh*g.wo+ow] / div
						for ih := h0; ih < h1; ih++ {
							row := gxp[ih*g.w+w0 : ih*g.w+w1]
							for i := range row {
								row[i] += d
							}
						}
					}
				}
			}
		})
	}, x)
}

// GlobalAvgPool2d returns the mean of every H×W plane of x (N, C, H, W) as a
// tensor of shape (N, C, 1, 1), as torch.nn.functional.adaptive_avg_pool2d(x, 1)
// does.
func GlobalAvgPool2d(x *Tensor) *Tensor {
	if x.Rank() != 4 {
		panic(fmt.Sprintf("autograd.GlobalAvgPool2d: input must have rank 4 (N,C,H,W), got shape %v", x.shape))
	}
	hw := x.shape[2] * x.shape[3]
	if hw == 0 {
		panic(fmt.Sprintf("autograd.GlobalAvgPool2d: input %v has empty planes", x.shape))
	}
	planes := x.shape[0] * x.shape[1]
	c := contextOf("GlobalAvgPool2d", x)
	out := c.empty(x.shape[0], x.shape[1], 1, 1)
	parallel.For(planes, poolGrain(hw), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			s := 0.0
			for _, v := range x.Data[pl*hw : (pl+1)*hw] {
				s += float64(v)
			}
			out.Data[pl] = float32(s / float64(hw))
		}
	})
	return c.record("GlobalAvgPool2d", out, func(gy []float32) {
		gx := x.grad()
		parallel.For(planes, poolGrain(hw), func(lo, hi int) {
			for pl := lo; pl < hi; pl++ {
				d := gy[pl] / float32(hw)
				row := gx[pl*hw : (pl+1)*hw]
				for i := range row {
					row[i] += d
				}
			}
		})
	}, x)
}
