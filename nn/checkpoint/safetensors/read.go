// Package safetensors reads and writes the safetensors tensor file format
// used by Hugging Face and PyTorch checkpoints.
//
// A safetensors file is an 8-byte little-endian unsigned header length N,
// then N bytes of UTF-8 JSON (padded with trailing spaces so that 8+N is a
// multiple of 8), then the tensor data. The JSON object maps each tensor
// name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
// where the offsets are byte positions relative to the start of the data;
// an optional "__metadata__" entry maps strings to strings. Tensor data is
// little-endian, row-major and packed: the tensors tile the data section
// without gaps or overlaps.
//
// Read and Parse validate every part of a file and never panic on corrupt
// input; their errors are *FormatError values that say what was wrong and
// in which tensor. Write and WriteFileAtomic produce files in the layout
// of the reference Rust implementation.
//
// The package depends only on the standard library and not on package
// autograd, so autograd's own tests can use it for fixtures.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/proxgen/proxgen/internal/regfile"
)

// MaxHeaderSize is the largest header length Read accepts, as in the
// reference implementation; it protects against absurd allocations.
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header entry that holds the metadata.
const metadataKey = "__metadata__"

// File is the content of a safetensors file.
type File struct {
	// Metadata holds the free-form string pairs of the "__metadata__"
	// entry; it is nil when the file has none.
	Metadata map[string]string
	// Tensors maps each tensor name to its tensor.
	Tensors map[string]Tensor
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tensors))
	for name := range f.Tensors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Set stores t under name, creating the Tensors map if needed.
func (f *File) Set(name string, t Tensor) {
	if f.Tensors == nil {
		f.Tensors = make(map[string]Tensor)
	}
	f.Tensors[name] = t
}

// Float32 returns the elements and shape of the tensor called name
// converted as by Tensor.Float32, or an error if there is no such tensor
// or it cannot be converted.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: no tensor %q", name)
	}
	data, err := t.Float32()
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
	}
	return data, t.Shape, nil
}

// A FormatError reports that the bytes being read are not a valid
// safetensors file.
type FormatError struct {
	File   string // the file name when known (set by ReadFile), else ""
	Tensor string // the tensor the problem concerns, if it concerns one
	Msg    string // what was wrong
}

// Error returns the message with the file and tensor it concerns.
func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	return b.String()
}

func formatErr(tensor, format string, args ...any) error {
	return &FormatError{Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
}

// Parse decodes a safetensors file held in memory. The returned tensors
// own their data; they do not alias b.
func Parse(b []byte) (*File, error) {
	return Read(bytes.NewReader(b), int64(len(b)))
}

// ReadFile reads and validates the safetensors file at path. Errors name
// the path.
func ReadFile(path string) (*File, error) {
	// Opened non-blocking and checked to be a regular file: a FIFO or a
	// device at path is an error, not a read that never ends.
	fh, st, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fh.Close()
	f, err := Read(fh, st.Size())
	if err != nil {
		if fe, ok := err.(*FormatError); ok {
			fe.File = path
			return nil, fe
		}
		return nil, fmt.Errorf("safetensors: reading %s: %w", path, err)
	}
	return f, nil
}

// readFull reads exactly len(buf) bytes at off, reporting a short read as
// a FormatError (the source was shorter than its stated size).
func readFull(r io.ReaderAt, buf []byte, off int64, what string) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return formatErr("", "%s: got %d of %d bytes at offset %d", what, n, len(buf), off)
	}
	return err
}

// Read decodes the size-byte safetensors file r. It reads the header,
// validates it completely, then reads the data section with one read.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, formatErr("", "file is %d bytes, too short for the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := readFull(r, lenBuf[:], 0, "reading header length"); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, formatErr("", "header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, formatErr("", "header length %d exceeds the %d bytes that follow it", n, size-8)
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8, "reading header"); err != nil {
		return nil, err
	}
	dataLen := size - 8 - int64(n)
	entries, meta, err := parseHeader(hdr)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(entries, dataLen); err != nil {
		return nil, err
	}
	data := make([]byte, dataLen)
	if err := readFull(r, data, 8+int64(n), "reading tensor data"); err != nil {
		return nil, err
	}
	f := &File{Metadata: meta, Tensors: make(map[string]Tensor, len(entries))}
	for _, e := range entries {
		f.Tensors[e.name] = Tensor{DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
	}
	if err := f.verify(entries); err != nil {
		return nil, err
	}
	return f, nil
}

