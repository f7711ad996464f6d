package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var allDTypes = []DType{BOOL, U8, I8, F8E5M2, F8E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, C64}

// equalFiles reports whether a and b hold the same tensors and metadata
// (a nil and an empty metadata map count as equal).
func equalFiles(a, b *File) bool {
	if len(a.Metadata) != len(b.Metadata) || len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for k, v := range a.Metadata {
		if w, ok := b.Metadata[k]; !ok || w != v {
			return false
		}
	}
	for name, t := range a.Tensors {
		u, ok := b.Tensors[name]
		if !ok || t.DType != u.DType || !bytes.Equal(t.Data, u.Data) || len(t.Shape) != len(u.Shape) {
			return false
		}
		for i := range t.Shape {
			if t.Shape[i] != u.Shape[i] {
				return false
			}
		}
	}
	return true
}

// randomFile returns a file with tensors of every dtype and random shapes,
// including rank 0 and zero-size tensors, filled with random bytes (BOOL
// with 0 and 1).
func randomFile(rng *rand.Rand) *File {
	f := &File{Metadata: map[string]string{"seed": "x", "unicode": "\u00e9\u4e2d", "html": "<a&b>"}}
	for i, dt := range allDTypes {
		rank := rng.IntN(4)
		shape := make([]int, rank)
		for j := range shape {
			shape[j] = rng.IntN(4) // zero allowed
		}
		n := numel(shape)
		data := make([]byte, n*dt.Size())
		for j := range data {
			data[j] = byte(rng.Uint32())
			if dt == BOOL {
				data[j] &= 1
			}
		}
		f.Set(string(rune('a'+i))+"."+string(dt), Tensor{DType: dt, Shape: shape, Data: data})
	}
	return f
}

func TestRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := randomFile(rng)
		b, err := Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(b)
		if (8+n)%8 != 0 {
			t.Errorf("seed %d: header length %d: 8+N not a multiple of 8", seed, n)
		}
		g, err := Parse(b)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !equalFiles(f, g) {
			t.Fatalf("seed %d: round trip changed the file", seed)
		}
		// Each tensor starts at a file offset that is a multiple of its
		// element size.
		entries, _, err := parseHeader(b[8 : 8+n])
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if (8+int64(n)+e.begin)%int64(e.dtype.Size()) != 0 {
				t.Errorf("seed %d: tensor %q of %s at misaligned file offset %d", seed, e.name, e.dtype, 8+int64(n)+e.begin)
			}
		}
		// Writing again gives identical bytes.
		b2, err := Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("seed %d: Marshal is not deterministic", seed)
		}
	}
}

// handMade is a file written out byte by byte: tensors "b" (F32 [2] =
// {1, -2}) and "a" (I64 rank 0 = 5), metadata {"k": "v"}. Write orders
// I64 before F32 and pads the 104-byte JSON with no spaces (8+104 = 112).
var handMadeJSON = `{"__metadata__":{"k":"v"},"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`

