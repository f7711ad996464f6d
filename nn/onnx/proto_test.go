package onnx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// The examples of the protocol-buffer encoding guide
// (https://protobuf.dev/programming-guides/encoding/), byte for byte.
func TestEncoderMatchesTheEncodingGuide(t *testing.T) {
	cases := []struct {
		name string
		fill func(e *encoder)
		want []byte
	}{
		{"int 150", func(e *encoder) { e.int(1, 150) }, []byte{0x08, 0x96, 0x01}},
		{"string", func(e *encoder) { e.string(2, "testing") }, []byte{0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67}},
		{"message", func(e *encoder) { e.message(3, func(e *encoder) { e.int(1, 150) }) }, []byte{0x1a, 0x03, 0x08, 0x96, 0x01}},
		{"packed", func(e *encoder) { e.packedInts(4, []int64{3, 270, 86942}) }, []byte{0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}},
		{"negative int", func(e *encoder) { e.int(1, -2) }, []byte{0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"float", func(e *encoder) { e.float(2, 1) }, []byte{0x15, 0x00, 0x00, 0x80, 0x3f}},
		{"empty packed", func(e *encoder) { e.packedInts(4, nil) }, nil},
		{"bytes", func(e *encoder) { e.bytes(9, []byte{1, 2}) }, []byte{0x4a, 0x02, 0x01, 0x02}},
	}
	for _, tc := range cases {
		e := &encoder{}
		tc.fill(e)
		if !bytes.Equal(e.b, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, e.b, tc.want)
		}
	}
	// A message longer than 127 bytes has a two-byte length, inserted
	// before content that is already written.
	e := &encoder{}
	e.int(1, 7)
	e.message(2, func(e *encoder) { e.string(1, strings.Repeat("x", 200)) })
	want := append([]byte{0x08, 0x07, 0x12, 0xcb, 0x01, 0x0a, 0xc8, 0x01}, strings.Repeat("x", 200)...)
	if !bytes.Equal(e.b, want) {
		t.Errorf("long message: % x\nwant % x", e.b[:12], want[:12])
	}
}

// field is one decoded protocol-buffer field.
type field struct {
	num  int
	wire int
	u    uint64 // varint, fixed32 and fixed64 values
	b    []byte // length-delimited content
}

// decode splits a message into its fields, failing the test on malformed
// input (which would mean a broken encoder).
func decode(t *testing.T, b []byte) []field {
	t.Helper()
	var fs []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad key varint at % x", b[:min(len(b), 10)])
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			f.u, n = binary.Uvarint(b)
			if n <= 0 {
				t.Fatalf("field %d: bad varint", f.num)
			}
			b = b[n:]
		case wireI32:
			f.u = uint64(binary.LittleEndian.Uint32(b))
			b = b[4:]
		case wireI64:
			f.u = binary.LittleEndian.Uint64(b)
			b = b[8:]
		case wireLen:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				t.Fatalf("field %d: bad length", f.num)
			}
			f.b = b[n : n+int(l)]
			b = b[n+int(l):]
		default:
			t.Fatalf("field %d: wire type %d", f.num, f.wire)
		}
		fs = append(fs, f)
	}
	return fs
}

// get returns the fields numbered num.
func get(fs []field, num int) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

// one returns the only field numbered num.
func one(t *testing.T, fs []field, num int) field {
	t.Helper()
	g := get(fs, num)
	if len(g) != 1 {
		t.Fatalf("%d fields numbered %d, want 1", len(g), num)
	}
	return g[0]
}

// packed decodes a packed repeated varint field.
func packed(t *testing.T, f field) []int64 {
	var vs []int64
	b := f.b
	for len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad packed varint")
		}
		vs = append(vs, int64(v))
		b = b[n:]
	}
	return vs
}

// decodedTensor is a TensorProto read back.
type decodedTensor struct {
	dims []int64
	typ  int
	raw  []byte
}

