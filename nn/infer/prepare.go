package infer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/conv"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// EagerMinZeros is the zero fraction of a weight from which Prepare gives
// its layer the sparse path. It is measured on ResNet-20 and VGG-16
// layers with one thread against the eager dense path of package nn
// (docs/benchmarks.md, "Sparse inference"): below it the sparse product is
// slower than the dense GEMM on most layers, above it faster on most. The
// compiled plans of New, whose dense convolutions are faster, use
// DefaultMinZeros.
const EagerMinZeros = 0.7

// LayerReport describes one convolution or linear layer of a prepared
// network.
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

// Report says which layers of a prepared network run sparse.
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
	threshold := fmt.Sprintf("threshold %.0f%% zeros", 100*r.MinZeros)
	if r.MinZeros > 1 {
		threshold = "every layer dense"
	}
	fmt.Fprintf(&b, "%d of %d layers sparse (%s; %.1f%% of the weights are zero)\n",
		len(r.SparseLayers()), len(r.Layers), threshold, 100*r.ZeroRatio())
	for _, l := range r.Layers {
		path := "dense"
		if l.Sparse {
			path = "sparse"
		}
		fmt.Fprintf(&b, "  %-24s %-6s %-18s %5.1f%% zeros  %s\n", l.Name, l.Kind, fmt.Sprint(l.Shape), 100*l.ZeroFraction(), path)
	}
	return b.String()
}

// report counts the zeros of every Conv2d and Linear layer of net (found
// through nn.Container, depth first) and marks sparse those with at least
// o.MinZeros exact zeros (none with o.Dense, none when sparse is false).
func report(net nn.Module, o prepOptions, sparse bool) Report {
	r := Report{MinZeros: o.MinZeros}
	walkModules(net, "", func(name string, mod nn.Module) {
		var w *autograd.Tensor
		var kind string
		switch l := mod.(type) {
		case *nn.Conv2d:
			w, kind = l.Weight, "Conv2d"
		case *nn.Linear:
			w, kind = l.Weight, "Linear"
		default:
			return
		}
		lr := LayerReport{Name: name, Kind: kind, Shape: append([]int(nil), w.Shape()...), Numel: w.Numel()}
		for _, v := range w.Data {
			if v == 0 {
				lr.Zeros++
			}
		}
		lr.Sparse = sparse && !o.Dense && lr.Numel > 0 && lr.ZeroFraction() >= r.MinZeros
		r.Layers = append(r.Layers, lr)
	})
	return r
}

