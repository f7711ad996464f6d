package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd/internal/kernels"
	"github.com/proxgen/proxgen/internal/parallel"
)

// elementGrain is the chunk size of element-wise loops. Element-wise ops
// write disjoint outputs, so the split never affects results.
const elementGrain = 1 << 15

// forEach runs body over [0,n) in parallel chunks.
func forEach(n int, body func(lo, hi int)) {
	parallel.For(n, elementGrain, body)
}

// broadcast describes how two shapes combine under NumPy broadcasting.
type broadcast struct {
	out              []int
	aStride, bStride []int // strides into a and b per output dim (0 where broadcast)
}

// broadcastShapes returns the broadcast of a and b or panics naming op.
func broadcastShapes(op string, a, b []int) broadcast {
	n := max(len(a), len(b))
	bc := broadcast{out: make([]int, n), aStride: make([]int, n), bStride: make([]int, n)}
	sa, sb := 1, 1
	for i := n - 1; i >= 0; i-- {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			bc.out[i] = da
		case da == 1:
			bc.out[i] = db
		case db == 1:
			bc.out[i] = da
		default:
			panic(fmt.Sprintf("autograd.%s: shapes %v and %v cannot be broadcast", op, a, b))
		}
		if da != 1 || bc.out[i] == 1 {
			bc.aStride[i] = sa
		}
		if db != 1 || bc.out[i] == 1 {
			bc.bStride[i] = sb
		}
		sa *= da
		sb *= db
	}
	return bc
}

// offsets calls f(i, ia, ib) for every output index i in row-major order
// with the matching offsets into a and b.
func (bc broadcast) offsets(f func(i, ia, ib int)) {
	n := numel("broadcast", bc.out)
	idx := make([]int, len(bc.out))
	ia, ib := 0, 0
	for i := 0; i < n; i++ {
		f(i, ia, ib)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			ia += bc.aStride[d]
			ib += bc.bStride[d]
			if idx[d] < bc.out[d] {
				break
			}
			ia -= bc.aStride[d] * idx[d]
			ib -= bc.bStride[d] * idx[d]
			idx[d] = 0
		}
	}
}

// binaryKind selects the arithmetic of binary.
type binaryKind int

const (
	kindAdd binaryKind = iota
	kindSub
	kindMul
)

// apply returns x ∘ y.
func (k binaryKind) apply(x, y float32) float32 {
	switch k {
	case kindAdd:
		return x + y
	case kindSub:
		return x - y
	}
	return x * y
}

// partials returns ∂(x ∘ y)/∂x and ∂(x ∘ y)/∂y.
func (k binaryKind) partials(x, y float32) (float32, float32) {
	switch k {
	case kindAdd:
		return 1, 1
	case kindSub:
		return 1, -1
	}
	return y, x
}

// binary implements an element-wise op of two broadcastable tensors. Equal
// shapes take tight loops; other shapes go through broadcast offsets.
func binary(op string, kind binaryKind, a, b *Tensor) *Tensor {
	c := contextOf(op, a, b)
	if sameShape(a.shape, b.shape) {
		out := c.empty(a.shape...)
		forEach(len(out.Data), func(lo, hi int) {
			o, x, y := out.Data[lo:hi], a.Data[lo:hi], b.Data[lo:hi]
			switch kind {
			case kindAdd:
				for i := range o {
					o[i] = x[i] + y[i]
				}
			case kindSub:
				for i := range o {
					o[i] = x[i] - y[i]
				}
			case kindMul:
				for i := range o {
					o[i] = x[i] * y[i]
				}
			}
		})
		return c.record(op, out, func(g []float32) {
			var ga, gb []float32
			if a.requiresGrad {
				ga = a.grad()
			}
			if b.requiresGrad {
				gb = b.grad()
			}
			forEach(len(g), func(lo, hi int) {
				gs := g[lo:hi]
				switch {
				case kind == kindMul:
					if ga != nil {
						mulAddTo(ga[lo:hi], gs, b.Data[lo:hi])
					}
					if gb != nil {
						mulAddTo(gb[lo:hi], gs, a.Data[lo:hi])
					}
				default:
					if ga != nil {
						addTo(ga[lo:hi], gs)
					}
					if gb != nil && kind == kindSub {
						subFrom(gb[lo:hi], gs)
					} else if gb != nil {
						addTo(gb[lo:hi], gs)
					}
				}
			})
		}, a, b)
	}
	bc := broadcastShapes(op, a.shape, b.shape)
	out := c.empty(bc.out...)
	bc.offsets(func(i, ia, ib int) { out.Data[i] = kind.apply(a.Data[ia], b.Data[ib]) })
	return c.record(op, out, func(g []float32) {
		var ga, gb []float32
		if a.requiresGrad {
			ga = a.grad()
		}
		if b.requiresGrad {
			gb = b.grad()
		}
		// Serial accumulation keeps the reduction order fixed.
		bc.offsets(func(i, ia, ib int) {
			da, db := kind.partials(a.Data[ia], b.Data[ib])
			if ga != nil {
				ga[ia] += g[i] * da
			}
			if gb != nil {
				gb[ib] += g[i] * db
			}
		})
	}, a, b)
}