// readModel decodes an exported model far enough to check it against the
// network: version fields, metadata, inputs, nodes and initializers.
type readModel struct {
	irVersion, opset int64
	producer         string
	metadata         map[string]string
	inputs           map[string][]string // dimensions as text: "batch" or "3"
	ops              []string
	initializers     map[string]decodedTensor
}

func read(t *testing.T, b []byte) readModel {
	t.Helper()
	fs := decode(t, b)
	m := readModel{metadata: map[string]string{}, inputs: map[string][]string{}, initializers: map[string]decodedTensor{}}
	m.irVersion = int64(one(t, fs, 1).u)
	m.producer = string(one(t, fs, 2).b)
	ops := decode(t, one(t, fs, 8).b)
	if len(get(ops, 1)) != 0 {
		t.Errorf("opset_import has a domain, want the default")
	}
	m.opset = int64(one(t, ops, 2).u)
	for _, e := range get(fs, 14) {
		kv := decode(t, e.b)
		m.metadata[string(one(t, kv, 1).b)] = string(one(t, kv, 2).b)
	}
	g := decode(t, one(t, fs, 7).b)
	for _, n := range get(g, 1) {
		m.ops = append(m.ops, string(one(t, decode(t, n.b), 4).b))
	}
	for _, in := range get(g, 11) {
		vi := decode(t, in.b)
		tt := decode(t, one(t, decode(t, one(t, vi, 2).b), 1).b)
		var ds []string
		for _, d := range get(decode(t, one(t, tt, 2).b), 1) {
			df := decode(t, d.b)
			if p := get(df, 2); len(p) == 1 {
				ds = append(ds, string(p[0].b))
			} else {
				ds = append(ds, fmt.Sprint(one(t, df, 1).u))
			}
		}
		m.inputs[string(one(t, vi, 1).b)] = ds
	}
	for _, in := range get(g, 5) {
		tf := decode(t, in.b)
		var dims []int64
		if d := get(tf, 1); len(d) == 1 {
			dims = packed(t, d[0])
		}
		m.initializers[string(one(t, tf, 8).b)] = decodedTensor{dims: dims, typ: int(one(t, tf, 2).u), raw: one(t, tf, 9).b}
	}
	return m
}

func TestModelDecodesToTheNetwork(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := models.New("resnet20", 10, rng, models.WithWidth(0.25))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"classes": `["a","b"]`, "mean": "[0.5,0.5,0.5]"}
	for _, fold := range []bool{false, true} {
		b, err := Marshal(m, Options{FoldBatchNorm: fold, Metadata: meta, Producer: "test"})
		if err != nil {
			t.Fatal(err)
		}
		r := read(t, b)
		if r.irVersion != IRVersion || r.opset != Opset || r.producer != "proxgen" {
			t.Errorf("IR version %d, opset %d, producer %q", r.irVersion, r.opset, r.producer)
		}
		if fmt.Sprint(r.metadata) != fmt.Sprint(meta) {
			t.Errorf("metadata %v, want %v", r.metadata, meta)
		}
		if got := r.inputs[InputName]; !slices.Equal(got, []string{"batch", "3", "32", "32"}) {
			t.Errorf("input dimensions %v", got)
		}
		bn := slices.Contains(r.ops, "BatchNormalization")
		if bn == fold {
			t.Errorf("fold %v: BatchNormalization nodes present: %v", fold, bn)
		}
		// Every tensor of the state dict is an initializer of its name,
		// byte for byte, unless folding changed it.
		for _, p := range nn.StateDict(m) {
			if p.Int64 || (fold && (strings.Contains(p.Name, "bn") || strings.Contains(p.Name, "conv"))) {
				continue
			}
			init, ok := r.initializers[p.Name]
			if !ok {
				t.Errorf("fold %v: no initializer %s", fold, p.Name)
				continue
			}
			if !slices.Equal(init.dims, int64s(p.T.Shape())) || init.typ != typeFloat || !bytes.Equal(init.raw, float32Bytes(p.T.Data)) {
				t.Errorf("fold %v: initializer %s: dims %v type %d, %d bytes; want %v, %d values", fold, p.Name, init.dims, init.typ, len(init.raw), p.T.Shape(), p.T.Numel())
			}
		}
	}
}

