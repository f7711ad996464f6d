// Package onnx exports the networks this engine builds to ONNX, the model
// format that ONNX Runtime, TensorRT, OpenVINO and the mobile runtimes
// read. It writes the protocol-buffer encoding of onnx.proto directly
// (the standard library has no protobuf), with opset 17.
//
// Export writes the graph of a network (models.NewGraph), node by node:
// the layers of package nn (Sequential, Conv2d, BatchNorm2d, Linear, ReLU,
// pooling, Flatten, Dropout) and the networks of nn/models (VGG, ResNet
// with option-A or option-B shortcuts and any per-layer widths, the LSTM
// language model) are what that graph describes.
// Tensors keep their state_dict names as ONNX initializer names, so
// "layer1.0.conv1.weight" in the ONNX graph is the tensor of that name in
// the model file.
//
// An image classifier has one input, "input", of shape (batch, 3, 32, 32)
// (float32, normalised as in training) and one output, "logits", of shape
// (batch, classes); the batch dimension is dynamic. The language model has
// the inputs "ids" (seq, batch) int64 word ids, "h0" and "c0" (layers,
// batch, hidden) initial states, and the outputs "logits" (seq·batch,
// vocab), row t·batch+b for ids[t][b], and "hn" and "cn", the final
// states; seq and batch are dynamic. The network is exported as it runs
// in evaluation mode: batch normalisation with its running statistics (as
// ONNX BatchNormalization or folded into the preceding convolution,
// Options.FoldBatchNorm), dropout left out.
package onnx

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/proxgen/proxgen/internal/atomicfile"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// Opset is the version of the ONNX operator set the exported graphs use,
// and IRVersion the ONNX IR version of that opset's release (1.12).
const (
	Opset     = 17
	IRVersion = 8
)

// Names of the graph inputs and outputs.
const (
	InputName  = "input"  // image classifiers: (batch, C, H, W) float32
	LogitsName = "logits" // every network: the logits
	IDsName    = "ids"    // language model: (seq, batch) int64 word ids
	H0Name     = "h0"     // language model: initial hidden states (layers, batch, hidden)
	C0Name     = "c0"     // language model: initial cell states (layers, batch, hidden)
	HNName     = "hn"     // language model: final hidden states
	CNName     = "cn"     // language model: final cell states
)

// Options controls Marshal.
type Options struct {
	// FoldBatchNorm folds every batch normalisation that directly follows
	// a convolution into that convolution's weight and bias (computed in
	// float64, rounded once), so the graph has no BatchNormalization
	// nodes. Without it each is a BatchNormalization node.
	FoldBatchNorm bool
	// InputShape is the (C, H, W) shape of one input image of an image
	// classifier; nil means (3, 32, 32), the CIFAR-10 images.
	InputShape []int
	// Metadata is stored as the model's metadata_props (class names,
	// normalisation constants, ...); nil stores none.
	Metadata map[string]string
	// Producer is the producer_version string; empty means "dev".
	Producer string
	// DocString describes the model (doc_string of the ModelProto).
	DocString string
}

// WriteFile exports m to the file at path (see Marshal), replacing it
// atomically.
func WriteFile(path string, m nn.Module, opt Options) error {
	b, err := Marshal(m, opt)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, atomicfile.Options{}); err != nil {
		return fmt.Errorf("onnx: %w", err)
	}
	return nil
}

// Marshal returns the ONNX model (a serialized ModelProto) of m as it runs
// in evaluation mode: the nodes of its graph (models.NewGraph), in order.
// It fails, naming the module and its path, when m holds a module it
// cannot export or when shapes do not fit together.
func Marshal(m nn.Module, opt Options) ([]byte, error) {
	in := opt.InputShape
	if in == nil {
		in = []int{3, 32, 32}
	}
	if len(in) != 3 || slices.Min(in) < 1 {
		return nil, fmt.Errorf("onnx: input shape %v: want positive (C, H, W)", in)
	}
	g, err := models.NewGraph(m, in)
	if err != nil {
		var u *models.UnsupportedError
		if errors.As(err, &u) {
			return nil, fmt.Errorf("onnx: %s: cannot export a %T", u.Path, u.Module)
		}
		return nil, fmt.Errorf("onnx: %w", err)
	}
	b := &builder{opt: opt, used: map[string]bool{}}
	if err := b.graph(g, fmt.Sprintf("%T", m)); err != nil {
		return nil, err
	}
	producer := opt.Producer
	if producer == "" {
		producer = "dev"
	}
	b.g.name = fmt.Sprintf("%T", m)
	md := &model{
		irVersion:       IRVersion,
		opset:           Opset,
		producerName:    "proxgen",
		producerVersion: producer,
		docString:       opt.DocString,
		graph:           b.g,
		metadata:        opt.Metadata,
	}
	return md.marshal(), nil
}

