package infer

import (
	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// This file reads the layer graph of a network (models.NewGraph) into the
// two shapes the compiled plans run: a ResNet (a stem convolution,
// residual blocks, average pooling, classifier) and a VGG (convolutions
// and poolings, classifier). Any network whose graph has one of these
// shapes is compiled, whatever its type.

// convLayer is a convolution of the graph with the batch normalisation
// folded into it and whether a ReLU follows (after the residual sum in a
// block's second convolution).
type convLayer struct {
	name string          // the convolution's state_dict prefix: its layer's name
	conv *nn.Conv2d      // the convolution
	bn   *nn.BatchNorm2d // its batch normalisation, nil: none
	relu bool
	// selection: option A's shortcut (selectionConv), no layer of the
	// network.
	selection bool
}

// resnetNet is a network of the ResNet shape.
type resnetNet struct {
	stem   convLayer
	blocks []resBlock
	pool   int // the window and stride of the average pooling
	linear *nn.Linear
	// linearName is the classifier's name (its layer's, as in the
	// report).
	linearName string
}

// resBlock is a residual block: out = relu(conv2(conv1(x)) + shortcut(x)),
// the shortcut nil for the identity, an option-A selection as a 1×1
// convolution with stride 2 (selectionConv).
type resBlock struct {
	conv1, conv2 convLayer
	shortcut     *convLayer
}

// vggNet is a network of the VGG shape.
type vggNet struct {
	layers         []vggLayer
	classifier     *nn.Linear
	classifierName string
}

// vggLayer is a convolution followed by a ReLU or, when conv is nil, a
// pooling layer (pool, nn.MaxPool2d or nn.AvgPool2d).
type vggLayer struct {
	conv           *convLayer
	pool           nn.Module
	max            bool // pool is a max pooling
	k, stride, pad int  // pool's window
}

// network is the graph of net for one input image read into the shape of
// a plan: r or v, or neither (nil, nil) when the graph has neither shape.
func network(net nn.Module) (r *resnetNet, v *vggNet) {
	g, err := models.NewGraph(net, []int{inputShape.c, inputShape.h, inputShape.w})
	if err != nil {
		return nil, nil
	}
	if r, ok := (&graphReader{g: g}).resnet(); ok {
		return r, nil
	}
	if v, ok := (&graphReader{g: g}).vgg(); ok {
		return nil, v
	}
	return nil, nil
}

// graphReader reads the nodes of g in order.
type graphReader struct {
	g *models.Graph
	i int // the next node
}

// next returns the next node if it has operation op and reads exactly
// ins, and moves past it; otherwise it returns nil.
func (r *graphReader) next(op models.Op, ins ...int) *models.Node {
	if r.i >= len(r.g.Nodes) {
		return nil
	}
	n := &r.g.Nodes[r.i]
	if n.Op != op || len(n.Inputs) != len(ins) {
		return nil
	}
	for k, in := range ins {
		if n.Inputs[k] != in {
			return nil
		}
	}
	r.i++
	return n
}

// last returns the index of the node read last.
func (r *graphReader) last() int { return r.i - 1 }

// done reports whether every node has been read.
func (r *graphReader) done() bool { return r.i == len(r.g.Nodes) }

// conv reads a convolution of x, its batch normalisation if one follows
// and a ReLU if one follows.
func (r *graphReader) conv(x int) (convLayer, bool) {
	c := r.next(models.OpConv, x)
	if c == nil {
		return convLayer{}, false
	}
	l := convLayer{name: c.Name, conv: c.Conv}
	if bn := r.next(models.OpBatchNorm, r.last()); bn != nil {
		l.bn = bn.Norm
	}
	l.relu = r.next(models.OpReLU, r.last()) != nil
	return l, true
}

// head reads the average pooling (when pool), the flattening and the
// classifier of x, the last nodes; it returns the classifier's node and
// the pooling window (0 without pooling).
func (r *graphReader) head(x int, pool bool) (*models.Node, int, bool) {
	k := 0
	if pool {
		p := r.next(models.OpAvgPool, x)
		if p == nil || p.Stride != p.Kernel || p.Padding != 0 {
			return nil, 0, false
		}
		k, x = p.Kernel, r.last()
	}
	if r.next(models.OpFlatten, x) == nil {
		return nil, 0, false
	}
	l := r.next(models.OpLinear, r.last())
	if l == nil || !r.done() {
		return nil, 0, false
	}
	return l, k, true
}

// resnet reads a ResNet: a convolution with ReLU, residual blocks, and
// the head with average pooling.
func (r *graphReader) resnet() (*resnetNet, bool) {
	stem, ok := r.conv(models.GraphInput)
	if !ok || !stem.relu {
		return nil, false
	}
	net := &resnetNet{stem: stem}
	x := r.last()
	for r.i < len(r.g.Nodes) && r.g.Nodes[r.i].Op == models.OpConv {
		var b resBlock
		if b.conv1, ok = r.conv(x); !ok || !b.conv1.relu {
			return nil, false
		}
		if b.conv2, ok = r.conv(r.last()); !ok || b.conv2.relu {
			return nil, false
		}
		main, sc := r.last(), x
		if s := r.next(models.OpSelect, x); s != nil {
			b.shortcut = &convLayer{name: s.Name, conv: selectionConv(s.Targets, s.Shape[1]), selection: true}
			sc = r.last()
		} else if r.i < len(r.g.Nodes) && r.g.Nodes[r.i].Op == models.OpConv {
			l, ok := r.conv(x)
			if !ok || l.relu {
				return nil, false
			}
			b.shortcut, sc = &l, r.last()
		}
		if r.next(models.OpAdd, main, sc) == nil {
			return nil, false
		}
		if r.next(models.OpReLU, r.last()) == nil {
			return nil, false
		}
		b.conv2.relu = true
		net.blocks = append(net.blocks, b)
		x = r.last()
	}
	if len(net.blocks) == 0 {
		return nil, false
	}
	l, k, ok := r.head(x, true)
	if !ok {
		return nil, false
	}
	net.linear, net.linearName, net.pool = l.Linear, l.Name, k
	return net, true
}

// selectionConv returns option A's shortcut (models.OpSelect) as
// models.PadShortcut computes it: the exact 0/1 selection of its channels
// as a 1×1 convolution with stride 2 from len(targets) to out channels.
func selectionConv(targets []int, out int) *nn.Conv2d {
	in := len(targets)
	conv := &nn.Conv2d{Weight: autograd.New(out, in, 1, 1), Stride: 2, Dilation: 1}
	for c, d := range targets {
		if d >= 0 {
			conv.Weight.Data[d*in+c] = 1
		}
	}
	return conv
}

// vgg reads a VGG: convolutions with ReLU and poolings (average poolings
// of window 1 left out), then the head without pooling.
func (r *graphReader) vgg() (*vggNet, bool) {
	net := &vggNet{}
	x := models.GraphInput
	for r.i < len(r.g.Nodes) {
		n := &r.g.Nodes[r.i]
		switch n.Op {
		case models.OpConv:
			l, ok := r.conv(x)
			if !ok || !l.relu {
				return nil, false
			}
			net.layers = append(net.layers, vggLayer{conv: &l})
		case models.OpMaxPool, models.OpAvgPool:
			if r.next(n.Op, x) == nil {
				return nil, false
			}
			if n.Op == models.OpAvgPool && n.Kernel == 1 && n.Stride == 1 && n.Padding == 0 {
				break // the identity
			}
			l := vggLayer{max: n.Op == models.OpMaxPool, k: n.Kernel, stride: n.Stride, pad: n.Padding}
			if l.max {
				l.pool = nn.MaxPool2d{Kernel: n.Kernel, Stride: n.Stride, Padding: n.Padding}
			} else {
				l.pool = nn.AvgPool2d{Kernel: n.Kernel, Stride: n.Stride, Padding: n.Padding}
			}
			net.layers = append(net.layers, l)
		default:
			l, _, ok := r.head(x, false)
			if !ok {
				return nil, false
			}
			net.classifier, net.classifierName = l.Linear, l.Name
			return net, true
		}
		x = r.last()
	}
	return nil, false
}