func float32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// Folding is exact up to rounding: the folded convolution computes the
// convolution followed by batch normalisation in evaluation mode.
func TestFoldMatchesConvThenNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bias := range []bool{false, true} {
		c := nn.NewConv2d(3, 5, 3, nn.ConvOpts{Padding: 1, Bias: bias}, rng)
		bn := nn.NewBatchNorm2d(5)
		seq := nn.NewSequential(c, bn)
		randomizeNorms(seq, rng)
		seq.SetTraining(false)
		x := autograd.RandN(rng, 2, 3, 6, 6).In(&autograd.Context{NoGrad: true})
		want := seq.Forward(x)
		w, b := infer.FoldBatchNorm(c, bn)
		got := autograd.Conv2d(x, autograd.FromSlice(w, c.Weight.Shape()...), autograd.FromSlice(b, 5), 1, 1, 1)
		d, s := compare(float64s(got.Data), want.Data)
		if d > 1e-5*s {
			t.Errorf("bias %v: folded convolution differs by %.3g (largest output %.3g)", bias, d, s)
		}
	}
}

func TestMarshalErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []struct {
		m    nn.Module
		opt  Options
		want string
	}{
		{nn.NewSequential(nn.NewConv2d(3, 4, 3, nn.ConvOpts{}, rng), unknown{}), Options{}, "1: cannot export a onnx.unknown"},
		{nn.NewSequential(nn.NewConv2d(4, 4, 3, nn.ConvOpts{}, rng)), Options{}, "0: a 3x3 convolution of 4 channels"},
		{nn.NewSequential(nn.Flatten{}, nn.NewLinear(10, 2, true, rng)), Options{}, "1: a linear layer from 10 features applied to shape [-1 3072]"},
		{nn.NewSequential(nn.MaxPool2d{Kernel: 8, Stride: 8}), Options{InputShape: []int{3, 4, 4}}, "too small"},
		{nn.NewSequential(nn.ReLU{}), Options{}, "want (batch, classes)"},
		{nn.NewSequential(), Options{InputShape: []int{3, 0, 4}}, "input shape [3 0 4]"},
	}
	for _, tc := range cases {
		_, err := Marshal(tc.m, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T: error %v, want one containing %q", tc.m, err, tc.want)
		}
	}
}

// unknown is a module the exporter does not know.
type unknown struct{ nn.ReLU }