// builder collects the graph of one export.
type builder struct {
	opt  Options
	g    graph
	used map[string]bool // value and initializer names taken
	// hs and cs are the final states of the LSTM layers.
	hs, cs []string
}

// value is a tensor of the graph: its name and shape, −1 for the dynamic
// batch dimension.
type value struct {
	name  string
	shape []int
}

// unique returns name, or name with a numeric suffix when it is taken.
func (b *builder) unique(name string) string {
	n := name
	for i := 1; b.used[n]; i++ {
		n = name + "_" + strconv.Itoa(i)
	}
	b.used[n] = true
	return n
}

// node adds a node with one output, named after name, and returns it with
// the given shape.
func (b *builder) node(op, name string, inputs []string, shape []int, attrs ...attr) value {
	out := b.unique(name)
	b.g.nodes = append(b.g.nodes, node{opType: op, name: out, inputs: inputs, outputs: []string{out}, attrs: attrs})
	return value{name: out, shape: shape}
}

// floats adds a float32 initializer (a copy of data) and returns its name.
func (b *builder) floats(name string, data []float32, shape ...int) string {
	if n := prod(shape); n != len(data) {
		panic(fmt.Sprintf("onnx: initializer %s has %d values for shape %v", name, len(data), shape))
	}
	name = b.unique(name)
	b.g.initializers = append(b.g.initializers, tensor{name: name, dims: int64s(shape), typ: typeFloat, f32: slices.Clone(data)})
	return name
}

// ints adds a one-dimensional int64 initializer and returns its name.
func (b *builder) ints(name string, vs ...int64) string {
	name = b.unique(name)
	b.g.initializers = append(b.g.initializers, tensor{name: name, dims: []int64{int64(len(vs))}, typ: typeInt64, int64: slices.Clone(vs)})
	return name
}

