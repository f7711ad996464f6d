package models

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/proxgen/proxgen/nn"
)

// Op is the operation of a Node.
type Op int

// The operations of a Graph. Shapes are those of the node's output, the
// batch dimension (and the language model's sequence dimension) −1.
const (
	// OpConv is the 2-D convolution Node.Conv (its weight, bias, stride,
	// padding and dilation): (N, Cin, H, W) to (N, Cout, H', W').
	OpConv Op = iota + 1
	// OpBatchNorm is the batch normalisation Node.Norm in evaluation
	// mode (its running statistics).
	OpBatchNorm
	// OpReLU is max(x, 0).
	OpReLU
	// OpAdd is the sum of its two inputs, of equal shapes: Inputs[0] the
	// main branch, Inputs[1] the residual (a ResNet block's shortcut).
	OpAdd
	// OpMaxPool and OpAvgPool pool square windows of Node.Kernel pixels
	// with Node.Stride and zero Node.Padding (counted in the average, as
	// PyTorch's default does).
	OpMaxPool
	OpAvgPool
	// OpGlobalAvgPool averages each map: (N, C, H, W) to (N, C, 1, 1).
	OpGlobalAvgPool
	// OpSelect is the option-A shortcut of a ResNet (PadShortcut):
	// x[:, :, ::2, ::2] with input channel i placed at output channel
	// Node.Targets[i] (−1: dropped) and zeros elsewhere.
	OpSelect
	// OpFlatten maps (N, ...) to (N, rest).
	OpFlatten
	// OpReshape gives its input the shape Node.Shape (a −1 there takes
	// the remaining size).
	OpReshape
	// OpLinear is the affine layer Node.Linear: (N, in) to (N, out).
	OpLinear
	// OpEmbedding looks the word ids of the graph input up in
	// Node.Embedding: (seq, batch) to (seq, batch, dim).
	OpEmbedding
	// OpLSTM runs the stacked LSTM Node.LSTM over its input from
	// states given with the input (zeros unless the runtime gives
	// others): (seq, batch, in) to (seq, batch, hidden).
	OpLSTM
)

var opNames = [...]string{OpConv: "Conv", OpBatchNorm: "BatchNorm", OpReLU: "ReLU", OpAdd: "Add",
	OpMaxPool: "MaxPool", OpAvgPool: "AvgPool", OpGlobalAvgPool: "GlobalAvgPool", OpSelect: "Select",
	OpFlatten: "Flatten", OpReshape: "Reshape", OpLinear: "Linear", OpEmbedding: "Embedding", OpLSTM: "LSTM"}

// String returns the operation's name, such as "Conv".
func (o Op) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// GraphInput is the index by which Node.Inputs refer to the graph's
// input.
const GraphInput = -1

// Node is one operation of a Graph.
type Node struct {
	// Name names the node after the module it comes from. For a node
	// with tensors (convolution, batch normalisation, linear, embedding,
	// LSTM) it is the state_dict prefix of those tensors
	// ("layer1.0.conv1": its weight is "layer1.0.conv1.weight"; see
	// Param); for the others it is the module's path or, for an
	// operation inside a module, the path of that module followed by the
	// operation's name ("layer1.0.relu1", "layer1.0.add", "avgpool").
	// Names are unique but for parameter-free layers of hand-made
	// networks.
	Name string
	// Op is the operation.
	Op Op
	// Inputs are the indexes in Graph.Nodes of the nodes it reads, all
	// before it, or GraphInput.
	Inputs []int
	// Shape is the shape of the output; −1 stands for the batch (and
	// sequence) dimension.
	Shape []int

	// Conv (OpConv), Norm (OpBatchNorm), Linear (OpLinear), Embedding
	// (OpEmbedding) and LSTM (OpLSTM) are the layers with the tensors
	// and hyperparameters, shared with the network: a graph reads the
	// network's current weights.
	Conv      *nn.Conv2d
	Norm      *nn.BatchNorm2d
	Linear    *nn.Linear
	Embedding *nn.Embedding
	LSTM      *nn.LSTM
	// Kernel, Stride and Padding are the window of OpMaxPool and
	// OpAvgPool.
	Kernel, Stride, Padding int
	// Targets (OpSelect) gives the output channel of every input channel,
	// −1 for none; Lo is the number of zero channels before the copied
	// ones in the reference layout (Targets[i] = Lo+i), −1 for another
	// map.
	Targets []int
	Lo      int
}