func handMade() []byte {
	hdr := handMadeJSON
	for (8+len(hdr))%8 != 0 {
		hdr += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	b = append(b, 5, 0, 0, 0, 0, 0, 0, 0) // int64 5
	b = append(b, 0, 0, 0x80, 0x3f)       // float32 1
	b = append(b, 0, 0, 0, 0xc0)          // float32 -2
	return b
}

func TestHandMadeBytes(t *testing.T) {
	b := handMade()
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, map[string]string{"k": "v"}) {
		t.Errorf("metadata = %v", f.Metadata)
	}
	got, shape, err := f.Float32("b")
	if err != nil || !reflect.DeepEqual(got, []float32{1, -2}) || !reflect.DeepEqual(shape, []int{2}) {
		t.Errorf("b = %v %v %v", got, shape, err)
	}
	a := f.Tensors["a"]
	ints, err := a.Int64()
	if err != nil || !reflect.DeepEqual(ints, []int64{5}) || len(a.Shape) != 0 || a.Numel() != 1 {
		t.Errorf("a = %v shape %v err %v", ints, a.Shape, err)
	}
	out, err := Marshal(&File{
		Metadata: map[string]string{"k": "v"},
		Tensors: map[string]Tensor{
			"b": FromFloat32([]int{2}, []float32{1, -2}),
			"a": FromInt64(nil, []int64{5}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Errorf("Marshal =\n%q\nwant\n%q", out, b)
	}
	if _, _, err := f.Float32("missing"); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("Float32(missing) error = %v", err)
	}
}

// build returns a file with the given raw header (unpadded) and data.
func build(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func TestCorrupt(t *testing.T) {
	f32 := func(offs string) string {
		return `{"x":{"dtype":"F32","shape":[2],"data_offsets":` + offs + `}}`
	}
	eight := make([]byte, 8)
	tests := []struct {
		name, want string
		in         []byte
	}{
		{"empty", "too short", nil},
		{"seven bytes", "too short", make([]byte, 7)},
		{"huge header length", "exceeds the limit", binary.LittleEndian.AppendUint64(nil, 1<<63)},
		{"header over limit", "exceeds the limit", binary.LittleEndian.AppendUint64(nil, MaxHeaderSize+1)},
		{"header past end", "exceeds the 4 bytes", append(binary.LittleEndian.AppendUint64(nil, 5), "{}  "...)},
		{"empty header", "does not start", build("", nil)},
		{"not an object", "does not start", build(`["x"]`, nil)},
		{"leading space", "does not start", build(` {}`, nil)},
		{"bad json", "header JSON", build(`{"x":}`, nil)},
		{"truncated json", "header JSON", build(`{"x":{"dtype":"F32"`, nil)},
		{"trailing garbage", "after the header", build(`{} x`, nil)},
		{"second object", "after the header", build(`{}{}`, nil)},
		{"bad utf8", "UTF-8", build("{\"\xff\":1}", nil)},
		{"duplicate tensor", `duplicate key "x"`, build(`{"x":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}`, eight)},
		{"duplicate field", `duplicate key "shape"`, build(`{"x":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"tensor not object", "want a JSON object", build(`{"x":[1]}`, nil)},
		{"unknown dtype", `unknown dtype "F128"`, build(`{"x":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16))},
		{"dtype not string", "dtype is 4", build(`{"x":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"dtype null", "dtype is null", build(`{"x":{"dtype":null,"shape":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"missing dtype", "missing dtype", build(`{"x":{"shape":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"missing shape", "missing shape", build(`{"x":{"dtype":"F32","data_offsets":[0,4]}}`, eight[:4])},
		{"missing offsets", "missing data_offsets", build(`{"x":{"dtype":"F32","shape":[1]}}`, eight[:4])},
		{"unknown field", `unknown field "strides"`, build(`{"x":{"dtype":"F32","shape":[1],"strides":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"negative dim", "shape is [-1]", build(`{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, eight[:4])},
		{"fractional dim", "shape is [1.5]", build(`{"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, eight[:4])},
		{"shape null", "shape is null", build(`{"x":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, eight[:4])},
		{"shape overflow", "too many elements", build(`{"x":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}}`, eight)},
		{"huge dim", "shape is", build(`{"x":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, eight)},
		{"one offset", "data_offsets is [0]", build(f32(`[0]`), eight)},
		{"three offsets", "data_offsets is [0,8,8]", build(f32(`[0,8,8]`), eight)},
		{"negative offset", "data_offsets is [-8,0]", build(f32(`[-8,0]`), eight)},
		{"end before begin", "end before", build(f32(`[8,0]`), eight)},
		{"size mismatch", "needs 8 bytes", build(f32(`[0,12]`), make([]byte, 12))},
		{"too few bytes for shape", "needs 8 bytes, data_offsets [0, 4] give 4", build(f32(`[0,4]`), eight[:4])},
		{"past end of data", "run past the end", build(f32(`[0,8]`), eight[:4])},
		{"leading gap", "leave bytes [0, 4)", build(f32(`[4,12]`), make([]byte, 12))},
		{"trailing bytes", "cover 8 bytes but the data section has 9", build(f32(`[0,8]`), make([]byte, 9))},
		{"no tensors but data", "cover 0 bytes", build(`{}`, eight)},
		{"overlap", `overlap tensor "x"`, build(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight)},
		{"empty inside another", `overlap tensor "x"`, build(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, eight)},
		{"gap", `gap after tensor "x"`, build(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12))},
		{"metadata not object", "__metadata__", build(`{"__metadata__":[1]}`, nil)},
		{"metadata value not string", `value of "n" is 1`, build(`{"__metadata__":{"n":1}}`, nil)},
		{"metadata value null", `value of "n" is null`, build(`{"__metadata__":{"n":null}}`, nil)},
		{"metadata duplicate", `duplicate key "n"`, build(`{"__metadata__":{"n":"a","n":"b"}}`, nil)},
		{"duplicate metadata", `duplicate key "__metadata__"`, build(`{"__metadata__":{},"__metadata__":{}}`, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %v is a %T, want *FormatError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestErrorNamesTensorAndFile(t *testing.T) {
	in := build(`{"conv.weight":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8))
	path := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil {
		t.Fatal("ReadFile succeeded on a bad file")
	}
	msg := err.Error()
	for _, want := range []string{path, `tensor "conv.weight"`, "shape [3] of F32 needs 12 bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) error = %v, want ErrNotExist", err)
	}
	if _, err := ReadFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadFile(dir) error = %v", err)
	}
}

func TestEveryTruncationFails(t *testing.T) {
	b, err := Marshal(randomFile(rand.New(rand.NewPCG(3, 3))))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Parse(b[:n]); err == nil {
			t.Fatalf("Parse of the first %d of %d bytes succeeded", n, len(b))
		}
	}
	// Extra bytes at the end are rejected too.
	if _, err := Parse(append(b, 0)); err == nil {
		t.Fatal("Parse with a trailing byte succeeded")
	}
}

// shortReader claims a size larger than the data it has.
type shortReader struct{ b []byte }

func (r shortReader) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(r.b).ReadAt(p, off)
}

func TestReadShortSource(t *testing.T) {
	b := handMade()
	_, err := Read(shortReader{b[:len(b)-4]}, int64(len(b)))
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "reading tensor data") {
		t.Errorf("Read of a short source: %v", err)
	}
}

func TestReadDoesNotAlias(t *testing.T) {
	b := handMade()
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xff
	}
	if got, _, _ := f.Float32("b"); !reflect.DeepEqual(got, []float32{1, -2}) {
		t.Errorf("tensor changed with the input buffer: %v", got)
	}
	// Appending to one tensor's Data must not overwrite its neighbour.
	a := f.Tensors["a"]
	_ = append(a.Data, 9, 9, 9, 9)
	if got, _, _ := f.Float32("b"); !reflect.DeepEqual(got, []float32{1, -2}) {
		t.Errorf("append to a tensor clobbered the next: %v", got)
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name, want string
		f          *File
	}{
		{"short data", `tensor "x": shape [3] of F32 needs 12 bytes, Data has 8`, &File{Tensors: map[string]Tensor{"x": {DType: F32, Shape: []int{3}, Data: make([]byte, 8)}}}},
		{"unknown dtype", `unknown dtype "Q7"`, &File{Tensors: map[string]Tensor{"x": {DType: "Q7", Shape: []int{1}, Data: make([]byte, 1)}}}},
		{"negative dim", "invalid shape", &File{Tensors: map[string]Tensor{"x": {DType: U8, Shape: []int{-1}}}}},
		{"reserved name", "reserved", &File{Tensors: map[string]Tensor{"__metadata__": FromInt64(nil, []int64{1})}}},
		{"bad utf8 name", "UTF-8", &File{Tensors: map[string]Tensor{"\xff": FromInt64(nil, []int64{1})}}},
		{"bad utf8 metadata", "UTF-8", &File{Metadata: map[string]string{"k": "\xfe"}}},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		err := Write(&buf, tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Write error = %v, want %q", tc.name, err, tc.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: Write wrote %d bytes before failing", tc.name, buf.Len())
		}
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

func TestWriteWriterError(t *testing.T) {
	f := &File{Tensors: map[string]Tensor{"x": FromFloat32([]int{1}, []float32{1})}}
	if err := Write(&failWriter{0}, f); err == nil || !strings.Contains(err.Error(), "header: disk full") {
		t.Errorf("error = %v", err)
	}
	if err := Write(&failWriter{1}, f); err == nil || !strings.Contains(err.Error(), `tensor "x": disk full`) {
		t.Errorf("error = %v", err)
	}
}

func TestEmptyFile(t *testing.T) {
	b, err := Marshal(&File{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "\x08\x00\x00\x00\x00\x00\x00\x00{}      "; string(b) != want {
		t.Errorf("Marshal(empty) = %q, want %q", b, want)
	}
	f, err := Parse(b)
	if err != nil || len(f.Tensors) != 0 || f.Metadata != nil {
		t.Errorf("Parse(empty) = %+v, %v", f, err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	f1 := &File{Metadata: map[string]string{"step": "1"}, Tensors: map[string]Tensor{"w": FromFloat32([]int{2, 2}, []float32{1, 2, 3, 4})}}
	if err := WriteFileAtomic(path, f1); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f2 := &File{Tensors: map[string]Tensor{"w": FromFloat32([]int{1}, []float32{7})}}
	if err := WriteFileAtomic(path, f2); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil || !equalFiles(got, f2) {
		t.Fatalf("after overwrite: %v", err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("overwrite changed mode to %v", st.Mode().Perm())
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"ckpt.safetensors"}) {
		t.Errorf("directory holds %v", names)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		now, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(now, old) {
			t.Errorf("%s: old file clobbered (err %v)", what, err)
		}
		if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"ckpt.safetensors"}) {
			t.Errorf("%s: directory holds %v", what, names)
		}
	}

	// An invalid file fails before anything is written.
	bad := &File{Tensors: map[string]Tensor{"w": {DType: F32, Shape: []int{3}, Data: make([]byte, 4)}}}
	if err := WriteFileAtomic(path, bad); err == nil {
		t.Error("WriteFileAtomic of an invalid file succeeded")
	}
	unchanged("invalid file")

	// A real rename failure: the target is a non-empty directory.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(sub, f1); err == nil {
		t.Error("WriteFileAtomic onto a directory succeeded")
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"ckpt.safetensors", "sub"}) {
		t.Errorf("after writing onto a directory, directory holds %v", names)
	}
	// A missing directory.
	if err := WriteFileAtomic(filepath.Join(dir, "nodir", "x.safetensors"), f1); err == nil {
		t.Error("WriteFileAtomic into a missing directory succeeded")
	}
}

func TestConstructorsPanic(t *testing.T) {
	for name, fn := range map[string]func(){
		"FromFloat32":   func() { FromFloat32([]int{2, 3}, make([]float32, 5)) },
		"FromFloat64":   func() { FromFloat64([]int{2}, make([]float64, 3)) },
		"FromInt64":     func() { FromInt64(nil, make([]int64, 2)) },
		"FromFloat32As": func() { FromFloat32As(F16, []int{-1}, nil) },
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), name) {
					t.Errorf("%s: recovered %v, want a panic naming the function", name, r)
				}
			}()
			fn()
		}()
	}
	if _, err := FromFloat32As(I32, []int{1}, []float32{1}); err == nil {
		t.Error("FromFloat32As(I32) succeeded")
	}
}

func TestIntConversions(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		dt   DType
		data []byte
		want []int64
	}{
		{BOOL, []byte{0, 1, 1}, []int64{0, 1, 1}},
		{U8, []byte{0, 255}, []int64{0, 255}},
		{I8, []byte{0x80, 0x7f, 0xff}, []int64{-128, 127, -1}},
		{I16, le.AppendUint16(le.AppendUint16(nil, 0x8000), 3), []int64{-32768, 3}},
		{U16, le.AppendUint16(nil, 0xffff), []int64{65535}},
		{I32, le.AppendUint32(le.AppendUint32(nil, 0x80000000), 0x7fffffff), []int64{math.MinInt32, math.MaxInt32}},
		{U32, le.AppendUint32(nil, 0xffffffff), []int64{math.MaxUint32}},
		{I64, le.AppendUint64(le.AppendUint64(nil, 1<<63), 1<<62+1), []int64{math.MinInt64, 1<<62 + 1}},
		{U64, le.AppendUint64(nil, math.MaxInt64), []int64{math.MaxInt64}},
	}
	for _, tc := range tests {
		tt := Tensor{DType: tc.dt, Shape: []int{len(tc.want)}, Data: tc.data}
		got, err := tt.Int64()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s Int64 = %v, %v; want %v", tc.dt, got, err, tc.want)
		}
		f, err := tt.Float32()
		if err != nil {
			t.Errorf("%s Float32: %v", tc.dt, err)
		}
		d, err := tt.Float64()
		if err != nil {
			t.Errorf("%s Float64: %v", tc.dt, err)
		}
		for i, w := range tc.want {
			if f[i] != float32(w) || d[i] != float64(w) {
				t.Errorf("%s element %d: Float32 %v Float64 %v, want %d", tc.dt, i, f[i], d[i], w)
			}
		}
	}
	bad := []struct {
		t    Tensor
		want string
	}{
		{Tensor{DType: BOOL, Shape: []int{1}, Data: []byte{2}}, "byte value 2"},
		{Tensor{DType: U64, Shape: []int{1}, Data: le.AppendUint64(nil, 1<<63)}, "overflows int64"},
		{Tensor{DType: F32, Shape: []int{1}, Data: make([]byte, 4)}, "cannot convert F32"},
		{Tensor{DType: I64, Shape: []int{2}, Data: make([]byte, 8)}, "needs 16 bytes"},
	}
	for _, tc := range bad {
		if _, err := tc.t.Int64(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s Int64 error = %v, want %q", tc.t.DType, err, tc.want)
		}
	}
	if _, err := (Tensor{DType: C64, Shape: []int{1}, Data: make([]byte, 8)}).Float32(); err == nil {
		t.Error("C64 Float32 succeeded")
	}
	if _, err := (Tensor{DType: C64, Shape: []int{1}, Data: make([]byte, 8)}).Float64(); err == nil {
		t.Error("C64 Float64 succeeded")
	}
	if _, err := (Tensor{DType: F16, Shape: []int{2}, Data: make([]byte, 3)}).Float32(); err == nil {
		t.Error("Float32 with short Data succeeded")
	}
	big := Tensor{DType: U64, Shape: []int{1}, Data: le.AppendUint64(nil, math.MaxUint64)}
	if d, err := big.Float64(); err != nil || d[0] != math.MaxUint64 {
		t.Errorf("U64 max Float64 = %v, %v", d, err)
	}
}

func TestFloatConversions(t *testing.T) {
	vals := []float32{0, 1, -2.5, 1e-3, 65504, float32(math.Inf(-1))}
	for _, dt := range []DType{F32, F64, F16, BF16} {
		tt, err := FromFloat32As(dt, []int{2, 3}, vals)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			want := v
			switch dt {
			case F16:
				want = f16ToF32(f32ToF16(v))
			case BF16:
				want = bf16ToF32(f32ToBF16(v))
			}
			if got[i] != want {
				t.Errorf("%s element %d = %v, want %v", dt, i, got[i], want)
			}
		}
		d, err := tt.Float64()
		if err != nil || d[2] != float64(got[2]) {
			t.Errorf("%s Float64 = %v, %v", dt, d, err)
		}
	}
	big := FromFloat64([]int{2}, []float64{1e300, 1.0000000001})
	got, err := big.Float32()
	if err != nil || !math.IsInf(float64(got[0]), 1) || got[1] != 1 {
		t.Errorf("F64 -> F32 = %v, %v", got, err)
	}
	if d, _ := big.Float64(); d[1] != 1.0000000001 {
		t.Errorf("F64 Float64 = %v", d)
	}
}

// TestF16AllValues checks every binary16 value: decoding against a
// float64 formula, and that encoding the decoded value gives it back.
func TestF16AllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32(uint16(h))
		exp := h >> 10 & 0x1f
		mant := float64(h & 0x3ff)
		var want float64
		switch exp {
		case 0x1f:
			want = math.Inf(1)
			if mant != 0 {
				want = math.NaN()
			}
		case 0:
			want = math.Ldexp(mant, -24)
		default:
			want = math.Ldexp(1024+mant, exp-25)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("f16 %#04x decodes to %v, want NaN", h, f)
			}
			if back := f32ToF16(f); back&0x7e00 != 0x7e00 || back&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("f16 NaN %#04x re-encodes to %#04x", h, back)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("f16 %#04x decodes to %v, want %v", h, f, want)
		}
		if back := f32ToF16(f); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// nearestEven checks that code is the round-to-nearest-even encoding of x
// among its neighbours code-1 and code+1 (same sign), decoding with dec.
func nearestEven(x float64, code uint16, dec func(uint16) float32, maxFinite uint16) bool {
	mag := code & 0x7fff
	v := float64(dec(code))
	if math.IsInf(v, 0) {
		// Overflow: x must be at least halfway past the largest finite value.
		top := float64(dec(maxFinite))
		next := top + (top - float64(dec(maxFinite-1)))
		return math.Abs(x) >= (top+next)/2
	}
	d := math.Abs(x - v)
	for _, nb := range []uint16{mag - 1, mag + 1} {
		if nb > maxFinite+1 || mag == 0 && nb == 0xffff {
			continue
		}
		w := float64(dec(nb | code&0x8000))
		if math.IsInf(w, 0) {
			top := float64(dec(maxFinite))
			w = top + (top - float64(dec(maxFinite-1))) // the value infinity stands for
		}
		e := math.Abs(x - w)
		if e < d || e == d && mag&1 == 1 {
			return false
		}
	}
	return true
}

func TestF16BF16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 200000; i++ {
		bits := rng.Uint32()
		if i%2 == 0 { // concentrate on the F16 range and its subnormals
			bits = bits&0x80ffffff | uint32(100+rng.IntN(45))<<23
		}
		x := math.Float32frombits(bits)
		if math.IsNaN(float64(x)) {
			continue
		}
		h := f32ToF16(x)
		if (h&0x8000 != 0) != math.Signbit(float64(x)) {
			t.Fatalf("f32ToF16(%v) = %#04x has the wrong sign", x, h)
		}
		if !nearestEven(float64(x), h, f16ToF32, 0x7bff) {
			t.Fatalf("f32ToF16(%v) = %#04x (%v) is not the nearest-even value", x, h, f16ToF32(h))
		}
		b := f32ToBF16(x)
		if !nearestEven(float64(x), b, bf16ToF32, 0x7f7f) {
			t.Fatalf("f32ToBF16(%v) = %#04x (%v) is not the nearest-even value", x, b, bf16ToF32(b))
		}
	}
	for h := 0; h < 1<<16; h++ { // every bfloat16 value survives a round trip
		f := bf16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := f32ToBF16(f); back != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	if !math.IsNaN(float64(bf16ToF32(f32ToBF16(float32(math.NaN()))))) {
		t.Error("bf16 NaN did not survive")
	}
}

func TestF8(t *testing.T) {
	e4m3 := map[byte]float64{
		0x00: 0, 0x80: math.Copysign(0, -1), 0x01: math.Ldexp(1, -9), 0x07: 7 * math.Ldexp(1, -9),
		0x08: math.Ldexp(1, -6), 0x38: 1, 0x3c: 1.5, 0xb8: -1, 0x7e: 448, 0xfe: -448, 0x77: 240,
	}
	for x, want := range e4m3 {
		got := float64(f8e4m3ToF32(x))
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("E4M3 %#02x = %v, want %v", x, got, want)
		}
	}
	for _, x := range []byte{0x7f, 0xff} {
		if !math.IsNaN(float64(f8e4m3ToF32(x))) {
			t.Errorf("E4M3 %#02x is not NaN", x)
		}
	}
	e5m2 := map[byte]float64{0x00: 0, 0x3c: 1, 0x01: math.Ldexp(1, -16), 0x7b: 57344, 0xc0: -2, 0x7c: math.Inf(1), 0xfc: math.Inf(-1)}
	for x, want := range e5m2 {
		if got := float64(f8e5m2ToF32(x)); got != want {
			t.Errorf("E5M2 %#02x = %v, want %v", x, got, want)
		}
	}
	tt := Tensor{DType: F8E4M3, Shape: []int{2}, Data: []byte{0x38, 0x7e}}
	if got, err := tt.Float32(); err != nil || got[0] != 1 || got[1] != 448 {
		t.Errorf("E4M3 tensor = %v, %v", got, err)
	}
	tt = Tensor{DType: F8E5M2, Shape: []int{1}, Data: []byte{0xc0}}
	if got, err := tt.Float64(); err != nil || got[0] != -2 {
		t.Errorf("E5M2 tensor = %v, %v", got, err)
	}
}

// benchFile is a 4M-parameter F32 checkpoint of 8 tensors (16 MB).
func benchFile() *File {
	f := &File{}
	for i := 0; i < 8; i++ {
		f.Set(string(rune('a'+i)), FromFloat32([]int{512, 1024}, make([]float32, 512*1024)))
	}
	return f
}

func BenchmarkMarshal(b *testing.B) {
	f := benchFile()
	b.SetBytes(16 << 20)
	for b.Loop() {
		if _, err := Marshal(f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	raw, err := Marshal(benchFile())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloat32(b *testing.B) {
	vals := make([]float32, 1<<20)
	for i := range vals {
		vals[i] = float32(i) * 1e-3
	}
	for _, dt := range []DType{F32, F16, BF16} {
		t, err := FromFloat32As(dt, []int{len(vals)}, vals)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(dt), func(b *testing.B) {
			b.SetBytes(int64(4 * len(vals)))
			for b.Loop() {
				if _, err := t.Float32(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMarshalExactSize checks that Marshal returns what Write writes, in a
// buffer of exactly that size, and rejects what Write rejects.
func TestMarshalExactSize(t *testing.T) {
	f := &File{Tensors: map[string]Tensor{}, Metadata: map[string]string{"k": "v"}}
	f.Set("a", FromFloat32([]int{3, 5}, make([]float32, 15)))
	f.Set("b", FromInt64([]int{2}, []int64{1, 2}))
	f.Set("c", FromFloat32(nil, []float32{1}))
	var w bytes.Buffer
	if err := Write(&w, f); err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, w.Bytes()) || cap(b) != len(b) {
		t.Fatalf("Marshal: %d bytes (cap %d), equal to Write's %d bytes: %v", len(b), cap(b), w.Len(), bytes.Equal(b, w.Bytes()))
	}
	f.Set("__metadata__", FromFloat32(nil, []float32{1}))
	if _, err := Marshal(f); err == nil {
		t.Fatal("Marshal accepted a tensor named __metadata__")
	}
}
