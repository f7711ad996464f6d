package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// Compressed files: see docs/deploy-format.md for the layout.

// Encoding kinds of compressed tensors.
const (
	// EncodingBitmap stores a sparse tensor as a bitmap of its nonzero
	// elements and their values.
	EncodingBitmap = "sparse-bitmap"
	// EncodingIndices stores a sparse tensor as the flat indices of its
	// nonzero elements and their values.
	EncodingIndices = "sparse-indices"
	// EncodingBinary stores a tensor whose elements are ±scale, one
	// scale per tensor or per filter (index of the first dimension), as
	// packed sign bits and the scales.
	EncodingBinary = "binary"

	// EncodingKeyPrefix starts the metadata key that describes the
	// encoding of a compressed tensor: "encoding:" + tensor name.
	EncodingKeyPrefix = "encoding:"
	// PartSeparator joins a compressed tensor's name and the name of
	// one of its parts: "layer1.0.conv1.weight@values".
	PartSeparator = "@"
)

// encoding is the JSON value of a compressed tensor's metadata entry.
type encoding struct {
	Kind  string `json:"kind"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// partOverhead estimates the header bytes of one extra tensor part and its
// metadata, so that a tiny tensor stays dense.
const partOverhead = 120

// Compress returns a copy of f in which every F32 tensor that a sparse or
// binary encoding stores in fewer bytes is replaced by that encoding's
// parts, with a metadata entry saying how to expand it; the other tensors
// and metadata are kept. Per tensor it picks the smallest of: dense;
// bitmap + values; indices (U16 when the tensor has at most 65,536
// elements, else U32) + values; and, when every element is +s or −s for
// one positive finite s per tensor or per filter, sign bits + scales.
// An element counts as zero only if its bits are all zero (−0 is stored as
// a value), so Expand restores every tensor bit for bit.
//
// It returns an error if f already holds compressed tensors or a tensor
// name contains PartSeparator.
func Compress(f *safetensors.File) (*safetensors.File, error) {
	out := &safetensors.File{Tensors: map[string]safetensors.Tensor{}}
	if f.Metadata != nil {
		out.Metadata = maps.Clone(f.Metadata)
	}
	for k := range f.Metadata {
		if strings.HasPrefix(k, EncodingKeyPrefix) {
			return nil, fmt.Errorf("checkpoint: Compress: the file is already compressed (metadata %q)", k)
		}
	}
	for _, name := range f.Names() {
		t := f.Tensors[name]
		if strings.Contains(name, PartSeparator) {
			return nil, fmt.Errorf("checkpoint: Compress: tensor name %q contains %q", name, PartSeparator)
		}
		parts, kind := encodeTensor(t)
		if parts == nil {
			out.Tensors[name] = t
			continue
		}
		enc, err := json.Marshal(encoding{Kind: kind, DType: string(safetensors.F32), Shape: t.Shape})
		if err != nil {
			return nil, err
		}
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		out.Metadata[EncodingKeyPrefix+name] = string(enc)
		for part, pt := range parts {
			out.Tensors[name+PartSeparator+part] = pt
		}
	}
	return out, nil
}

// encodeTensor returns the parts and kind of the smallest encoding of t,
// or nil if storing t densely is smallest.
func encodeTensor(t safetensors.Tensor) (map[string]safetensors.Tensor, string) {
	n := t.Numel()
	if t.DType != safetensors.F32 || n < 1 || len(t.Data) != 4*n {
		return nil, ""
	}
	words := make([]uint32, n)
	nnz := 0
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(t.Data[4*i:])
		if words[i] != 0 {
			nnz++
		}
	}
	best, bestKind := 4*n, ""
	bitmapBytes := (n + 7) / 8
	idxSize := 4
	if n <= 1<<16 {
		idxSize = 2
	}
	sizes := map[string]int{
		EncodingBitmap:  bitmapBytes + 4*nnz + 2*partOverhead,
		EncodingIndices: (idxSize+4)*nnz + 2*partOverhead,
	}
	scales := binaryScales(words, t.Shape)
	if scales != nil {
		sizes[EncodingBinary] = bitmapBytes + 4*len(scales) + 2*partOverhead
	}
	for _, k := range []string{EncodingBinary, EncodingBitmap, EncodingIndices} {
		if s, ok := sizes[k]; ok && s < best {
			best, bestKind = s, k
		}
	}
	switch bestKind {
	case EncodingBitmap:
		bm := make([]byte, bitmapBytes)
		vals := make([]byte, 0, 4*nnz)
		for i, w := range words {
			if w != 0 {
				bm[i/8] |= 1 << (i % 8)
				vals = binary.LittleEndian.AppendUint32(vals, w)
			}
		}
		return map[string]safetensors.Tensor{
			"bitmap": {DType: safetensors.U8, Shape: []int{bitmapBytes}, Data: bm},
			"values": {DType: safetensors.F32, Shape: []int{nnz}, Data: vals},
		}, bestKind
	case EncodingIndices:
		idx := make([]byte, 0, idxSize*nnz)
		vals := make([]byte, 0, 4*nnz)
		for i, w := range words {
			if w == 0 {
				continue
			}
			if idxSize == 2 {
				idx = binary.LittleEndian.AppendUint16(idx, uint16(i))
			} else {
				idx = binary.LittleEndian.AppendUint32(idx, uint32(i))
			}
			vals = binary.LittleEndian.AppendUint32(vals, w)
		}
		dt := safetensors.U32
		if idxSize == 2 {
			dt = safetensors.U16
		}
		return map[string]safetensors.Tensor{
			"indices": {DType: dt, Shape: []int{nnz}, Data: idx},
			"values":  {DType: safetensors.F32, Shape: []int{nnz}, Data: vals},
		}, bestKind
	case EncodingBinary:
		signs := make([]byte, bitmapBytes)
		for i, w := range words {
			if w>>31 != 0 {
				signs[i/8] |= 1 << (i % 8)
			}
		}
		sc := make([]byte, 0, 4*len(scales))
		for _, s := range scales {
			sc = binary.LittleEndian.AppendUint32(sc, s)
		}
		return map[string]safetensors.Tensor{
			"signs": {DType: safetensors.U8, Shape: []int{bitmapBytes}, Data: signs},
			"scale": {DType: safetensors.F32, Shape: []int{len(scales)}, Data: sc},
		}, bestKind
	}
	return nil, ""
}

// binaryScales returns the bits of the scale s of a binary tensor, every
// element ±s: one scale if that holds for the whole tensor, one per
// filter (index of the first dimension) if it holds per filter of a
// tensor of rank 2 or more, nil otherwise. Scales are positive and finite.
func binaryScales(words []uint32, shape []int) []uint32 {
	const abs = 0x7fffffff
	ok := func(s uint32) bool { return s != 0 && s < 0x7f800000 } // positive, finite
	if s := words[0] & abs; ok(s) && all(words, func(w uint32) bool { return w&abs == s }) {
		return []uint32{s}
	}
	if len(shape) < 2 || shape[0] < 2 {
		return nil
	}
	per := len(words) / shape[0]
	scales := make([]uint32, shape[0])
	for f := range scales {
		blk := words[f*per : (f+1)*per]
		s := blk[0] & abs
		if !ok(s) || !all(blk, func(w uint32) bool { return w&abs == s }) {
			return nil
		}
		scales[f] = s
	}
	return scales
}

func all(ws []uint32, pred func(uint32) bool) bool {
	for _, w := range ws {
		if !pred(w) {
			return false
		}
	}
	return true
}

// IsCompressed reports whether f holds tensors stored by Compress.
func IsCompressed(f *safetensors.File) bool {
	for k := range f.Metadata {
		if strings.HasPrefix(k, EncodingKeyPrefix) {
			return true
		}
	}
	return false
}

// Expand returns f with every compressed tensor restored to its dense F32
// form and the encoding metadata removed; a file without compressed
// tensors is returned as it is. It checks every encoding before it expands
// any (the shapes together hold at most MaxExpanded elements), checks
// every part (dtypes, shapes, counts, index order and range, unused bits)
// before it allocates the tensor, and returns an error that names the
// tensor and what is wrong; it never panics on corrupt input.
func Expand(f *safetensors.File) (*safetensors.File, error) {
	encs, err := encodings(f)
	if err != nil {
		return nil, err
	}
	return expand(f, encs, nil)
}

// MaxExpanded is the most elements Expand restores for all the compressed
// tensors of a file together (1 GiB of F32), checked from their metadata
// before any is expanded: a corrupt or hostile file of a few MB cannot
// make it allocate more. (LoadStateDict bounds them tighter: by the
// model's own tensors.)
const MaxExpanded = 1 << 28

// encodings parses the encoding metadata of f's compressed tensors and
// checks each (a valid entry, F32, a shape, no dense tensor of the same
// name) and their total size against MaxExpanded. It allocates nothing in
// proportion to the shapes.
func encodings(f *safetensors.File) (map[string]encoding, error) {
	var encs map[string]encoding
	total := 0
	for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
		name, ok := strings.CutPrefix(k, EncodingKeyPrefix)
		if !ok {
			continue
		}
		if _, dup := f.Tensors[name]; dup {
			return nil, fmt.Errorf("checkpoint: compressed tensor %q is also stored densely", name)
		}
		var enc encoding
		if err := json.Unmarshal([]byte(f.Metadata[k]), &enc); err != nil {
			return nil, fmt.Errorf("checkpoint: compressed tensor %q: bad encoding metadata %q: %w", name, f.Metadata[k], err)
		}
		if enc.DType != string(safetensors.F32) {
			return nil, fmt.Errorf("checkpoint: compressed tensor %q: dtype %q, only F32 is supported", name, enc.DType)
		}
		n, ok := numel(enc.Shape, MaxExpanded-total)
		if !ok {
			return nil, fmt.Errorf("checkpoint: compressed tensor %q: invalid shape %v (the compressed tensors of a file expand to at most %d elements together)", name, enc.Shape, MaxExpanded)
		}
		total += n
		if encs == nil {
			encs = map[string]encoding{}
		}
		encs[name] = enc
	}
	return encs, nil
}

// numel returns the elements of shape, and false for a negative dimension
// or more than most elements.
func numel(shape []int, most int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > most/d) {
			return 0, false
		}
		n *= d
	}
	return n, n <= most
}

// expand restores the compressed tensors of encs that keep accepts (all
// when keep is nil); the others' parts are checked as well, without
// expanding them, and dropped.
func expand(f *safetensors.File, encs map[string]encoding, keep func(string) bool) (*safetensors.File, error) {
	if len(encs) == 0 {
		return f, nil
	}
	out := &safetensors.File{Tensors: map[string]safetensors.Tensor{}}
	for k, v := range f.Metadata {
		if !strings.HasPrefix(k, EncodingKeyPrefix) {
			if out.Metadata == nil {
				out.Metadata = map[string]string{}
			}
			out.Metadata[k] = v
		}
	}
	used := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(encs)) {
		wanted := keep == nil || keep(name)
		enc := encs[name]
		part := func(p string) (safetensors.Tensor, error) {
			key := name + PartSeparator + p
			t, ok := f.Tensors[key]
			if !ok {
				return t, fmt.Errorf("part %q is missing", key)
			}
			used[key] = true
			return t, nil
		}
		t, err := expandTensor(enc, part, !wanted)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: compressed tensor %q (%s): %w", name, enc.Kind, err)
		}
		if wanted {
			out.Tensors[name] = t
		}
	}
	for name, t := range f.Tensors {
		if used[name] {
			continue
		}
		if i := strings.LastIndex(name, PartSeparator); i >= 0 {
			return nil, fmt.Errorf("checkpoint: tensor %q looks like a part of a compressed tensor but no %q metadata describes it", name, EncodingKeyPrefix+name[:i])
		}
		out.Tensors[name] = t
	}
	return out, nil
}

// expandTensor decodes one compressed tensor from its parts; with check
// set it only checks the parts and allocates nothing.
func expandTensor(enc encoding, part func(string) (safetensors.Tensor, error), check bool) (safetensors.Tensor, error) {
	var zero safetensors.Tensor
	if enc.DType != string(safetensors.F32) {
		return zero, fmt.Errorf("dtype %q, only F32 is supported", enc.DType)
	}
	n, ok := numel(enc.Shape, MaxExpanded)
	if !ok {
		return zero, fmt.Errorf("invalid shape %v (at most %d elements)", enc.Shape, MaxExpanded)
	}
	// The tensor is allocated only once its parts are checked.
	var out safetensors.Tensor
	alloc := func() {
		if check {
			return
		}
		out = safetensors.Tensor{DType: safetensors.F32, Shape: slices.Clone(enc.Shape), Data: make([]byte, 4*n)}
		if enc.Shape == nil {
			out.Shape = []int{}
		}
	}
	switch enc.Kind {
	case EncodingBitmap:
		bm, err := bitsPart(part, "bitmap", n)
		if err != nil {
			return zero, err
		}
		vals, err := valuesPart(part, "values", -1)
		if err != nil {
			return zero, err
		}
		cnt := 0
		for _, b := range bm {
			cnt += bits.OnesCount8(b)
		}
		if cnt != len(vals)/4 {
			return zero, fmt.Errorf("bitmap marks %d nonzero elements, values has %d", cnt, len(vals)/4)
		}
		alloc()
		k := 0
		for i := range len(out.Data) / 4 {
			if bm[i/8]>>(i%8)&1 != 0 {
				copy(out.Data[4*i:], vals[4*k:4*k+4])
				k++
			}
		}
	case EncodingIndices:
		idx, err := part("indices")
		if err != nil {
			return zero, err
		}
		size := 0
		switch idx.DType {
		case safetensors.U16:
			size = 2
		case safetensors.U32:
			size = 4
		default:
			return zero, fmt.Errorf("indices have dtype %s, want U16 or U32", idx.DType)
		}
		if len(idx.Shape) != 1 || idx.Shape[0] < 0 || len(idx.Data) != size*idx.Shape[0] {
			return zero, fmt.Errorf("indices have shape %v and %d bytes, want a rank-1 %s tensor", idx.Shape, len(idx.Data), idx.DType)
		}
		nnz := idx.Shape[0]
		vals, err := valuesPart(part, "values", nnz)
		if err != nil {
			return zero, err
		}
		alloc()
		prev := -1
		for k := range nnz {
			var i int
			if size == 2 {
				i = int(binary.LittleEndian.Uint16(idx.Data[2*k:]))
			} else {
				i = int(binary.LittleEndian.Uint32(idx.Data[4*k:]))
			}
			if i <= prev || i >= n {
				return zero, fmt.Errorf("index %d is %d: indices must increase strictly and stay below %d", k, i, n)
			}
			prev = i
			if !check {
				copy(out.Data[4*i:], vals[4*k:4*k+4])
			}
		}
	case EncodingBinary:
		signs, err := bitsPart(part, "signs", n)
		if err != nil {
			return zero, err
		}
		sc, err := valuesPart(part, "scale", -1)
		if err != nil {
			return zero, err
		}
		ns := len(sc) / 4
		if ns == 0 || ns != 1 && (len(enc.Shape) < 2 || ns != enc.Shape[0]) {
			return zero, fmt.Errorf("%d scales for shape %v: want 1 or one per filter", ns, enc.Shape)
		}
		scales := make([]uint32, ns)
		for j := range scales {
			s := binary.LittleEndian.Uint32(sc[4*j:])
			if s == 0 || s >= 0x7f800000 {
				return zero, fmt.Errorf("scale %d is %v, want a positive finite number", j, math.Float32frombits(s))
			}
			scales[j] = s
		}
		alloc()
		per := n
		if ns > 1 {
			per = n / ns
		}
		for i := range len(out.Data) / 4 {
			w := scales[i/per]
			if signs[i/8]>>(i%8)&1 != 0 {
				w |= 1 << 31
			}
			binary.LittleEndian.PutUint32(out.Data[4*i:], w)
		}
	default:
		return zero, fmt.Errorf("unknown encoding kind %q (known: %s, %s, %s)", enc.Kind, EncodingBitmap, EncodingIndices, EncodingBinary)
	}
	return out, nil
}

// bitsPart returns the bytes of a U8 bit-vector part for n elements,
// checking its shape and that the bits beyond n are zero.
func bitsPart(part func(string) (safetensors.Tensor, error), name string, n int) ([]byte, error) {
	t, err := part(name)
	if err != nil {
		return nil, err
	}
	want := (n + 7) / 8
	if t.DType != safetensors.U8 || len(t.Shape) != 1 || t.Shape[0] != want || len(t.Data) != want {
		return nil, fmt.Errorf("%s is %s%v, want U8[%d] for %d elements", name, t.DType, t.Shape, want, n)
	}
	if n%8 != 0 && t.Data[want-1]>>(n%8) != 0 {
		return nil, fmt.Errorf("%s has bits set beyond element %d", name, n)
	}
	return t.Data, nil
}

// valuesPart returns the raw bytes of a rank-1 F32 part with count
// elements (any count if count < 0).
func valuesPart(part func(string) (safetensors.Tensor, error), name string, count int) ([]byte, error) {
	t, err := part(name)
	if err != nil {
		return nil, err
	}
	if t.DType != safetensors.F32 || len(t.Shape) != 1 || t.Shape[0] < 0 || len(t.Data) != 4*t.Shape[0] || (count >= 0 && t.Shape[0] != count) {
		want := "F32[n]"
		if count >= 0 {
			want = fmt.Sprintf("F32[%d]", count)
		}
		return nil, fmt.Errorf("%s is %s%v with %d bytes, want %s", name, t.DType, t.Shape, len(t.Data), want)
	}
	return t.Data, nil
}

// SaveCompressedModel writes the state dict of m to path atomically as
// SaveModel does, with sparse and binary tensors compressed (Compress).
// LoadModel, LoadStateDict and LoadWeights read such files directly;
// other readers expand them as docs/deploy-format.md describes.
func SaveCompressedModel(path string, m nn.Module, metadata map[string]string) error {
	f := StateDict(m, "")
	if len(metadata) > 0 {
		f.Metadata = maps.Clone(metadata)
	}
	c, err := Compress(f)
	if err != nil {
		return err
	}
	if err := safetensors.WriteFileAtomic(path, c); err != nil {
		return fmt.Errorf("checkpoint: saving compressed model: %w", err)
	}
	return nil
}