func TestExportFile(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	cnn, err := models.New("resnet20", 10, rng, models.WithWidth(0.25), models.WithShortcut(models.ShortcutB))
	if err != nil {
		t.Fatal(err)
	}
	spec := models.Spec{Model: "resnet20", Width: 0.25, Shortcut: "B", Classes: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}}
	cnnPath := filepath.Join(dir, "cnn.safetensors")
	if err := checkpoint.SaveModel(cnnPath, cnn, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	lm := models.NewLanguageModel(9, 4, 5, 2, 0.5, rng)
	lmPath := filepath.Join(dir, "lm.safetensors")
	if err := checkpoint.SaveModel(lmPath, lm, map[string]string{"epoch": "3"}); err != nil {
		t.Fatal(err)
	}
	sparse := models.NewLanguageModel(300, 4, 5, 1, 0, rng)
	// Mostly zeros: stored sparse when compressed, under other names.
	clear(sparse.Encoder.Weight.Data[20:])
	clear(sparse.Decoder.Weight.Data[20:])
	compressedPath := filepath.Join(dir, "lm-compressed.safetensors")
	if err := checkpoint.SaveCompressedModel(compressedPath, sparse, nil); err != nil {
		t.Fatal(err)
	}
	if f, err := safetensors.ReadFile(compressedPath); err != nil || !checkpoint.IsCompressed(f) {
		t.Fatalf("%s is not a compressed model file (%v)", compressedPath, err)
	}
	// A training checkpoint (nn/train) holds the model under
	// checkpoint.ModelPrefix.
	statePath := filepath.Join(dir, "state.safetensors")
	state := checkpoint.StateDict(lm, checkpoint.ModelPrefix)
	state.Metadata = map[string]string{checkpoint.FormatKey: "proxgen-run-v1", "secret": "x"}
	if err := safetensors.WriteFileAtomic(statePath, state); err != nil {
		t.Fatal(err)
	}
	words := []string{"<eos>", "a", "b", "c", "d", "e", "f", "g", "h"}
	cases := []struct {
		src  string
		opt  FileOptions
		net  nn.Module
		desc string
		meta map[string]string
	}{
		{cnnPath, FileOptions{}, cnn, "resnet20 width 0.25 shortcut B, 10 classes",
			map[string]string{"model": "resnet20", "shortcut": "B", "classes": `["a","b","c","d","e","f","g","h","i","j"]`, "mean": "[0.4914,0.4822,0.4465]"}},
		{lmPath, FileOptions{Words: words, Options: Options{Metadata: map[string]string{"note": "x"}}}, lm, "LSTM language model: vocabulary 9, embedding 4, 2 layer(s) of 5 units",
			map[string]string{"model": "lstm_lm", "epoch": "3", "vocab": "9", "layers": "2", "hidden": "5", "note": "x", "words": `["<eos>","a","b","c","d","e","f","g","h"]`}},
		{compressedPath, FileOptions{}, sparse, "LSTM language model: vocabulary 300, embedding 4, 1 layer(s) of 5 units",
			map[string]string{"model": "lstm_lm", "vocab": "300"}},
		{statePath, FileOptions{}, lm, "LSTM language model: vocabulary 9, embedding 4, 2 layer(s) of 5 units",
			map[string]string{"model": "lstm_lm", "secret": "", checkpoint.FormatKey: ""}},
	}
	for _, tc := range cases {
		dst := filepath.Join(dir, "out.onnx")
		desc, err := ExportFile(dst, tc.src, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		if desc != tc.desc {
			t.Errorf("%s: description %q, want %q", tc.src, desc, tc.desc)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Marshal(tc.net, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, w := read(t, b), read(t, want)
		if !slices.Equal(r.ops, w.ops) || fmt.Sprint(r.initializers) != fmt.Sprint(w.initializers) {
			t.Errorf("%s: the exported graph differs from the network's", tc.src)
		}
		for k, v := range tc.meta {
			if r.metadata[k] != v {
				t.Errorf("%s: metadata %s = %q, want %q", tc.src, k, r.metadata[k], v)
			}
		}
	}
	if _, err := ExportFile(filepath.Join(dir, "x.onnx"), lmPath, FileOptions{Words: words[:3]}); err == nil || !strings.Contains(err.Error(), "3 words for a vocabulary of 9") {
		t.Errorf("too few words: error %v", err)
	}
	if _, err := ExportFile(filepath.Join(dir, "x.onnx"), filepath.Join(dir, "missing.safetensors"), FileOptions{}); err == nil {
		t.Error("missing file: no error")
	}
}

// The ONNX Runtime comparison covers both forms of the option-A shortcut:
// the reference layout (Pad) and the channel maps of compaction (Gather).
func TestShortcutForms(t *testing.T) {
	for i, want := range map[int][]string{0: {"Slice", "Pad"}, 5: {"Slice", "Pad", "Gather"}} {
		tc := imageCases[i]
		m, err := tc.build(rand.New(rand.NewPCG(23, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Marshal(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ops := read(t, b).ops
		for _, op := range want {
			if !slices.Contains(ops, op) {
				t.Errorf("%s: no %s node among %v", tc.name, op, ops)
			}
		}
		if i == 0 && slices.Contains(ops, "Gather") {
			t.Errorf("%s: Gather in the reference layout", tc.name)
		}
	}
}
