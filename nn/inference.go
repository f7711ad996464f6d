package nn

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/proxgen/proxgen/autograd"
)

// DefaultMinZeros is the zero fraction of a weight from which
// PrepareInference gives its layer the sparse path. It is measured on
// ResNet-20 and VGG-16 layers with one thread (docs/benchmarks.md, "Sparse
// inference"): below it the sparse product is slower than the dense GEMM
// on most layers, above it faster on most.
const DefaultMinZeros = 0.7

// InferenceOptions controls PrepareInferenceWith.
type InferenceOptions struct {
	// MinZeros is the fraction of exact zeros a weight needs for its
	// layer to run sparse; 0 means DefaultMinZeros. A value above 1 keeps
	// every layer dense.
	MinZeros float64
	// Dense keeps every layer on the dense path and drops the sparse
	// weights of an earlier preparation.
	Dense bool
}

// LayerReport describes one convolution or linear layer seen by
// PrepareInference.
type LayerReport struct {
	// Name is the layer's dotted path, as in its parameters' names
	// ("layer1.0.conv1").
	Name string
	// Kind is "Conv2d" or "Linear".
	Kind string
	// Shape is the weight's shape.
	Shape []int
	// Zeros and Numel count the weight's exact zeros and elements.
	Zeros, Numel int
	// Sparse reports whether the layer runs the sparse path.
	Sparse bool
}

// ZeroFraction returns Zeros/Numel.
func (l LayerReport) ZeroFraction() float64 {
	if l.Numel == 0 {
		return 0
	}
	return float64(l.Zeros) / float64(l.Numel)
}

// Report says which layers PrepareInference made sparse.
type Report struct {
	// MinZeros is the threshold that was applied.
	MinZeros float64
	// Layers lists every convolution and linear layer in depth-first
	// order.
	Layers []LayerReport
}

// SparseLayers returns the names of the layers that run sparse.
func (r Report) SparseLayers() []string {
	var out []string
	for _, l := range r.Layers {
		if l.Sparse {
			out = append(out, l.Name)
		}
	}
	return out
}

// ZeroRatio returns the fraction of exact zeros over all convolution and
// linear weights.
func (r Report) ZeroRatio() float64 {
	z, n := 0, 0
	for _, l := range r.Layers {
		z += l.Zeros
		n += l.Numel
	}
	if n == 0 {
		return 0
	}
	return float64(z) / float64(n)
}

// String lists the layers, one per line, with their zero fractions and
// paths.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d layers sparse (threshold %.0f%% zeros; %.1f%% of the weights are zero)\n",
		len(r.SparseLayers()), len(r.Layers), 100*r.MinZeros, 100*r.ZeroRatio())
	for _, l := range r.Layers {
		path := "dense"
		if l.Sparse {
			path = "sparse"
		}
		fmt.Fprintf(&b, "  %-24s %-6s %-18s %5.1f%% zeros  %s\n", l.Name, l.Kind, fmt.Sprint(l.Shape), 100*l.ZeroFraction(), path)
	}
	return b.String()
}

// PrepareInference prepares m for fast inference with the default options:
// see PrepareInferenceWith.
func PrepareInference(m Module) Report {
	return PrepareInferenceWith(m, InferenceOptions{})
}

// PrepareInferenceWith walks m and its sub-modules (through Container)
// and gives every Conv2d and Linear layer whose weight has at least
// o.MinZeros exact zeros a sparse copy of that weight
// (autograd.SparseWeight); the other layers drop any sparse copy of an
// earlier call. It returns which layers run sparse.
//
// A prepared layer uses its sparse copy in Forward whenever no graph is
// recorded (autograd.Records is false: the input is bound to an
// autograd.Context with NoGrad, or no input or parameter requires a
// gradient); with a graph it computes
// densely as before, so training is unchanged. The copy is a snapshot of
// the weight: a Forward that records a graph (a training step) drops it,
// so that updated weights are never multiplied by stale ones, but weights
// changed without such a Forward — loaded from a checkpoint, edited in
// place — need PrepareInference again (or InferenceOptions.Dense to go
// back to dense). Preparing is not safe concurrently with Forward on the
// same model; running prepared layers on many goroutines is.
func PrepareInferenceWith(m Module, o InferenceOptions) Report {
	r := Report{MinZeros: o.MinZeros}
	if r.MinZeros == 0 {
		r.MinZeros = DefaultMinZeros
	}
	walkModules(m, "", func(name string, mod Module) {
		var (
			w    *autograd.Tensor
			slot *atomic.Pointer[autograd.SparseWeight]
			kind string
		)
		switch l := mod.(type) {
		case *Conv2d:
			w, slot, kind = l.Weight, &l.sparse, "Conv2d"
		case *Linear:
			w, slot, kind = l.Weight, &l.sparse, "Linear"
		default:
			return
		}
		lr := LayerReport{Name: name, Kind: kind, Shape: append([]int(nil), w.Shape()...), Numel: w.Numel()}
		for _, v := range w.Data {
			if v == 0 {
				lr.Zeros++
			}
		}
		lr.Sparse = !o.Dense && lr.Numel > 0 && lr.ZeroFraction() >= r.MinZeros
		if lr.Sparse {
			slot.Store(autograd.NewSparseWeight(w))
		} else {
			slot.Store(nil)
		}
		r.Layers = append(r.Layers, lr)
	})
	return r
}

// walkModules calls f for m and every module below it in depth-first
// order with its dotted path ("" for m).
func walkModules(m Module, name string, f func(name string, m Module)) {
	f(name, m)
	c, ok := m.(Container)
	if !ok {
		return
	}
	for _, ch := range c.Children() {
		path := ch.Name
		if name != "" {
			path = name + "." + ch.Name
		}
		walkModules(ch.Module, path, f)
	}
}

// prepared returns the sparse weight of a prepared layer for a Forward on
// inputs, or nil when the layer must compute densely: it has none, or the
// call records a graph, in which case the sparse weight is dropped because
// the weights are about to be trained.
func prepared(slot *atomic.Pointer[autograd.SparseWeight], inputs ...*autograd.Tensor) *autograd.SparseWeight {
	s := slot.Load()
	if s != nil && autograd.Records(inputs...) {
		slot.Store(nil)
		return nil
	}
	return s
}