// Param returns the state_dict name of the node's tensor called suffix
// ("weight", "bias", "running_mean", ...).
func (n *Node) Param(suffix string) string {
	if n.Name == "" {
		return suffix
	}
	return n.Name + "." + suffix
}

// Graph is a network as it runs in evaluation mode, as a list of named
// operations in the order they run (dropout is left out). Every consumer
// of a network's structure reads it: the ONNX exporter (nn/onnx), the
// compiled inference plans (nn/infer) and the channel analysis
// (nn/prune). Its output is the last node's.
type Graph struct {
	// Input is the shape of the network's input, −1 standing for the
	// batch (and sequence) dimension: (−1, C, H, W) images, or (−1, −1)
	// word ids for the language model (IDs).
	Input []int
	// IDs reports that the input holds word ids (int64 in ONNX) rather
	// than float32 values.
	IDs bool
	// Nodes are the operations in an order in which each reads only the
	// ones before it.
	Nodes []Node
}

// Readers returns, for every node, the indexes of the nodes that read
// it, in increasing order.
func (g *Graph) Readers() [][]int {
	r := make([][]int, len(g.Nodes))
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in >= 0 {
				r[in] = append(r[in], i)
			}
		}
	}
	return r
}

// UnsupportedError is the error of NewGraph for a module it cannot
// describe.
type UnsupportedError struct {
	// Path is the module's path in the network ("features.3"), "x" for
	// the network itself.
	Path string
	// Module is the module.
	Module nn.Module
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: no graph for a %T", e.Path, e.Module)
}

// NewGraph returns the graph of m for inputs of shape input (C, H, W),
// one image without the batch dimension; input is ignored for the
// language model, whose input is word ids. m is a network of this
// package (ResNet with either shortcut and any widths, VGG,
// LanguageModel) or built from the layers of package nn (Sequential,
// Conv2d, BatchNorm2d, Linear, ReLU, MaxPool2d, AvgPool2d,
// GlobalAvgPool2d, Flatten, Dropout) and this package's blocks. The
// error names the module and its path when m holds one that NewGraph
// does not know (an *UnsupportedError) or when the shapes do not fit
// together.
func NewGraph(m nn.Module, input []int) (*Graph, error) {
	if lm, ok := m.(*LanguageModel); ok {
		return lm.graph()
	}
	if len(input) != 3 || slices.Min(input) < 1 {
		return nil, fmt.Errorf("input shape %v: want positive (C, H, W)", input)
	}
	b := &graphBuilder{g: &Graph{Input: append([]int{-1}, input...)}}
	if _, err := b.module("", m, GraphInput); err != nil {
		return nil, err
	}
	return b.g, nil
}

// graphBuilder collects the nodes of NewGraph.
type graphBuilder struct{ g *Graph }

// shape returns the shape of node i (GraphInput: the input).
func (b *graphBuilder) shape(i int) []int {
	if i == GraphInput {
		return b.g.Input
	}
	return b.g.Nodes[i].Shape
}

// add appends n and returns its index.
func (b *graphBuilder) add(n Node) int {
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1
}

// op adds a parameter-free node of op named name reading ins, of shape
// the first input's when shape is nil.
func (b *graphBuilder) op(op Op, name string, shape []int, ins ...int) int {
	if shape == nil {
		shape = slices.Clone(b.shape(ins[0]))
	}
	return b.add(Node{Name: name, Op: op, Inputs: ins, Shape: shape})
}

// module adds the nodes of m applied to x; path is m's state_dict prefix
// ("" or ending in a dot).
func (b *graphBuilder) module(path string, m nn.Module, x int) (int, error) {
	name := trimDot(path)
	if name == "" {
		name = "x"
	}
	switch m := m.(type) {
	case *nn.Sequential:
		return b.sequential(path, m.Layers, x)
	case *nn.Conv2d:
		return b.conv(path, m, x)
	case *nn.BatchNorm2d:
		return b.batchNorm(path, m, x)
	case *nn.Linear:
		return b.linear(path, m, x)
	case nn.ReLU:
		return b.op(OpReLU, name, nil, x), nil
	case *nn.Dropout:
		return x, nil // evaluation mode: the identity
	case nn.Flatten:
		return b.flatten(name, x), nil
	case nn.MaxPool2d:
		return b.pool(OpMaxPool, name, x, m.Kernel, m.Stride, m.Padding)
	case nn.AvgPool2d:
		return b.pool(OpAvgPool, name, x, m.Kernel, m.Stride, m.Padding)
	case nn.GlobalAvgPool2d:
		s := b.shape(x)
		if len(s) != 4 {
			return 0, fmt.Errorf("%s: global average pooling of shape %v", name, s)
		}
		return b.op(OpGlobalAvgPool, name, []int{s[0], s[1], 1, 1}, x), nil
	case *VGG:
		y, err := b.module(path+"features.", m.Features, x)
		if err != nil {
			return 0, err
		}
		return b.linear(path+"classifier.", m.Classifier, b.flatten(path+"flatten", y))
	case *ResNet:
		return m.graph(b, path, x)
	case *BasicBlock:
		return m.graph(b, path, x)
	case *PadShortcut:
		return m.graph(b, name, x)
	}
	return 0, &UnsupportedError{Path: name, Module: m}
}

