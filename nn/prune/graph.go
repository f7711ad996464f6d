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

// newGraph returns the graph of m without the analysis.
func newGraph(m nn.Module, height, width int) (*Graph, error) {
	g := &Graph{model: m}
	var err error
	switch m := m.(type) {
	case *models.ResNet:
		err = g.buildResNet(m, height, width)
	case *models.VGG:
		err = g.buildVGG(m, height, width)
	default:
		err = fmt.Errorf("prune.Analyze: %T is not a VGG or ResNet of package nn/models", m)
	}
	if err != nil {
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

func (g *Graph) buildResNet(r *models.ResNet, h, w int) error {
	in := g.input(h, w)
	stem, err := g.addConv("conv1", r.Conv1, "bn1", r.BN1, in)
	if err != nil {
		return err
	}
	x := g.newNode(nil, r.Conv1.Weight.Dim(0), stem.h, stem.w, true, term{kind: termConv, layer: stem})
	for s, stage := range r.Stages {
		for b, m := range stage.Layers {
			blk, ok := m.(*models.BasicBlock)
			if !ok {
				return fmt.Errorf("prune: layer%d.%d is a %T, not a BasicBlock", s+1, b, m)
			}
			p := fmt.Sprintf("layer%d.%d.", s+1, b)
			c1, err := g.addConv(p+"conv1", blk.Conv1, p+"bn1", blk.BN1, x)
			if err != nil {
				return err
			}
			mid := g.newNode(nil, blk.Conv1.Weight.Dim(0), c1.h, c1.w, true, term{kind: termConv, layer: c1})
			c2, err := g.addConv(p+"conv2", blk.Conv2, p+"bn2", blk.BN2, mid)
			if err != nil {
				return err
			}
			cout := blk.Conv2.Weight.Dim(0)
			main := term{kind: termConv, layer: c2}
			var sp *space
			var sc term
			switch v := blk.Shortcut.(type) {
			case nil:
				if x.c != cout || x.h != c2.h || x.w != c2.w {
					return fmt.Errorf("prune: %sshortcut is the identity but maps %d×%d×%d to %d×%d×%d", p, x.c, x.h, x.w, cout, c2.h, c2.w)
				}
				sp, sc = x.space, term{kind: termIdentity, src: x}
			case *models.PadShortcut:
				if v.In != x.c || v.Out != cout || (x.h+1)/2 != c2.h || (x.w+1)/2 != c2.w {
					return fmt.Errorf("prune: %sshortcut maps %d to %d channels at half size, the block %d×%d×%d to %d×%d×%d", p, v.In, v.Out, x.c, x.h, x.w, cout, c2.h, c2.w)
				}
				sc = term{kind: termPad, src: x, dst: v.Targets()}
			case *nn.Sequential:
				if len(v.Layers) != 2 {
					return fmt.Errorf("prune: %sshortcut is not a convolution and a batch norm", p)
				}
				conv, ok1 := v.Layers[0].(*nn.Conv2d)
				bn, ok2 := v.Layers[1].(*nn.BatchNorm2d)
				if !ok1 || !ok2 {
					return fmt.Errorf("prune: %sshortcut is not a convolution and a batch norm", p)
				}
				l, err := g.addConv(p+"shortcut.0", conv, p+"shortcut.1", bn, x)
				if err != nil {
					return err
				}
				if l.h != c2.h || l.w != c2.w || conv.Weight.Dim(0) != cout {
					return fmt.Errorf("prune: %sshortcut output does not match the block's", p)
				}
				sc = term{kind: termConv, layer: l}
			default:
				return fmt.Errorf("prune: %sshortcut is a %T", p, v)
			}
			x = g.newNode(sp, cout, c2.h, c2.w, true, main, sc)
		}
	}
	k := r.PoolKernel
	if k == 0 {
		k = x.w
	}
	return g.addLinear("linear", r.Linear, g.pool(x, k, k, 0))
}

// pool adds the pooling of x: an activation of the same space (max and
// average pooling keep a zero channel zero, padding included).
func (g *Graph) pool(x *node, kernel, stride, padding int) *node {
	size := func(s int) int { return (s+2*padding-kernel)/stride + 1 }
	return g.newNode(x.space, x.c, size(x.h), size(x.w), false, term{kind: termIdentity, src: x})
}

func (g *Graph) buildVGG(v *models.VGG, h, w int) error {
	x := g.input(h, w)
	ls := v.Features.Layers
	for i := 0; i < len(ls); i++ {
		switch m := ls[i].(type) {
		case *nn.Conv2d:
			var bn *nn.BatchNorm2d
			if i+2 < len(ls) {
				bn, _ = ls[i+1].(*nn.BatchNorm2d)
				if _, ok := ls[i+2].(nn.ReLU); !ok {
					bn = nil
				}
			}
			if bn == nil {
				return fmt.Errorf("prune: features.%d is not followed by BatchNorm2d and ReLU", i)
			}
			l, err := g.addConv(fmt.Sprintf("features.%d", i), m, fmt.Sprintf("features.%d", i+1), bn, x)
			if err != nil {
				return err
			}
			x = g.newNode(nil, m.Weight.Dim(0), l.h, l.w, true, term{kind: termConv, layer: l})
			i += 2
		case nn.MaxPool2d:
			x = g.pool(x, m.Kernel, m.Stride, m.Padding)
		case nn.AvgPool2d:
			x = g.pool(x, m.Kernel, m.Stride, m.Padding)
		default:
			return fmt.Errorf("prune: features.%d is a %T", i, m)
		}
	}
	return g.addLinear("classifier", v.Classifier, x)
}