// addTo sets dst += src.
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// subFrom sets dst −= src.
func subFrom(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] -= src[i]
	}
}

// mulAddTo sets dst += x ⊙ y.
func mulAddTo(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] += x[i] * y[i]
	}
}

// Add returns a + b with NumPy broadcasting.
func Add(a, b *Tensor) *Tensor { return binary("Add", kindAdd, a, b) }

// Sub returns a − b with NumPy broadcasting.
func Sub(a, b *Tensor) *Tensor { return binary("Sub", kindSub, a, b) }

// Mul returns the element-wise product a ⊙ b with NumPy broadcasting.
func Mul(a, b *Tensor) *Tensor { return binary("Mul", kindMul, a, b) }

// unary implements an element-wise op y = f(x) whose derivative deriv is
// expressed through the input x and the output y.
func unary(op string, x *Tensor, f func(float32) float32, deriv func(x, y float32) float32) *Tensor {
	c := contextOf(op, x)
	out := c.empty(x.shape...)
	forEach(len(out.Data), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out.Data[i] = f(x.Data[i])
		}
	})
	return c.record(op, out, func(g []float32) {
		gx := x.grad()
		forEach(len(g), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gx[i] += g[i] * deriv(x.Data[i], out.Data[i])
			}
		})
	}, x)
}

// Scale returns s·x.
func Scale(x *Tensor, s float32) *Tensor {
	return unary("Scale", x, func(v float32) float32 { return s * v }, func(_, _ float32) float32 { return s })
}

// AddScalar returns x + s.
func AddScalar(x *Tensor, s float32) *Tensor {
	return unary("AddScalar", x, func(v float32) float32 { return v + s }, func(_, _ float32) float32 { return 1 })
}

// ReLU returns max(x, 0) element-wise; its gradient at 0 is 0, as in PyTorch.
func ReLU(x *Tensor) *Tensor {
	c := contextOf("ReLU", x)
	out := c.empty(x.shape...)
	forEach(len(out.Data), func(lo, hi int) {
		kernels.ReLUForward(out.Data[lo:hi], x.Data[lo:hi])
	})
	return c.record("ReLU", out, func(g []float32) {
		gx, store := x.gradTarget()
		forEach(len(g), func(lo, hi int) {
			kernels.MaskedGrad(gx[lo:hi], g[lo:hi], out.Data[lo:hi], store)
		})
	}, x)
}

// Sigmoid returns 1/(1+e^−x) element-wise.
func Sigmoid(x *Tensor) *Tensor {
	return unary("Sigmoid", x, sigmoid, func(_, y float32) float32 { return y * (1 - y) })
}

// Tanh returns tanh(x) element-wise.
func Tanh(x *Tensor) *Tensor {
	return unary("Tanh", x, tanh, func(_, y float32) float32 { return 1 - y*y })
}

// sigmoid is the logistic function, stable for large |v|.
func sigmoid(v float32) float32 {
	if v >= 0 {
		return float32(1 / (1 + math.Exp(-float64(v))))
	}
	e := math.Exp(float64(v))
	return float32(e / (1 + e))
}

func tanh(v float32) float32 { return float32(math.Tanh(float64(v))) }

// addInto adds src into dst element-wise.
func addInto(dst, src []float32) {
	forEach(len(src), func(lo, hi int) {
		d := dst[lo:hi]
		for i, v := range src[lo:hi] {
			d[i] += v
		}
	})
}