// sequential adds layers in order.
func (b *graphBuilder) sequential(path string, layers []nn.Module, x int) (int, error) {
	var err error
	for i, l := range layers {
		if x, err = b.module(path+strconv.Itoa(i)+".", l, x); err != nil {
			return 0, err
		}
	}
	return x, nil
}

// conv adds the convolution c at path applied to x.
func (b *graphBuilder) conv(path string, c *nn.Conv2d, x int) (int, error) {
	w, s := c.Weight, b.shape(x)
	cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
	if len(s) != 4 || s[1] != cin || w.Dim(3) != k {
		return 0, fmt.Errorf("%s: a %dx%d convolution of %d channels (weight %v) applied to shape %v", trimDot(path), k, w.Dim(3), cin, w.Shape(), s)
	}
	out := []int{s[0], cout, 0, 0}
	for i := 2; i < 4; i++ {
		span := s[i] + 2*c.Padding - c.Dilation*(k-1) - 1
		out[i] = span/c.Stride + 1
		if span < 0 {
			return 0, fmt.Errorf("%s: input %v is too small for the convolution", trimDot(path), s)
		}
	}
	return b.add(Node{Name: trimDot(path), Op: OpConv, Inputs: []int{x}, Shape: out, Conv: c}), nil
}

// batchNorm adds bn at path applied to x.
func (b *graphBuilder) batchNorm(path string, bn *nn.BatchNorm2d, x int) (int, error) {
	c, s := bn.Weight.Numel(), b.shape(x)
	if len(s) < 2 || s[1] != c {
		return 0, fmt.Errorf("%s: batch normalisation of %d channels applied to shape %v", trimDot(path), c, s)
	}
	return b.add(Node{Name: trimDot(path), Op: OpBatchNorm, Inputs: []int{x}, Shape: slices.Clone(s), Norm: bn}), nil
}

// convNorm adds the convolution at convPath followed by the batch
// normalisation at bnPath.
func (b *graphBuilder) convNorm(convPath string, c *nn.Conv2d, bnPath string, bn *nn.BatchNorm2d, x int) (int, error) {
	y, err := b.conv(convPath, c, x)
	if err != nil {
		return 0, err
	}
	return b.batchNorm(bnPath, bn, y)
}

// linear adds l at path applied to x of shape (N, in).
func (b *graphBuilder) linear(path string, l *nn.Linear, x int) (int, error) {
	out, in := l.Weight.Dim(0), l.Weight.Dim(1)
	s := b.shape(x)
	if len(s) != 2 || s[1] != in {
		return 0, fmt.Errorf("%s: a linear layer from %d features applied to shape %v", trimDot(path), in, s)
	}
	return b.add(Node{Name: trimDot(path), Op: OpLinear, Inputs: []int{x}, Shape: []int{s[0], out}, Linear: l}), nil
}

// flatten adds a flattening of x: (N, ...) to (N, rest).
func (b *graphBuilder) flatten(name string, x int) int {
	s := b.shape(x)
	n := 1
	for _, d := range s[1:] {
		n *= d
	}
	return b.op(OpFlatten, name, []int{s[0], n}, x)
}

// pool adds a pooling of square windows.
func (b *graphBuilder) pool(op Op, name string, x, kernel, stride, padding int) (int, error) {
	s := b.shape(x)
	if len(s) != 4 {
		return 0, fmt.Errorf("%s: pooling of shape %v", name, s)
	}
	out := slices.Clone(s)
	for i := 2; i < 4; i++ {
		span := s[i] + 2*padding - kernel
		out[i] = span/stride + 1
		if span < 0 {
			return 0, fmt.Errorf("%s: input %v is too small for a %d×%d window", name, s, kernel, kernel)
		}
	}
	return b.add(Node{Name: name, Op: op, Inputs: []int{x}, Shape: out, Kernel: kernel, Stride: stride, Padding: padding}), nil
}