// walkModules calls f for m and every module below it in depth-first
// order with its dotted path ("" for m).
func walkModules(m nn.Module, name string, f func(name string, m nn.Module)) {
	f(name, m)
	c, ok := m.(nn.Container)
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

// Prepare returns a module that computes net in evaluation mode as its
// Forward does, but with every convolution and linear layer whose weight
// has at least EagerMinZeros exact zeros (MinZeros and Dense change this)
// multiplied by a sparse copy of that weight (conv.SparseWeight), and
// the report of which layers do. It is for code that runs a network
// through Forward, as cmd/cifar's -eval-only does; New compiles the
// network instead. The copies are made now: net's weights must not change
// while the result is used, and net itself is left as it is (its layers
// hold no inference state). A network whose layer graph
// (models.NewGraph) cannot be made runs as net.Forward, with no sparse
// layer. The result records a graph like net.Forward when its input or a
// parameter requires a gradient, and then computes densely; it is safe
// for concurrent use.
func Prepare(net nn.Module, opts ...Option) (nn.Module, Report) {
	o := options{prep: prepOptions{MinZeros: EagerMinZeros}}
	for _, opt := range opts {
		opt(&o)
	}
	return prepare(net, o.prep)
}

// prepare is Prepare with the options o.
func prepare(net nn.Module, o prepOptions) (*preparedNet, Report) {
	g, err := models.NewGraph(net, []int{inputShape.c, inputShape.h, inputShape.w})
	p := &preparedNet{Module: net}
	rep := report(net, o, err == nil)
	if err != nil {
		return p, rep
	}
	sparse := map[string]bool{}
	for _, l := range rep.Layers {
		sparse[l.Name] = l.Sparse
	}
	p.g = g
	p.sparse = make([]*conv.SparseWeight, len(g.Nodes))
	p.selection = make([]*autograd.Tensor, len(g.Nodes))
	for i, n := range g.Nodes {
		switch {
		case n.Op == models.OpConv && sparse[n.Name]:
			p.sparse[i] = conv.NewSparseWeight(n.Conv.Weight.Data, n.Conv.Weight.Shape())
		case n.Op == models.OpLinear && sparse[n.Name]:
			p.sparse[i] = conv.NewSparseWeight(n.Linear.Weight.Data, n.Linear.Weight.Shape())
		case n.Op == models.OpSelect:
			p.selection[i] = selectionConv(n.Targets, n.Shape[1]).Weight
		}
	}
	return p, rep
}

// preparedNet is a network run node by node through its layer graph, its
// sparse layers multiplied by their sparse weights.
type preparedNet struct {
	nn.Module                      // the network: Params, Buffers, SetTraining and, without g, Forward
	g         *models.Graph        // its graph, nil: run Module.Forward
	sparse    []*conv.SparseWeight // per node of g: the sparse weight of a sparse layer
	selection []*autograd.Tensor   // per node of g: the 0/1 weight of an option-A shortcut
}

// Forward computes the network on x, as the network's Forward computes it
// in evaluation mode, each op of package autograd the same.
func (p *preparedNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	if p.g == nil {
		return p.Module.Forward(x)
	}
	vals := make([]*autograd.Tensor, len(p.g.Nodes))
	for i := range p.g.Nodes {
		n := &p.g.Nodes[i]
		in := x
		if n.Inputs[0] != models.GraphInput {
			in = vals[n.Inputs[0]]
		}
		var y *autograd.Tensor
		switch n.Op {
		case models.OpConv:
			c := n.Conv
			if s := p.sparse[i]; s != nil && !autograd.Records(in, c.Weight, c.Bias) {
				y = conv2dSparse(in, c, s)
			} else {
				y = c.Forward(in)
			}
		case models.OpLinear:
			l := n.Linear
			if s := p.sparse[i]; s != nil && !autograd.Records(in, l.Weight, l.Bias) {
				y = linearSparse(in, l, s)
			} else {
				y = l.Forward(in)
			}
		case models.OpBatchNorm:
			y = n.Norm.Forward(in)
		case models.OpReLU:
			y = autograd.ReLU(in)
		case models.OpAdd:
			y = autograd.Add(in, vals[n.Inputs[1]])
		case models.OpMaxPool:
			y = autograd.MaxPool2d(in, n.Kernel, n.Stride, n.Padding)
		case models.OpAvgPool:
			y = autograd.AvgPool2d(in, n.Kernel, n.Stride, n.Padding)
		case models.OpGlobalAvgPool:
			y = autograd.GlobalAvgPool2d(in)
		case models.OpSelect:
			y = autograd.Conv2d(in, p.selection[i], nil, 2, 0, 1)
		case models.OpFlatten:
			y = autograd.Flatten(in)
		default:
			// NewGraph of an image network makes no other node.
			panic(fmt.Sprintf("infer: %s: a %v node in an image network", n.Name, n.Op))
		}
		vals[i] = y
	}
	return vals[len(vals)-1]
}

// convConfig returns the stride, padding and dilation of c.
func convConfig(c *nn.Conv2d) conv.Config {
	return conv.Config{
		Stride:   [2]int{c.Stride, c.Stride},
		Padding:  [2]int{c.Padding, c.Padding},
		Dilation: [2]int{c.Dilation, c.Dilation},
	}
}

// conv2dSparse returns what c.Forward(x) returns in evaluation mode,
// computed with s, the sparse form of c's weight (conv.ForwardSparse),
// and bound to x's context; it records no graph, and the caller makes
// sure that none is wanted (autograd.Records). It panics, naming the
// shapes, if x is no batch of c's images or s was made for another shape.
func conv2dSparse(x *autograd.Tensor, c *nn.Conv2d, s *conv.SparseWeight) *autograd.Tensor {
	w := c.Weight
	if !slices.Equal(s.Shape(), w.Shape()) || x.Rank() != 4 || x.Dim(1) != w.Dim(1) {
		panic(fmt.Sprintf("infer: sparse convolution of input %v with weight %v (sparse weight of shape %v)", x.Shape(), w.Shape(), s.Shape()))
	}
	g, err := conv.NewGeom(x.Dim(1), x.Dim(2), x.Dim(3), w.Dim(2), w.Dim(3), convConfig(c))
	if err != nil {
		panic(fmt.Sprintf("infer: sparse convolution: %v (input %v, weight %v)", err, x.Shape(), w.Shape()))
	}
	ho, wo := g.Out()
	out := x.Context().New(x.Dim(0), w.Dim(0), ho, wo)
	conv.ForwardSparse(g, s, x.Dim(0), x.Data, tensorData(c.Bias), out.Data)
	return out
}

// linearSparse returns what l.Forward(x) returns, computed with s, the
// sparse form of l's weight (conv.SparseWeight.Linear), and bound to x's
// context; it records no graph, and the caller makes sure that none is
// wanted (autograd.Records). It panics, naming the shapes, if x is no
// batch of l's inputs or s was made for another shape.
func linearSparse(x *autograd.Tensor, l *nn.Linear, s *conv.SparseWeight) *autograd.Tensor {
	w := l.Weight
	if !slices.Equal(s.Shape(), w.Shape()) || x.Rank() != 2 || x.Dim(1) != w.Dim(1) {
		panic(fmt.Sprintf("infer: sparse linear layer of input %v with weight %v (sparse weight of shape %v)", x.Shape(), w.Shape(), s.Shape()))
	}
	out := x.Context().New(x.Dim(0), w.Dim(0))
	s.Linear(x.Dim(0), x.Data, tensorData(l.Bias), out.Data)
	return out
}

// tensorData returns t.Data, or nil for a nil t.
func tensorData(t *autograd.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Data
}
