// Package onnx exports the networks this engine builds to ONNX, the model
// format that ONNX Runtime, TensorRT, OpenVINO and the mobile runtimes
// read. It writes the protocol-buffer encoding of onnx.proto directly
// (the standard library has no protobuf), with opset 17.
//
// Export walks the module structure of a network: the layers of package
// nn (Sequential, Conv2d, BatchNorm2d, Linear, ReLU, pooling, Flatten,
// Dropout) and the networks of nn/models (VGG, ResNet with option-A or
// option-B shortcuts and any per-layer widths, the LSTM language model).
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
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/proxgen/proxgen/internal/atomicfile"
	"github.com/proxgen/proxgen/nn"
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
// in evaluation mode. It fails, naming the module and its path, when m
// holds a module it cannot export or when shapes do not fit together.
func Marshal(m nn.Module, opt Options) ([]byte, error) {
	b := &builder{opt: opt, used: map[string]bool{}}
	var err error
	if lm, ok := m.(*models.LanguageModel); ok {
		err = b.languageModel(lm)
	} else {
		err = b.classifier(m)
	}
	if err != nil {
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

// classifier builds the graph of an image classifier.
func (b *builder) classifier(m nn.Module) error {
	in := b.opt.InputShape
	if in == nil {
		in = []int{3, 32, 32}
	}
	if len(in) != 3 || slices.Min(in) < 1 {
		return fmt.Errorf("onnx: input shape %v: want positive (C, H, W)", in)
	}
	x := value{name: b.unique(InputName), shape: append([]int{-1}, in...)}
	b.g.inputs = append(b.g.inputs, valueInfo{name: x.name, typ: typeFloat, dims: dims(x.shape, "batch")})
	y, err := b.module("", m, x)
	if err != nil {
		return err
	}
	if len(y.shape) != 2 {
		return fmt.Errorf("onnx: %T returns shape %v, want (batch, classes)", m, y.shape)
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

// module adds the nodes of m applied to x; path is m's state_dict prefix
// ("" or ending in a dot).
func (b *builder) module(path string, m nn.Module, x value) (value, error) {
	name := trimDot(path)
	if name == "" {
		name = "x"
	}
	switch m := m.(type) {
	case *nn.Sequential:
		return b.sequential(path, m.Layers, x)
	case *nn.Conv2d:
		return b.conv(path, m, nil, "", x)
	case *nn.BatchNorm2d:
		return b.batchNorm(path, m, x)
	case *nn.Linear:
		return b.linear(path, m, x)
	case nn.ReLU:
		return b.node("Relu", name, []string{x.name}, x.shape), nil
	case *nn.Dropout:
		return x, nil // evaluation mode: the identity
	case nn.Flatten:
		return b.flatten(name, x), nil
	case nn.MaxPool2d:
		return b.pool("MaxPool", name, x, m.Kernel, m.Stride, m.Padding)
	case nn.AvgPool2d:
		return b.pool("AveragePool", name, x, m.Kernel, m.Stride, m.Padding)
	case nn.GlobalAvgPool2d:
		if len(x.shape) != 4 {
			return value{}, fmt.Errorf("onnx: %s: global average pooling of shape %v", name, x.shape)
		}
		return b.node("GlobalAveragePool", name, []string{x.name}, []int{x.shape[0], x.shape[1], 1, 1}), nil
	case *models.VGG:
		y, err := b.module(path+"features.", m.Features, x)
		if err != nil {
			return value{}, err
		}
		return b.linear(path+"classifier.", m.Classifier, b.flatten(path+"flatten", y))
	case *models.ResNet:
		return b.resnet(path, m, x)
	case *models.BasicBlock:
		return b.basicBlock(path, m, x)
	case *models.PadShortcut:
		return b.padShortcut(name, m, x)
	}
	return value{}, fmt.Errorf("onnx: %s: cannot export a %T", name, m)
}

// sequential adds layers in order; a Conv2d directly followed by a
// BatchNorm2d goes through convNorm (folded when asked), a BatchNorm2d
// followed by a ReLU stays two nodes (ONNX has no fused op).
func (b *builder) sequential(path string, layers []nn.Module, x value) (value, error) {
	var err error
	for i := 0; i < len(layers); i++ {
		p := path + strconv.Itoa(i) + "."
		if c, ok := layers[i].(*nn.Conv2d); ok && i+1 < len(layers) {
			if bn, ok := layers[i+1].(*nn.BatchNorm2d); ok {
				if x, err = b.conv(p, c, bn, path+strconv.Itoa(i+1)+".", x); err != nil {
					return value{}, err
				}
				i++
				continue
			}
		}
		if x, err = b.module(p, layers[i], x); err != nil {
			return value{}, err
		}
	}
	return x, nil
}

// conv adds the convolution c at path applied to x, followed by the batch
// normalisation bn at bnPath when bn is not nil (folded into the
// convolution with Options.FoldBatchNorm).
func (b *builder) conv(path string, c *nn.Conv2d, bn *nn.BatchNorm2d, bnPath string, x value) (value, error) {
	w := c.Weight
	cout, cin, k := w.Dim(0), w.Dim(1), w.Dim(2)
	if len(x.shape) != 4 || x.shape[1] != cin || w.Dim(3) != k {
		return value{}, fmt.Errorf("onnx: %s: a %dx%d convolution of %d channels (weight %v) applied to shape %v", trimDot(path), k, w.Dim(3), cin, w.Shape(), x.shape)
	}
	out := make([]int, 4)
	out[0], out[1] = x.shape[0], cout
	for i := 2; i < 4; i++ {
		span := x.shape[i] + 2*c.Padding - c.Dilation*(k-1) - 1
		out[i] = span/c.Stride + 1
		if span < 0 {
			return value{}, fmt.Errorf("onnx: %s: input %v is too small for the convolution", trimDot(path), x.shape)
		}
	}
	var wName, bName string
	if bn != nil && b.opt.FoldBatchNorm {
		if bn.Weight.Numel() != cout {
			return value{}, fmt.Errorf("onnx: %s: %d channels normalised after %d", trimDot(bnPath), bn.Weight.Numel(), cout)
		}
		fw, fb := fold(c, bn)
		wName = b.floats(path+"weight", fw, w.Shape()...)
		bName = b.floats(path+"bias", fb, cout)
	} else {
		wName = b.floats(path+"weight", w.Data, w.Shape()...)
		if c.Bias != nil {
			bName = b.floats(path+"bias", c.Bias.Data, cout)
		}
	}
	inputs := []string{x.name, wName}
	if bName != "" {
		inputs = append(inputs, bName)
	}
	s, p, d := int64(c.Stride), int64(c.Padding), int64(c.Dilation)
	y := b.node("Conv", trimDot(path), inputs, out,
		intsAttr("kernel_shape", int64(k), int64(k)), intsAttr("strides", s, s),
		intsAttr("pads", p, p, p, p), intsAttr("dilations", d, d), intAttr("group", 1))
	if bn == nil || b.opt.FoldBatchNorm {
		return y, nil
	}
	return b.batchNorm(bnPath, bn, y)
}

// fold returns the weight and bias of the convolution c followed by bn in
// evaluation mode: W'[o] = W[o]·s[o] and b'[o] = (b[o] − mean[o])·s[o] + β[o]
// with s = γ/√(var + eps).
func fold(c *nn.Conv2d, bn *nn.BatchNorm2d) (w, bias []float32) {
	cout := c.Weight.Dim(0)
	per := c.Weight.Numel() / cout
	w = make([]float32, c.Weight.Numel())
	bias = make([]float32, cout)
	for o := range cout {
		s := float64(bn.Weight.Data[o]) / math.Sqrt(float64(bn.RunningVar.Data[o])+float64(bn.Eps))
		for i := o * per; i < (o+1)*per; i++ {
			w[i] = float32(float64(c.Weight.Data[i]) * s)
		}
		b0 := 0.0
		if c.Bias != nil {
			b0 = float64(c.Bias.Data[o])
		}
		bias[o] = float32((b0-float64(bn.RunningMean.Data[o]))*s + float64(bn.Bias.Data[o]))
	}
	return w, bias
}

// batchNorm adds bn at path applied to x as a BatchNormalization node
// (inference form: the running statistics).
func (b *builder) batchNorm(path string, bn *nn.BatchNorm2d, x value) (value, error) {
	c := bn.Weight.Numel()
	if len(x.shape) < 2 || x.shape[1] != c {
		return value{}, fmt.Errorf("onnx: %s: batch normalisation of %d channels applied to shape %v", trimDot(path), c, x.shape)
	}
	inputs := []string{x.name,
		b.floats(path+"weight", bn.Weight.Data, c), b.floats(path+"bias", bn.Bias.Data, c),
		b.floats(path+"running_mean", bn.RunningMean.Data, c), b.floats(path+"running_var", bn.RunningVar.Data, c)}
	return b.node("BatchNormalization", trimDot(path), inputs, x.shape,
		floatAttr("epsilon", bn.Eps), floatAttr("momentum", 1-bn.Momentum)), nil
}

// linear adds l at path applied to x of shape (N, in) as a Gemm node.
func (b *builder) linear(path string, l *nn.Linear, x value) (value, error) {
	out, in := l.Weight.Dim(0), l.Weight.Dim(1)
	if len(x.shape) != 2 || x.shape[1] != in {
		return value{}, fmt.Errorf("onnx: %s: a linear layer from %d features applied to shape %v", trimDot(path), in, x.shape)
	}
	inputs := []string{x.name, b.floats(path+"weight", l.Weight.Data, out, in)}
	if l.Bias != nil {
		inputs = append(inputs, b.floats(path+"bias", l.Bias.Data, out))
	}
	return b.node("Gemm", trimDot(path), inputs, []int{x.shape[0], out}, intAttr("transB", 1)), nil
}

// flatten adds a Flatten node: (N, ...) to (N, rest).
func (b *builder) flatten(name string, x value) value {
	return b.node("Flatten", name, []string{x.name}, []int{x.shape[0], prod(x.shape[1:])}, intAttr("axis", 1))
}

// pool adds a MaxPool or AveragePool node with a square window. Average
// pooling counts the padding as zeros, as PyTorch's default does.
func (b *builder) pool(op, name string, x value, kernel, stride, padding int) (value, error) {
	if len(x.shape) != 4 {
		return value{}, fmt.Errorf("onnx: %s: pooling of shape %v", name, x.shape)
	}
	out := slices.Clone(x.shape)
	for i := 2; i < 4; i++ {
		span := x.shape[i] + 2*padding - kernel
		out[i] = span/stride + 1
		if span < 0 {
			return value{}, fmt.Errorf("onnx: %s: input %v is too small for a %d×%d window", name, x.shape, kernel, kernel)
		}
	}
	k, s, p := int64(kernel), int64(stride), int64(padding)
	attrs := []attr{intsAttr("kernel_shape", k, k), intsAttr("strides", s, s), intsAttr("pads", p, p, p, p)}
	if op == "AveragePool" {
		attrs = append(attrs, intAttr("count_include_pad", 1))
	}
	return b.node(op, name, []string{x.name}, out, attrs...), nil
}

// resnet adds a CIFAR ResNet: stem, stages, average pooling, classifier.
func (b *builder) resnet(path string, r *models.ResNet, x value) (value, error) {
	y, err := b.conv(path+"conv1.", r.Conv1, r.BN1, path+"bn1.", x)
	if err != nil {
		return value{}, err
	}
	y = b.node("Relu", path+"relu", []string{y.name}, y.shape)
	for i, s := range r.Stages {
		if y, err = b.module(fmt.Sprintf("%slayer%d.", path, i+1), s, y); err != nil {
			return value{}, err
		}
	}
	k := r.PoolKernel
	if k == 0 {
		k = y.shape[3] // F.avg_pool2d(out, out.size()[3])
	}
	if y, err = b.pool("AveragePool", path+"avgpool", y, k, k, 0); err != nil {
		return value{}, err
	}
	return b.linear(path+"linear.", r.Linear, b.flatten(path+"flatten", y))
}

// basicBlock adds relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
func (b *builder) basicBlock(path string, blk *models.BasicBlock, x value) (value, error) {
	y, err := b.conv(path+"conv1.", blk.Conv1, blk.BN1, path+"bn1.", x)
	if err != nil {
		return value{}, err
	}
	y = b.node("Relu", path+"relu1", []string{y.name}, y.shape)
	if y, err = b.conv(path+"conv2.", blk.Conv2, blk.BN2, path+"bn2.", y); err != nil {
		return value{}, err
	}
	sc := x
	if blk.Shortcut != nil {
		if sc, err = b.module(path+"shortcut.", blk.Shortcut, x); err != nil {
			return value{}, err
		}
	}
	if !slices.Equal(sc.shape, y.shape) {
		return value{}, fmt.Errorf("onnx: %s: the shortcut gives shape %v, the convolutions %v", trimDot(path), sc.shape, y.shape)
	}
	y = b.node("Add", path+"add", []string{y.name, sc.name}, y.shape)
	return b.node("Relu", path+"relu2", []string{y.name}, y.shape), nil
}

// padShortcut adds the option-A shortcut: x[:, :, ::2, ::2] (Slice with
// steps 2), then the channels placed by a Pad with zeros (the reference
// layout: Lo zero channels before the input's) or, for a compacted map,
// by a Gather from the input channels and one zero channel.
func (b *builder) padShortcut(name string, p *models.PadShortcut, x value) (value, error) {
	if len(x.shape) != 4 || x.shape[1] != p.In {
		return value{}, fmt.Errorf("onnx: %s: an option-A shortcut from %d channels applied to shape %v", name, p.In, x.shape)
	}
	sub := b.node("Slice", name+".subsample", []string{x.name,
		b.ints(name+".starts", 0, 0), b.ints(name+".ends", math.MaxInt64, math.MaxInt64),
		b.ints(name+".axes", 2, 3), b.ints(name+".steps", 2, 2)},
		[]int{x.shape[0], p.In, (x.shape[2] + 1) / 2, (x.shape[3] + 1) / 2})
	out := slices.Clone(sub.shape)
	out[1] = p.Out
	if p.Lo >= 0 {
		hi := int64(p.Out - p.In - p.Lo)
		return b.node("Pad", name+".pad", []string{sub.name, b.ints(name+".pads", 0, int64(p.Lo), 0, 0, 0, hi, 0, 0)}, out), nil
	}
	// Append one zero channel (index In), then pick each output channel.
	padded := slices.Clone(sub.shape)
	padded[1]++
	z := b.node("Pad", name+".zero", []string{sub.name, b.ints(name+".pads", 0, 0, 0, 0, 0, 1, 0, 0)}, padded)
	idx := make([]int64, p.Out)
	for o := range idx {
		idx[o] = int64(p.In)
	}
	for i, d := range p.Targets() {
		if d >= 0 {
			idx[d] = int64(i)
		}
	}
	return b.node("Gather", name+".select", []string{z.name, b.ints(name+".channels", idx...)}, out, intAttr("axis", 1)), nil
}

// languageModel builds the graph of the LSTM language model.
func (b *builder) languageModel(m *models.LanguageModel) error {
	rnn := m.RNN
	layers, hidden := rnn.NumLayers, rnn.HiddenSize
	vocab, emb := m.Encoder.Weight.Dim(0), m.Encoder.Weight.Dim(1)
	if emb != rnn.InputSize || m.Decoder.Weight.Dim(1) != hidden {
		return fmt.Errorf("onnx: language model: embedding %d, LSTM %d→%d, decoder from %d do not fit", emb, rnn.InputSize, hidden, m.Decoder.Weight.Dim(1))
	}
	state := []dim{{value: int64(layers)}, {param: "batch"}, {value: int64(hidden)}}
	b.g.inputs = append(b.g.inputs,
		valueInfo{name: b.unique(IDsName), typ: typeInt64, dims: []dim{{param: "seq"}, {param: "batch"}}},
		valueInfo{name: b.unique(H0Name), typ: typeFloat, dims: state},
		valueInfo{name: b.unique(C0Name), typ: typeFloat, dims: state})
	// The sequence dimension is dynamic too; -1 stands for both below.
	x := b.node("Gather", "encoder", []string{b.floats("encoder.weight", m.Encoder.Weight.Data, vocab, emb), IDsName}, []int{-1, -1, emb}, intAttr("axis", 0))
	var hs, cs []string
	for l := range layers {
		in := rnn.InputSize
		if l > 0 {
			in = hidden
		}
		p := fmt.Sprintf("rnn.l%d", l)
		bias := append(gates(rnn.BiasIH[l].Data, hidden, 1), gates(rnn.BiasHH[l].Data, hidden, 1)...)
		layer := []string{b.ints(p+".start", int64(l)), b.ints(p+".end", int64(l+1)), b.ints(p+".axis", 0)}
		h0 := b.node("Slice", p+".h0", append([]string{H0Name}, layer...), []int{1, -1, hidden})
		c0 := b.node("Slice", p+".c0", append([]string{C0Name}, layer...), []int{1, -1, hidden})
		y, yh, yc := b.unique(p+".y"), b.unique(p+".hn"), b.unique(p+".cn")
		b.g.nodes = append(b.g.nodes, node{opType: "LSTM", name: b.unique(p), outputs: []string{y, yh, yc},
			inputs: []string{x.name,
				b.floats(fmt.Sprintf("rnn.weight_ih_l%d", l), gates(rnn.WeightIH[l].Data, hidden, in), 1, 4*hidden, in),
				b.floats(fmt.Sprintf("rnn.weight_hh_l%d", l), gates(rnn.WeightHH[l].Data, hidden, hidden), 1, 4*hidden, hidden),
				b.floats(fmt.Sprintf("rnn.bias_l%d", l), bias, 1, 8*hidden),
				"", h0.name, c0.name},
			attrs: []attr{intAttr("hidden_size", int64(hidden))}})
		// Y is (seq, directions = 1, batch, hidden).
		x = b.node("Squeeze", p+".out", []string{y, b.ints(p+".squeeze", 1)}, []int{-1, -1, hidden})
		hs, cs = append(hs, yh), append(cs, yc)
	}
	flat := b.node("Reshape", "rnn.flat", []string{x.name, b.ints("rnn.flat.shape", -1, int64(hidden))}, []int{-1, hidden})
	logits, err := b.linear("decoder.", m.Decoder, flat)
	if err != nil {
		return err
	}
	b.output(logits, LogitsName, []dim{{param: "tokens"}, {value: int64(vocab)}})
	for _, s := range []struct {
		name string
		ins  []string
	}{{HNName, hs}, {CNName, cs}} {
		b.g.nodes = append(b.g.nodes, node{opType: "Concat", name: b.unique(s.name), inputs: s.ins, outputs: []string{s.name}, attrs: []attr{intAttr("axis", 0)}})
		b.g.outputs = append(b.g.outputs, valueInfo{name: s.name, typ: typeFloat, dims: state})
	}
	return nil
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

// trimDot returns path without its trailing dot.
func trimDot(path string) string {
	if n := len(path); n > 0 && path[n-1] == '.' {
		return path[:n-1]
	}
	return path
}