// graph adds the inputs, nodes and outputs of g, the graph of a network
// of type typ: an image classifier, or the language model when g's input
// is word ids.
func (b *builder) graph(g *models.Graph, typ string) error {
	var x value
	if g.IDs {
		x = b.lmInputs(g)
	} else {
		x = value{name: b.unique(InputName), shape: g.Input}
		b.g.inputs = append(b.g.inputs, valueInfo{name: x.name, typ: typeFloat, dims: dims(x.shape, "batch")})
	}
	if len(g.Nodes) == 0 {
		return fmt.Errorf("onnx: %s returns shape %v, want (batch, classes)", typ, x.shape)
	}
	vals := make([]value, len(g.Nodes))
	readers := g.Readers()
	for i := 0; i < len(g.Nodes); i++ {
		n := &g.Nodes[i]
		in := func(k int) value {
			if j := n.Inputs[k]; j != models.GraphInput {
				return vals[j]
			}
			return x
		}
		switch n.Op {
		case models.OpConv:
			// A batch normalisation that only this convolution feeds is
			// folded into it when asked.
			if b.opt.FoldBatchNorm && i+1 < len(g.Nodes) && len(readers[i]) == 1 && readers[i][0] == i+1 && g.Nodes[i+1].Op == models.OpBatchNorm {
				vals[i+1] = b.conv(n, &g.Nodes[i+1], in(0))
				i++
				continue
			}
			vals[i] = b.conv(n, nil, in(0))
		case models.OpBatchNorm:
			vals[i] = b.batchNorm(n, in(0))
		case models.OpReLU:
			vals[i] = b.node("Relu", n.Name, []string{in(0).name}, n.Shape)
		case models.OpAdd:
			vals[i] = b.node("Add", n.Name, []string{in(0).name, in(1).name}, n.Shape)
		case models.OpMaxPool:
			vals[i] = b.pool("MaxPool", n, in(0))
		case models.OpAvgPool:
			vals[i] = b.pool("AveragePool", n, in(0))
		case models.OpGlobalAvgPool:
			vals[i] = b.node("GlobalAveragePool", n.Name, []string{in(0).name}, n.Shape)
		case models.OpSelect:
			vals[i] = b.selectChannels(n, in(0))
		case models.OpFlatten:
			vals[i] = b.node("Flatten", n.Name, []string{in(0).name}, n.Shape, intAttr("axis", 1))
		case models.OpReshape:
			shape := make([]int64, len(n.Shape))
			for k, d := range n.Shape {
				shape[k] = int64(d)
			}
			vals[i] = b.node("Reshape", n.Name, []string{in(0).name, b.ints(n.Param("shape"), shape...)}, n.Shape)
		case models.OpLinear:
			vals[i] = b.linear(n, in(0))
		case models.OpEmbedding:
			e := n.Embedding.Weight
			vals[i] = b.node("Gather", n.Name, []string{b.floats(n.Param("weight"), e.Data, e.Dim(0), e.Dim(1)), in(0).name}, n.Shape, intAttr("axis", 0))
		case models.OpLSTM:
			vals[i] = b.lstm(n, in(0))
		default:
			return fmt.Errorf("onnx: %s: cannot export the operation %v", n.Name, n.Op)
		}
	}
	y := vals[len(vals)-1]
	if g.IDs {
		b.lmOutputs(g, y)
		return nil
	}
	if len(y.shape) != 2 {
		return fmt.Errorf("onnx: %s returns shape %v, want (batch, classes)", typ, y.shape)
	}
	b.output(y, LogitsName, dims(y.shape, "batch"))
	return nil
}

// output makes v a graph output called name.
func (b *builder) output(v value, name string, ds []dim) {
	if v.name != name {
		b.g.nodes = append(b.g.nodes, node{opType: "Identity", name: b.unique(name), inputs: []string{v.name}, outputs: []string{name}})
	}
	b.g.outputs = append(b.g.outputs, valueInfo{name: name, typ: typeFloat, dims: ds})
}

// conv adds the convolution node n applied to x, followed by the batch
// normalisation bn when bn is not nil, folded into the convolution.
func (b *builder) conv(n, bn *models.Node, x value) value {
	c := n.Conv
	w := c.Weight
	cout, k := w.Dim(0), w.Dim(2)
	var wName, bName string
	if bn != nil {
		fw, fb := infer.FoldBatchNorm(c, bn.Norm)
		wName = b.floats(n.Param("weight"), fw, w.Shape()...)
		bName = b.floats(n.Param("bias"), fb, cout)
	} else {
		wName = b.floats(n.Param("weight"), w.Data, w.Shape()...)
		if c.Bias != nil {
			bName = b.floats(n.Param("bias"), c.Bias.Data, cout)
		}
	}
	inputs := []string{x.name, wName}
	if bName != "" {
		inputs = append(inputs, bName)
	}
	s, p, d := int64(c.Stride), int64(c.Padding), int64(c.Dilation)
	return b.node("Conv", n.Name, inputs, n.Shape,
		intsAttr("kernel_shape", int64(k), int64(k)), intsAttr("strides", s, s),
		intsAttr("pads", p, p, p, p), intsAttr("dilations", d, d), intAttr("group", 1))
}

// batchNorm adds the batch normalisation node n applied to x as a
// BatchNormalization node (inference form: the running statistics).
func (b *builder) batchNorm(n *models.Node, x value) value {
	bn := n.Norm
	c := bn.Weight.Numel()
	inputs := []string{x.name,
		b.floats(n.Param("weight"), bn.Weight.Data, c), b.floats(n.Param("bias"), bn.Bias.Data, c),
		b.floats(n.Param("running_mean"), bn.RunningMean.Data, c), b.floats(n.Param("running_var"), bn.RunningVar.Data, c)}
	return b.node("BatchNormalization", n.Name, inputs, n.Shape,
		floatAttr("epsilon", bn.Eps), floatAttr("momentum", 1-bn.Momentum))
}