// verify checks the seal of a file (see ChecksumKey and SealKey), whose
// tensors are entries, and removes it from the metadata. A file without
// any trace of a seal (written by PyTorch, or by this engine before it
// sealed files) passes unchecked. A file with a trace of one — SealKey, a
// ChecksumKey entry whatever its value, or a key or value that matches
// either but for case (a damaged seal) — passes only with a valid seal:
// damage to the seal itself cannot turn the check off.
func (f *File) verify(entries []entry) error {
	stored, ok := f.Metadata[ChecksumKey]
	if !ok {
		for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
			v := f.Metadata[k]
			switch {
			case k == SealKey:
				return formatErr("", "metadata %q marks the file as sealed but it has no %q entry; the file is corrupt", SealKey, ChecksumKey)
			case strings.Contains(strings.ToLower(k), ChecksumKey) || strings.EqualFold(k, SealKey) ||
				strings.HasPrefix(strings.ToLower(v), strings.TrimSuffix(checksumPrefix, ":")):
				return formatErr("", "metadata %q: %q looks like a damaged seal (a seal is %q: %q and 8 hexadecimal digits); the file is corrupt", k, v, ChecksumKey, checksumPrefix)
			}
		}
		return nil
	}
	hex, ok := strings.CutPrefix(stored, checksumPrefix)
	want, err := strconv.ParseUint(hex, 16, 32)
	if !ok || err != nil || len(hex) != 8 {
		return formatErr("", "metadata %q is %q, want %q and 8 hexadecimal digits; the seal is damaged or the file was not sealed by this engine", ChecksumKey, stored, checksumPrefix)
	}
	delete(f.Metadata, ChecksumKey)
	if len(f.Metadata) == 0 {
		f.Metadata = nil
	}
	byOffset := slices.Clone(entries)
	slices.SortFunc(byOffset, func(a, b entry) int { return cmp.Compare(a.begin, b.begin) })
	names := make([]string, len(byOffset))
	for i, e := range byOffset {
		names[i] = e.name
	}
	if got := f.checksum(names); got != uint32(want) {
		return formatErr("", "checksum mismatch: the header and data hash to %s%08x, the file records %s; the file is corrupt", checksumPrefix, got, stored)
	}
	delete(f.Metadata, SealKey)
	if len(f.Metadata) == 0 {
		f.Metadata = nil
	}
	return nil
}

// entry is one tensor's header record.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end int64
}

// parseHeader decodes and checks the JSON header: duplicate keys, types
// of every field, known dtypes, shape and offset values, and that each
// tensor's byte range matches its dtype and shape.
func parseHeader(hdr []byte) ([]entry, map[string]string, error) {
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, formatErr("", "header does not start with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, nil, formatErr("", "header is not valid UTF-8")
	}
	var entries []entry
	var meta map[string]string
	err := eachField(hdr, true, func(key string, val json.RawMessage) error {
		if key == metadataKey {
			m, err := parseMetadata(val)
			if err != nil {
				return formatErr("", "%s: %v", metadataKey, err)
			}
			meta = m
			return nil
		}
		e, err := parseEntry(key, val)
		if err != nil {
			return formatErr(key, "%v", err)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		if _, ok := err.(*FormatError); ok {
			return nil, nil, err
		}
		return nil, nil, formatErr("", "header JSON: %v", err)
	}
	return entries, meta, nil
}

// eachField calls fn for each member of the JSON object raw in order,
// rejecting duplicate keys. If whole is set, anything but whitespace after
// the object is an error (the header's own padding is whitespace).
func eachField(raw []byte, whole bool, fn func(key string, val json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want a JSON object, got %s", brief(raw))
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is not a string")
		}
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("value of %q: %w", key, err)
		}
		if err := fn(key, val); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	if whole {
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("unexpected data after the header object")
		}
	}
	return nil
}

// brief returns raw shortened for an error message.
func brief(raw []byte) string {
	const max = 40
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}

