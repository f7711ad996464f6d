// Package autograd implements float32 tensors and define-by-run reverse-mode
// automatic differentiation for training neural networks on the CPU.
//
// Tensors are contiguous and row-major; image batches use NCHW order. Calling
// an op on tensors records how its output was computed whenever an input
// requires a gradient; calling Backward on a scalar result walks that record
// backwards and accumulates ∂loss/∂x into the Grad of every leaf tensor x that
// requires a gradient, as PyTorch's eager mode does.
//
//	w := autograd.RandN(rng, 10, 5).RequireGrad()
//	x := autograd.FromSlice(data, 32, 5)
//	loss := autograd.Mean(autograd.ReLU(autograd.MatMul(x, w, false, true)))
//	loss.Backward()
//	// w.Grad now holds ∂loss/∂w.
//
// Whether ops record the graph and where their results' storage comes from
// is decided by the Context the inputs are bound to, a value the caller
// owns; nothing is process-wide. A training step binds its batch to a
// context with an Arena that recycles buffers between steps, and
// evaluation binds its batch to a context with NoGrad set:
//
//	train := &autograd.Context{Arena: autograd.NewArena()}
//	for _, b := range batches {
//		train.Arena.Reset() // results of the previous step are dead now
//		opt.ZeroGrad()
//		x := autograd.FromSlice(b.X, b.N, 3, 32, 32).In(train)
//		loss := autograd.CrossEntropy(model.Forward(x), b.Labels)
//		loss.Backward()
//		opt.Step()
//	}
//
//	eval := &autograd.Context{NoGrad: true}
//	logits := model.Forward(autograd.FromSlice(img, 1, 3, 32, 32).In(eval))
//
// Goroutines that each use their own context (or none) may run ops at the
// same time, also on shared parameters as long as none of them changes
// those.
//
// Shape mismatches are programming errors: ops panic with a message that
// names the op and the shapes involved.
package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Tensor is a contiguous row-major float32 array that can take part in
// automatic differentiation.
type Tensor struct {
	// Data holds the elements in row-major order; len(Data) == Numel().
	Data []float32
	// Grad holds ∂loss/∂Data after Backward for tensors that require a
	// gradient; it is nil until a gradient first reaches the tensor.
	Grad []float32

	shape        []int
	requiresGrad bool
	node         *node    // the op that produced this tensor; nil for leaves
	ctx          *Context // the context ops on this tensor run in; nil for the default
}

// New returns a zero-filled tensor of the given shape from the heap, bound
// to no context. Context.New binds one to a context.
func New(shape ...int) *Tensor {
	return &Tensor{Data: make([]float32, numel("New", shape)), shape: cloneInts(shape)}
}

// FromSlice returns a tensor of the given shape that uses data as its
// storage (no copy). It panics if len(data) does not match the shape.
func FromSlice(data []float32, shape ...int) *Tensor {
	if n := numel("FromSlice", shape); n != len(data) {
		panic(fmt.Sprintf("autograd.FromSlice: shape %v needs %d elements, got %d", shape, n, len(data)))
	}
	return &Tensor{Data: data, shape: cloneInts(shape)}
}

// Full returns a tensor of the given shape with every element set to v.
func Full(v float32, shape ...int) *Tensor {
	t := New(shape...)
	for i := range t.Data {
		t.Data[i] = v
	}
	return t
}

// RandN returns a tensor of standard normal samples drawn from rng.
func RandN(rng *rand.Rand, shape ...int) *Tensor {
	t := New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64())
	}
	return t
}

// RandU returns a tensor of samples drawn uniformly from [lo, hi) by rng.
func RandU(rng *rand.Rand, lo, hi float64, shape ...int) *Tensor {
	t := New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(lo + (hi-lo)*rng.Float64())
	}
	return t
}

// Shape returns the tensor's dimensions. The caller must not modify it.
func (t *Tensor) Shape() []int { return t.shape }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return len(t.Data) }

// Item returns the single element of a one-element tensor.
func (t *Tensor) Item() float32 {
	if len(t.Data) != 1 {
		panic(fmt.Sprintf("autograd.Item: tensor of shape %v has %d elements, want 1", t.shape, len(t.Data)))
	}
	return t.Data[0]
}