// linear adds the linear node n applied to x of shape (N, in) as a Gemm
// node.
func (b *builder) linear(n *models.Node, x value) value {
	l := n.Linear
	out, in := l.Weight.Dim(0), l.Weight.Dim(1)
	inputs := []string{x.name, b.floats(n.Param("weight"), l.Weight.Data, out, in)}
	if l.Bias != nil {
		inputs = append(inputs, b.floats(n.Param("bias"), l.Bias.Data, out))
	}
	return b.node("Gemm", n.Name, inputs, n.Shape, intAttr("transB", 1))
}

// pool adds a MaxPool or AveragePool node with a square window. Average
// pooling counts the padding as zeros, as PyTorch's default does.
func (b *builder) pool(op string, n *models.Node, x value) value {
	k, s, p := int64(n.Kernel), int64(n.Stride), int64(n.Padding)
	attrs := []attr{intsAttr("kernel_shape", k, k), intsAttr("strides", s, s), intsAttr("pads", p, p, p, p)}
	if op == "AveragePool" {
		attrs = append(attrs, intAttr("count_include_pad", 1))
	}
	return b.node(op, n.Name, []string{x.name}, n.Shape, attrs...)
}

// selectChannels adds the option-A shortcut n: x[:, :, ::2, ::2] (Slice
// with steps 2), then the channels placed by a Pad with zeros (the
// reference layout: Lo zero channels before the input's) or, for a
// compacted map, by a Gather from the input channels and one zero channel.
func (b *builder) selectChannels(n *models.Node, x value) value {
	name, in, out := n.Name, len(n.Targets), n.Shape[1]
	sub := b.node("Slice", name+".subsample", []string{x.name,
		b.ints(name+".starts", 0, 0), b.ints(name+".ends", math.MaxInt64, math.MaxInt64),
		b.ints(name+".axes", 2, 3), b.ints(name+".steps", 2, 2)},
		[]int{x.shape[0], in, (x.shape[2] + 1) / 2, (x.shape[3] + 1) / 2})
	if n.Lo >= 0 {
		hi := int64(out - in - n.Lo)
		return b.node("Pad", name+".pad", []string{sub.name, b.ints(name+".pads", 0, int64(n.Lo), 0, 0, 0, hi, 0, 0)}, n.Shape)
	}
	// Append one zero channel (index in), then pick each output channel.
	padded := slices.Clone(sub.shape)
	padded[1]++
	z := b.node("Pad", name+".zero", []string{sub.name, b.ints(name+".pads", 0, 0, 0, 0, 0, 1, 0, 0)}, padded)
	idx := make([]int64, out)
	for o := range idx {
		idx[o] = int64(in)
	}
	for i, d := range n.Targets {
		if d >= 0 {
			idx[d] = int64(i)
		}
	}
	return b.node("Gather", name+".select", []string{z.name, b.ints(name+".channels", idx...)}, n.Shape, intAttr("axis", 1))
}

// lstmOf returns the LSTM of the language model's graph g.
func lstmOf(g *models.Graph) *nn.LSTM {
	for _, n := range g.Nodes {
		if n.Op == models.OpLSTM {
			return n.LSTM
		}
	}
	return nil
}

// lmState returns the dimensions of the language model's states.
func lmState(rnn *nn.LSTM) []dim {
	return []dim{{value: int64(rnn.NumLayers)}, {param: "batch"}, {value: int64(rnn.HiddenSize)}}
}

// lmInputs adds the inputs of the language model's graph g: the word ids
// and, when it has an LSTM, its initial states.
func (b *builder) lmInputs(g *models.Graph) value {
	b.g.inputs = append(b.g.inputs, valueInfo{name: b.unique(IDsName), typ: typeInt64, dims: []dim{{param: "seq"}, {param: "batch"}}})
	if rnn := lstmOf(g); rnn != nil {
		state := lmState(rnn)
		b.g.inputs = append(b.g.inputs,
			valueInfo{name: b.unique(H0Name), typ: typeFloat, dims: state},
			valueInfo{name: b.unique(C0Name), typ: typeFloat, dims: state})
	}
	return value{name: IDsName, shape: g.Input}
}

