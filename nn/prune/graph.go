// Package prune finds, zeroes and removes whole channels of the CIFAR
// networks of package nn/models: what structured sparsity buys.
//
// # Channel analysis
//
// Analyze describes a VGG or ResNet as a graph of activations. Each
// activation belongs to a channel space: the activations whose channel c
// is the same channel of the network, such as the residual stream of a
// ResNet stage, which the stem (or the stage's first block) and every
// identity-shortcut block write to and read from. A channel c of a space
// is removable when, for every activation of the space, either
//
//   - the activation's channel c is exactly zero in evaluation mode: every
//     convolution writing it has a zero filter c (or reads only channels
//     that are themselves exactly zero), its batch normalisation turns the
//     resulting constant into a value that the following ReLU (after the
//     residual sum, where there is one) maps to exactly 0, and the
//     shortcut (identity, option-A padding, option-B 1×1 convolution with
//     batch normalisation) contributes an exact constant too; or
//   - nothing reads it: every convolution reading it has a zero input slice
//     c in every output filter that is kept, the classifier has zero
//     columns for it, and an option-A shortcut carries it only into a
//     channel that is removed.
//
// So a residual-stream channel goes only when every branch that writes or
// reads it allows it. The analysis iterates to a fixed point (a removed
// channel can make the input slices that read it irrelevant) and is
// exact: the compacted network computes the same logits up to the
// rounding of the shorter sums.
//
// Count reports per layer and in total the channels, parameters and FLOPs
// (multiply-adds of convolutions and linear layers for one image, which is
// how the compacted network runs; batch normalisation folds into the
// convolutions and is not counted) that remain.
//
// # Magnitude pruning
//
// Filters is the one-shot baseline of Li et al. (Pruning Filters for
// Efficient ConvNets, 2017): in every channel space it zeroes the output
// filters with the smallest ℓ2 norm, with the γ and β of the batch
// normalisation after them so the channels are exactly dead, and returns a
// Mask whose Apply keeps them at zero during fine-tuning.
package prune