// RequiresGrad reports whether gradients flow to this tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// RequireGrad marks a leaf tensor as requiring a gradient and returns it.
func (t *Tensor) RequireGrad() *Tensor {
	if t.node != nil {
		panic("autograd.RequireGrad: only leaf tensors can be marked; this tensor is an op result")
	}
	t.requiresGrad = true
	return t
}

// SetRequiresGrad sets whether gradients flow to this leaf tensor.
func (t *Tensor) SetRequiresGrad(b bool) {
	if t.node != nil {
		panic("autograd.SetRequiresGrad: only leaf tensors can be marked; this tensor is an op result")
	}
	t.requiresGrad = b
}

// IsLeaf reports whether the tensor was created directly rather than by a
// recorded op.
func (t *Tensor) IsLeaf() bool { return t.node == nil }

// ZeroGrad sets the accumulated gradient to zero (keeping its storage).
func (t *Tensor) ZeroGrad() {
	clear(t.Grad)
}

// Detach returns a tensor sharing t's data that is cut off from the graph.
// It stays bound to t's context, whose arena may own the data.
func (t *Tensor) Detach() *Tensor {
	return &Tensor{Data: t.Data, shape: t.shape, ctx: t.ctx}
}

// Clone returns a deep copy of t's data and shape, detached from the graph
// and bound to no context: the copy lives on the heap and stays valid after
// the arena of t's context is reset.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Data: append([]float32(nil), t.Data...), shape: cloneInts(t.shape)}
}

// String formats the tensor's shape and up to its first eight elements.
func (t *Tensor) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor%v[", t.shape)
	for i, v := range t.Data {
		if i == 8 {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%g", v)
	}
	b.WriteByte(']')
	return b.String()
}

// grad returns t.Grad, allocating it zero-filled on first use.
func (t *Tensor) grad() []float32 {
	if t.Grad == nil {
		t.Grad = t.newGrad(true)
	}
	return t.Grad
}

// gradTarget returns the buffer an op's backward pass puts the gradient for
// t into, and whether the op may store into it instead of adding. That is
// the case when t has no gradient yet: the buffer is new (an arena buffer
// with unspecified contents when t's context has an arena), so the op must
// then write every element.
func (t *Tensor) gradTarget() (g []float32, store bool) {
	if t.Grad != nil {
		return t.Grad, false
	}
	t.Grad = t.newGrad(false)
	return t.Grad, true
}

// newGrad returns a gradient buffer for t from the arena of t's context
// (zeroed if zero is set), or a fresh zeroed slice. Parameters are bound to
// no context, so their gradients live on the heap and outlive a step.
func (t *Tensor) newGrad(zero bool) []float32 {
	return t.ctx.alloc(len(t.Data), zero)
}

// numel returns the product of shape, panicking on negative sizes.
func numel(op string, shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("autograd.%s: negative dimension in shape %v", op, shape))
		}
		n *= d
	}
	return n
}

func cloneInts(s []int) []int { return append([]int(nil), s...) }

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// mustSameShape panics unless a and b have equal shapes.
func mustSameShape(op string, a, b *Tensor) {
	if !sameShape(a.shape, b.shape) {
		panic(fmt.Sprintf("autograd.%s: shape mismatch %v vs %v", op, a.shape, b.shape))
	}
}

// mustRank panics unless t has the given rank.
func mustRank(op, name string, t *Tensor, rank int) {
	if len(t.shape) != rank {
		panic(fmt.Sprintf("autograd.%s: %s must have rank %d, got shape %v", op, name, rank, t.shape))
	}
}

// AllClose reports whether a and b have the same shape and every pair of
// elements satisfies |a-b| <= atol + rtol·|b|.
func AllClose(a, b *Tensor, rtol, atol float64) bool {
	if !sameShape(a.shape, b.shape) {
		return false
	}
	for i := range a.Data {
		x, y := float64(a.Data[i]), float64(b.Data[i])
		if math.IsNaN(x) || math.IsNaN(y) || math.Abs(x-y) > atol+rtol*math.Abs(y) {
			return false
		}
	}
	return true
}
