package onnx

import (
	"encoding/binary"
	"math"
	"slices"
)

// The messages of onnx.proto (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto)
// that an exported network needs, with the field numbers of that file.

// Element types of TensorProto.DataType.
const (
	typeFloat = 1 // FLOAT
	typeInt64 = 7 // INT64
)

// Attribute types of AttributeProto.AttributeType.
const (
	attrFloat = 1 // FLOAT
	attrInt   = 2 // INT
	attrInts  = 7 // INTS
)

// model is a ModelProto.
type model struct {
	irVersion       int64
	opset           int64 // version of the default ("ai.onnx") domain
	producerName    string
	producerVersion string
	docString       string
	graph           graph
	metadata        map[string]string // metadata_props, written in key order
}

// graph is a GraphProto.
type graph struct {
	name         string
	nodes        []node
	initializers []tensor
	inputs       []valueInfo
	outputs      []valueInfo
}

// node is a NodeProto.
type node struct {
	opType  string
	name    string
	inputs  []string // "" stands for an omitted optional input
	outputs []string
	attrs   []attr
}

// attr is an AttributeProto of type FLOAT, INT or INTS.
type attr struct {
	name string
	typ  int
	f    float32
	i    int64
	ints []int64
}

// intAttr, intsAttr and floatAttr build attributes.
func intAttr(name string, v int64) attr { return attr{name: name, typ: attrInt, i: v} }
func intsAttr(name string, v ...int64) attr {
	return attr{name: name, typ: attrInts, ints: slices.Clone(v)}
}
func floatAttr(name string, v float32) attr { return attr{name: name, typ: attrFloat, f: v} }

// tensor is a TensorProto holding float32 or int64 values in raw_data
// (little-endian, as the format prescribes).
type tensor struct {
	name  string
	dims  []int64
	typ   int       // typeFloat or typeInt64
	f32   []float32 // values when typ is typeFloat
	int64 []int64   // values when typ is typeInt64
}

// valueInfo is a ValueInfoProto of a tensor type; a dimension is a fixed
// size or, when its name is not empty, a named dynamic size.
type valueInfo struct {
	name string
	typ  int
	dims []dim
}

// dim is one TensorShapeProto.Dimension.
type dim struct {
	value int64
	param string // dim_param: a named dynamic dimension
}

// marshal returns the ModelProto encoding of m.
func (m *model) marshal() []byte {
	e := &encoder{}
	e.int(1, m.irVersion)
	e.string(2, m.producerName)
	e.string(3, m.producerVersion)
	if m.docString != "" {
		e.string(6, m.docString)
	}
	e.message(7, m.graph.encode)
	e.message(8, func(e *encoder) { // OperatorSetIdProto, default domain ""
		e.int(2, m.opset)
	})
	keys := make([]string, 0, len(m.metadata))
	for k := range m.metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.message(14, func(e *encoder) { // StringStringEntryProto
			e.string(1, k)
			e.string(2, m.metadata[k])
		})
	}
	return e.b
}

func (g *graph) encode(e *encoder) {
	for i := range g.nodes {
		e.message(1, g.nodes[i].encode)
	}
	e.string(2, g.name)
	for i := range g.initializers {
		e.message(5, g.initializers[i].encode)
	}
	for i := range g.inputs {
		e.message(11, g.inputs[i].encode)
	}
	for i := range g.outputs {
		e.message(12, g.outputs[i].encode)
	}
}

func (n *node) encode(e *encoder) {
	for _, s := range n.inputs {
		e.string(1, s)
	}
	for _, s := range n.outputs {
		e.string(2, s)
	}
	e.string(3, n.name)
	e.string(4, n.opType)
	for i := range n.attrs {
		e.message(5, n.attrs[i].encode)
	}
}

func (a *attr) encode(e *encoder) {
	e.string(1, a.name)
	switch a.typ {
	case attrFloat:
		e.float(2, a.f)
	case attrInt:
		e.int(3, a.i)
	case attrInts:
		e.packedInts(8, a.ints)
	}
	e.int(20, int64(a.typ))
}

func (t *tensor) encode(e *encoder) {
	e.packedInts(1, t.dims)
	e.int(2, int64(t.typ))
	e.string(8, t.name)
	var raw []byte
	switch t.typ {
	case typeFloat:
		raw = make([]byte, 0, 4*len(t.f32))
		for _, v := range t.f32 {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
	case typeInt64:
		raw = make([]byte, 0, 8*len(t.int64))
		for _, v := range t.int64 {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	}
	e.bytes(9, raw)
}

func (v *valueInfo) encode(e *encoder) {
	e.string(1, v.name)
	e.message(2, func(e *encoder) { // TypeProto
		e.message(1, func(e *encoder) { // TypeProto.Tensor
			e.int(1, int64(v.typ))
			e.message(2, func(e *encoder) { // TensorShapeProto
				for _, d := range v.dims {
					e.message(1, func(e *encoder) {
						if d.param != "" {
							e.string(2, d.param)
						} else {
							e.int(1, d.value)
						}
					})
				}
			})
		})
	})
}