import (
	"cmp"
	"fmt"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// layer is a convolution with the batch normalisation after it, or (with
// conv nil) the classifier.
type layer struct {
	name   string // state-dict prefix of the convolution or linear layer
	conv   *nn.Conv2d
	bnName string
	bn     *nn.BatchNorm2d
	linear *nn.Linear
	in     *node // the activation it reads
	out    *node // the activation it contributes to (nil for the classifier)
	h, w   int   // spatial size of its output
}

// cin returns the number of input channels.
func (l *layer) cin() int {
	if l.conv != nil {
		return l.conv.Weight.Dim(1)
	}
	return l.in.c
}

// termKind says how a term contributes to an activation.
type termKind int

const (
	termConv     termKind = iota // batch norm of a convolution
	termIdentity                 // the source activation itself
	termPad                      // option-A shortcut: source channel i to channel dst[i]
)

// term is one summand of an activation.
type term struct {
	kind  termKind
	layer *layer // termConv
	src   *node  // termIdentity, termPad
	dst   []int  // termPad: output channel of each source channel
}

// node is an activation: relu(Σ terms), or the model input when it has no
// terms.
type node struct {
	space *space
	c     int // channels
	h, w  int
	terms []term
	relu  bool
	// readers are the convolutions and classifier that read the node;
	// carries are the terms (identity, padding) of other nodes that read
	// it without weights.
	readers []*layer
	carries []*carry

	// Results of the analysis.
	isConst []bool    // channel c is the same constant everywhere
	val     []float32 // that constant
}

// carry is a weightless read of a node: the term of node to.
type carry struct {
	to *node
	t  *term
}

// space is a set of activations that share their channels.
type space struct {
	id    int
	c     int
	nodes []*node
	input bool   // the model input: never removed
	keep  []bool // analysis result
}

// Graph is the channel structure of a model (see the package doc).
type Graph struct {
	model  nn.Module
	layers []*layer // convolutions in forward order, then the classifier
	nodes  []*node
	spaces []*space
}

// Analyze returns the channel graph of a VGG or ResNet of package
// nn/models for inputs of height × width pixels (32 × 32 for CIFAR-10),
// with the removable channels of its current weights worked out. The
// graph refers to the model's tensors: after the weights change, call
// Analyze again. It fails for other models.
func Analyze(m nn.Module, height, width int) (*Graph, error) {
	if height < 1 || width < 1 {
		return nil, fmt.Errorf("prune.Analyze: input size %d×%d must be positive", height, width)
	}
	g, err := newGraph(m, height, width)
	if err != nil {
		return nil, err
	}
	g.analyze()
	return g, nil
}

// newGraph returns the graph of m without the analysis: the channel
// structure of m's layer graph (models.NewGraph).
func newGraph(m nn.Module, height, width int) (*Graph, error) {
	lg, err := models.NewGraph(m, []int{3, height, width})
	if err != nil {
		return nil, fmt.Errorf("prune.Analyze: %T: %w", m, err)
	}
	g := &Graph{model: m}
	if err := g.build(lg); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *Graph) newSpace(c int) *space {
	s := &space{id: len(g.spaces), c: c}
	g.spaces = append(g.spaces, s)
	return s
}

// newNode adds an activation of space s (a new space when nil) made of
// terms.
func (g *Graph) newNode(s *space, c, h, w int, relu bool, terms ...term) *node {
	if s == nil {
		s = g.newSpace(c)
	}
	if s.c != c {
		panic(fmt.Sprintf("prune: activation of %d channels in a space of %d", c, s.c))
	}
	n := &node{space: s, c: c, h: h, w: w, relu: relu, terms: terms}
	s.nodes = append(s.nodes, n)
	g.nodes = append(g.nodes, n)
	for i := range n.terms {
		t := &n.terms[i]
		switch t.kind {
		case termConv:
			t.layer.out = n
		default:
			t.src.carries = append(t.src.carries, &carry{to: n, t: t})
		}
	}
	return n
}

// addConv adds a convolution and its batch norm reading in.
func (g *Graph) addConv(name string, conv *nn.Conv2d, bnName string, bn *nn.BatchNorm2d, in *node) (*layer, error) {
	if conv.Weight.Dim(1) != in.c {
		return nil, fmt.Errorf("prune: %s reads %d channels, its input has %d", name, conv.Weight.Dim(1), in.c)
	}
	if bn == nil || bn.Weight.Dim(0) != conv.Weight.Dim(0) {
		return nil, fmt.Errorf("prune: %s is not followed by a batch norm of its %d channels", name, conv.Weight.Dim(0))
	}
	k := conv.Weight.Dim(2)
	size := func(x int) int { return (x+2*conv.Padding-conv.Dilation*(k-1)-1)/conv.Stride + 1 }
	l := &layer{name: name, conv: conv, bnName: bnName, bn: bn, in: in, h: size(in.h), w: size(in.w)}
	if l.h < 1 || l.w < 1 {
		return nil, fmt.Errorf("prune: %s maps a %d×%d input to nothing", name, in.h, in.w)
	}
	in.readers = append(in.readers, l)
	g.layers = append(g.layers, l)
	return l, nil
}

// addLinear adds the classifier reading in (flattened).
func (g *Graph) addLinear(name string, lin *nn.Linear, in *node) error {
	if lin.Weight.Dim(1) != in.c*in.h*in.w {
		return fmt.Errorf("prune: %s reads %d features, its input has %d×%d×%d", name, lin.Weight.Dim(1), in.c, in.h, in.w)
	}
	l := &layer{name: name, linear: lin, in: in, h: 1, w: 1}
	in.readers = append(in.readers, l)
	g.layers = append(g.layers, l)
	return nil
}

func (g *Graph) input(h, w int) *node {
	n := g.newNode(nil, 3, h, w, false)
	n.space.input = true
	return n
}

// value is what a node of the layer graph computes: an activation n, or
// terms not yet summed (a batch normalisation, a shortcut's selection, a
// residual sum), which the ReLU after them makes an activation of space
// (nil: a new one) and the given size; flat marks the flattened
// activation n.
type value struct {
	n       *node
	flat    bool
	terms   []term
	space   *space
	c, h, w int
}

// build adds the activations and layers of the layer graph lg of a VGG or
// ResNet: every convolution followed by its batch normalisation, every
// activation a ReLU of a sum of such convolutions, identity and option-A
// shortcuts, poolings, and the classifier on the flattened last one.
func (g *Graph) build(lg *models.Graph) error {
	if lg.IDs || len(lg.Input) != 4 {
		return fmt.Errorf("prune.Analyze: %T is not a VGG or ResNet of package nn/models", g.model)
	}
	in := g.input(lg.Input[2], lg.Input[3])
	vals := make([]value, len(lg.Nodes))
	// act returns the activation node k reads, or an error.
	act := func(k int, name string) (*node, error) {
		if k == models.GraphInput {
			return in, nil
		}
		if v := vals[k]; v.n != nil && !v.flat {
			return v.n, nil
		}
		return nil, fmt.Errorf("prune: %s reads %s, which is not a ReLU's output or a pooling", name, lg.Nodes[k].Name)
	}
	for i := 0; i < len(lg.Nodes); i++ {
		ln := &lg.Nodes[i]
		switch ln.Op {
		case models.OpConv:
			x, err := act(ln.Inputs[0], ln.Name)
			if err != nil {
				return err
			}
			var bn *models.Node
			if i+1 < len(lg.Nodes) && lg.Nodes[i+1].Op == models.OpBatchNorm && lg.Nodes[i+1].Inputs[0] == i {
				bn = &lg.Nodes[i+1]
			}
			if bn == nil {
				return fmt.Errorf("prune: %s is not followed by a batch norm of its %d channels", ln.Name, ln.Conv.Weight.Dim(0))
			}
			l, err := g.addConv(ln.Name, ln.Conv, bn.Name, bn.Norm, x)
			if err != nil {
				return err
			}
			i++
			vals[i] = value{terms: []term{{kind: termConv, layer: l}}, c: ln.Conv.Weight.Dim(0), h: l.h, w: l.w}
		case models.OpReLU:
			v := vals[ln.Inputs[0]]
			if ln.Inputs[0] == models.GraphInput || v.terms == nil {
				return fmt.Errorf("prune: %s is not the ReLU of a batch normalisation or a residual sum", ln.Name)
			}
			vals[i] = value{n: g.newNode(v.space, v.c, v.h, v.w, true, v.terms...)}
		case models.OpAdd:
			var sum value
			for _, k := range ln.Inputs {
				v := value{}
				if k != models.GraphInput {
					v = vals[k]
				}
				if v.terms == nil {
					x, err := act(k, ln.Name)
					if err != nil {
						return err
					}
					if sum.space != nil {
						return fmt.Errorf("prune: %s adds two activations", ln.Name)
					}
					v = value{terms: []term{{kind: termIdentity, src: x}}, space: x.space, c: x.c, h: x.h, w: x.w}
				}
				sum.terms = append(sum.terms, v.terms...)
				sum.space = cmp.Or(sum.space, v.space)
				sum.c, sum.h, sum.w = v.c, v.h, v.w
			}
			vals[i] = sum
		case models.OpSelect:
			x, err := act(ln.Inputs[0], ln.Name)
			if err != nil {
				return err
			}
			vals[i] = value{terms: []term{{kind: termPad, src: x, dst: ln.Targets}}, c: ln.Shape[1], h: ln.Shape[2], w: ln.Shape[3]}
		case models.OpMaxPool, models.OpAvgPool:
			x, err := act(ln.Inputs[0], ln.Name)
			if err != nil {
				return err
			}
			vals[i] = value{n: g.pool(x, ln.Kernel, ln.Stride, ln.Padding)}
		case models.OpFlatten:
			x, err := act(ln.Inputs[0], ln.Name)
			if err != nil {
				return err
			}
			vals[i] = value{n: x, flat: true}
		case models.OpLinear:
			v := vals[ln.Inputs[0]]
			if ln.Inputs[0] == models.GraphInput || !v.flat || i != len(lg.Nodes)-1 {
				return fmt.Errorf("prune: %s is not the classifier on the flattened last activation", ln.Name)
			}
			return g.addLinear(ln.Name, ln.Linear, v.n)
		default:
			return fmt.Errorf("prune: %s: a %v node, which channel analysis does not know", ln.Name, ln.Op)
		}
	}
	return fmt.Errorf("prune.Analyze: %T does not end in a linear classifier", g.model)
}

// pool adds the pooling of x: an activation of the same space (max and
// average pooling keep a zero channel zero, padding included).
func (g *Graph) pool(x *node, kernel, stride, padding int) *node {
	size := func(s int) int { return (s+2*padding-kernel)/stride + 1 }
	return g.newNode(x.space, x.c, size(x.h), size(x.w), false, term{kind: termIdentity, src: x})
}