// graph adds the ResNet: stem, stages, average pooling, classifier.
func (r *ResNet) graph(b *graphBuilder, path string, x int) (int, error) {
	y, err := b.convNorm(path+"conv1.", r.Conv1, path+"bn1.", r.BN1, x)
	if err != nil {
		return 0, err
	}
	y = b.op(OpReLU, path+"relu", nil, y)
	for i, s := range r.Stages {
		if y, err = b.module(fmt.Sprintf("%slayer%d.", path, i+1), s, y); err != nil {
			return 0, err
		}
	}
	k := r.PoolKernel
	if k == 0 {
		k = b.shape(y)[3] // F.avg_pool2d(out, out.size()[3])
	}
	if y, err = b.pool(OpAvgPool, path+"avgpool", y, k, k, 0); err != nil {
		return 0, err
	}
	return b.linear(path+"linear.", r.Linear, b.flatten(path+"flatten", y))
}

// graph adds relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
func (blk *BasicBlock) graph(b *graphBuilder, path string, x int) (int, error) {
	y, err := b.convNorm(path+"conv1.", blk.Conv1, path+"bn1.", blk.BN1, x)
	if err != nil {
		return 0, err
	}
	y = b.op(OpReLU, path+"relu1", nil, y)
	if y, err = b.convNorm(path+"conv2.", blk.Conv2, path+"bn2.", blk.BN2, y); err != nil {
		return 0, err
	}
	sc := x
	if blk.Shortcut != nil {
		if sc, err = b.module(path+"shortcut.", blk.Shortcut, x); err != nil {
			return 0, err
		}
	}
	if !slices.Equal(b.shape(sc), b.shape(y)) {
		return 0, fmt.Errorf("%s: the shortcut gives shape %v, the convolutions %v", trimDot(path), b.shape(sc), b.shape(y))
	}
	y = b.op(OpAdd, path+"add", nil, y, sc)
	return b.op(OpReLU, path+"relu2", nil, y), nil
}

// graph adds the option-A shortcut.
func (p *PadShortcut) graph(b *graphBuilder, name string, x int) (int, error) {
	s := b.shape(x)
	if len(s) != 4 || s[1] != p.In {
		return 0, fmt.Errorf("%s: an option-A shortcut from %d channels applied to shape %v", name, p.In, s)
	}
	out := []int{s[0], p.Out, (s[2] + 1) / 2, (s[3] + 1) / 2}
	return b.add(Node{Name: name, Op: OpSelect, Inputs: []int{x}, Shape: out, Targets: p.Targets(), Lo: p.Lo}), nil
}

// graph returns the language model's graph: embedding, LSTM, the rows
// of its output (seq·batch, hidden) and the decoder.
func (m *LanguageModel) graph() (*Graph, error) {
	rnn := m.RNN
	emb, hidden := m.Encoder.Weight.Dim(1), rnn.HiddenSize
	if emb != rnn.InputSize || m.Decoder.Weight.Dim(1) != hidden {
		return nil, fmt.Errorf("language model: embedding %d, LSTM %d→%d, decoder from %d do not fit", emb, rnn.InputSize, hidden, m.Decoder.Weight.Dim(1))
	}
	g := &Graph{Input: []int{-1, -1}, IDs: true}
	g.Nodes = []Node{
		{Name: "encoder", Op: OpEmbedding, Inputs: []int{GraphInput}, Shape: []int{-1, -1, emb}, Embedding: m.Encoder},
		{Name: "rnn", Op: OpLSTM, Inputs: []int{0}, Shape: []int{-1, -1, hidden}, LSTM: rnn},
		{Name: "rnn.flat", Op: OpReshape, Inputs: []int{1}, Shape: []int{-1, hidden}},
		{Name: "decoder", Op: OpLinear, Inputs: []int{2}, Shape: []int{-1, m.Decoder.Weight.Dim(0)}, Linear: m.Decoder},
	}
	return g, nil
}

// trimDot returns path without its trailing dot.
func trimDot(path string) string {
	if n := len(path); n > 0 && path[n-1] == '.' {
		return path[:n-1]
	}
	return path
}
