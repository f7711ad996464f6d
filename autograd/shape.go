package autograd

import "fmt"

// Reshape returns a tensor with the same elements in a new shape. One
// dimension may be −1 and is then inferred. The result shares x's data.
func Reshape(x *Tensor, shape ...int) *Tensor {
	shape = cloneInts(shape)
	infer, known := -1, 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			panic(fmt.Sprintf("autograd.Reshape: invalid target shape %v for input %v", shape, x.shape))
		default:
			known *= d
		}
	}
	if infer >= 0 && known > 0 {
		shape[infer] = len(x.Data) / known
	}
	if infer >= 0 && known == 0 || numel("Reshape", shape) != len(x.Data) {
		panic(fmt.Sprintf("autograd.Reshape: cannot reshape %v (%d elements) to %v", x.shape, len(x.Data), shape))
	}
	out := &Tensor{Data: x.Data, shape: shape}
	return contextOf("Reshape", x).record("Reshape", out, func(g []float32) {
		gx := x.grad()
		forEach(len(gx), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gx[i] += g[i]
			}
		})
	}, x)
}

// Flatten reshapes x to (N, rest), keeping the first dimension.
func Flatten(x *Tensor) *Tensor {
	if len(x.shape) == 0 {
		panic("autograd.Flatten: needs rank >= 1, got a scalar")
	}
	return Reshape(x, x.shape[0], -1)
}