// lstm adds the LSTM node n applied to x of shape (seq, batch, in), one
// ONNX LSTM per layer, its initial states sliced from the inputs h0 and
// c0; the final states are concatenated by lmOutputs. The sequence
// dimension is dynamic too; −1 stands for both.
func (b *builder) lstm(n *models.Node, x value) value {
	rnn := n.LSTM
	hidden := rnn.HiddenSize
	for l := range rnn.NumLayers {
		in := rnn.InputSize
		if l > 0 {
			in = hidden
		}
		p := fmt.Sprintf("%s.l%d", n.Name, l)
		bias := append(gates(rnn.BiasIH[l].Data, hidden, 1), gates(rnn.BiasHH[l].Data, hidden, 1)...)
		layer := []string{b.ints(p+".start", int64(l)), b.ints(p+".end", int64(l+1)), b.ints(p+".axis", 0)}
		h0 := b.node("Slice", p+".h0", append([]string{H0Name}, layer...), []int{1, -1, hidden})
		c0 := b.node("Slice", p+".c0", append([]string{C0Name}, layer...), []int{1, -1, hidden})
		y, yh, yc := b.unique(p+".y"), b.unique(p+".hn"), b.unique(p+".cn")
		b.g.nodes = append(b.g.nodes, node{opType: "LSTM", name: b.unique(p), outputs: []string{y, yh, yc},
			inputs: []string{x.name,
				b.floats(n.Param(fmt.Sprintf("weight_ih_l%d", l)), gates(rnn.WeightIH[l].Data, hidden, in), 1, 4*hidden, in),
				b.floats(n.Param(fmt.Sprintf("weight_hh_l%d", l)), gates(rnn.WeightHH[l].Data, hidden, hidden), 1, 4*hidden, hidden),
				b.floats(n.Param(fmt.Sprintf("bias_l%d", l)), bias, 1, 8*hidden),
				"", h0.name, c0.name},
			attrs: []attr{intAttr("hidden_size", int64(hidden))}})
		// Y is (seq, directions = 1, batch, hidden).
		x = b.node("Squeeze", p+".out", []string{y, b.ints(p+".squeeze", 1)}, n.Shape)
		b.hs, b.cs = append(b.hs, yh), append(b.cs, yc)
	}
	return x
}

// lmOutputs adds the outputs of the language model's graph g: the logits
// y and the final states.
func (b *builder) lmOutputs(g *models.Graph, y value) {
	b.output(y, LogitsName, []dim{{param: "tokens"}, {value: int64(y.shape[1])}})
	rnn := lstmOf(g)
	if rnn == nil {
		return
	}
	for _, s := range []struct {
		name string
		ins  []string
	}{{HNName, b.hs}, {CNName, b.cs}} {
		b.g.nodes = append(b.g.nodes, node{opType: "Concat", name: b.unique(s.name), inputs: s.ins, outputs: []string{s.name}, attrs: []attr{intAttr("axis", 0)}})
		b.g.outputs = append(b.g.outputs, valueInfo{name: s.name, typ: typeFloat, dims: lmState(rnn)})
	}
}

// gates returns a PyTorch LSTM tensor of 4·hidden rows of cols values,
// gates in PyTorch's order i, f, g, o, with its gates in ONNX's order
// i, o, f, c (c is PyTorch's g).
func gates(t []float32, hidden, cols int) []float32 {
	block := hidden * cols
	if len(t) != 4*block {
		panic(fmt.Sprintf("onnx: LSTM tensor of %d values, want 4×%d×%d", len(t), hidden, cols))
	}
	out := make([]float32, 0, len(t))
	for _, g := range [4]int{0, 3, 1, 2} {
		out = append(out, t[g*block:(g+1)*block]...)
	}
	return out
}

// dims returns the ONNX dimensions of shape, −1 being the dynamic
// dimension named param.
func dims(shape []int, param string) []dim {
	ds := make([]dim, len(shape))
	for i, n := range shape {
		if n < 0 {
			ds[i].param = param
		} else {
			ds[i].value = int64(n)
		}
	}
	return ds
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func prod(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}