// parseMetadata decodes the "__metadata__" value: null or an object whose
// values are all strings.
func parseMetadata(val json.RawMessage) (map[string]string, error) {
	if string(val) == "null" {
		return nil, nil
	}
	meta := make(map[string]string)
	err := eachField(val, false, func(key string, v json.RawMessage) error {
		if len(v) == 0 || v[0] != '"' {
			return fmt.Errorf("value of %q is %s, want a string", key, brief(v))
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("value of %q: %w", key, err)
		}
		meta[key] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return meta, nil
}

// parseInts decodes a JSON array of non-negative integers.
func parseInts(v json.RawMessage) ([]int64, bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var xs []int64
	if err := json.Unmarshal(v, &xs); err != nil {
		return nil, false
	}
	for _, x := range xs {
		if x < 0 {
			return nil, false
		}
	}
	return xs, true
}

// parseEntry decodes one tensor record and checks it on its own.
func parseEntry(name string, val json.RawMessage) (entry, error) {
	e := entry{name: name}
	var haveDType, haveShape, haveOffsets bool
	err := eachField(val, false, func(key string, v json.RawMessage) error {
		switch key {
		case "dtype":
			var s string
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
				return fmt.Errorf("dtype is %s, want a string", brief(v))
			}
			e.dtype, haveDType = DType(s), true
		case "shape":
			xs, ok := parseInts(v)
			if !ok {
				return fmt.Errorf("shape is %s, want an array of non-negative integers", brief(v))
			}
			e.shape = make([]int, len(xs))
			for i, x := range xs {
				e.shape[i] = int(x)
			}
			haveShape = true
		case "data_offsets":
			xs, ok := parseInts(v)
			if !ok || len(xs) != 2 {
				return fmt.Errorf("data_offsets is %s, want [begin, end] with non-negative integers", brief(v))
			}
			e.begin, e.end, haveOffsets = xs[0], xs[1], true
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	switch {
	case !haveDType:
		return e, errors.New("missing dtype")
	case !haveShape:
		return e, errors.New("missing shape")
	case !haveOffsets:
		return e, errors.New("missing data_offsets")
	}
	size := e.dtype.Size()
	if size == 0 {
		return e, fmt.Errorf("unknown dtype %q", string(e.dtype))
	}
	if e.end < e.begin {
		return e, fmt.Errorf("data_offsets [%d, %d] end before they begin", e.begin, e.end)
	}
	n := numel(e.shape)
	if n < 0 || int64(n) > math.MaxInt64/int64(size) {
		return e, fmt.Errorf("shape %v of %s has too many elements", e.shape, e.dtype)
	}
	if want := int64(n) * int64(size); want != e.end-e.begin {
		return e, fmt.Errorf("shape %v of %s needs %d bytes, data_offsets [%d, %d] give %d", e.shape, e.dtype, want, e.begin, e.end, e.end-e.begin)
	}
	return e, nil
}

// checkLayout checks that the tensors tile [0, dataLen) exactly: no tensor
// outside the data, no overlaps, no gaps and no trailing bytes. It sorts
// entries by offset.
func checkLayout(entries []entry, dataLen int64) error {
	slices.SortFunc(entries, func(a, b entry) int {
		if a.begin != b.begin {
			return cmp.Compare(a.begin, b.begin)
		}
		if a.end != b.end {
			return cmp.Compare(a.end, b.end)
		}
		return strings.Compare(a.name, b.name)
	})
	var pos int64
	prev := ""
	for _, e := range entries {
		if e.end > dataLen {
			return formatErr(e.name, "data_offsets [%d, %d] run past the end of the %d-byte data section", e.begin, e.end, dataLen)
		}
		if e.begin < pos {
			return formatErr(e.name, "data_offsets [%d, %d] overlap tensor %q, which ends at %d", e.begin, e.end, prev, pos)
		}
		if e.begin > pos {
			if prev == "" {
				return formatErr(e.name, "data_offsets [%d, %d] leave bytes [0, %d) of the data section unused", e.begin, e.end, e.begin)
			}
			return formatErr(e.name, "data_offsets [%d, %d] leave a gap after tensor %q, which ends at %d", e.begin, e.end, prev, pos)
		}
		pos, prev = e.end, e.name
	}
	if pos != dataLen {
		return formatErr("", "tensors cover %d bytes but the data section has %d", pos, dataLen)
	}
	return nil
}
