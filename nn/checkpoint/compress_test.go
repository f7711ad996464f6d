package checkpoint

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/optim"
)

// compressFixture returns a file with one tensor per case Compress
// distinguishes, and the encoding each should get ("" for dense).
func compressFixture(rng *rand.Rand) (*safetensors.File, map[string]string) {
	f := &safetensors.File{Metadata: map[string]string{"arch": "test"}}
	want := map[string]string{}
	add := func(name, kind string, shape []int, v []float32) {
		f.Set(name, safetensors.FromFloat32(shape, v))
		want[name] = kind
	}
	normal := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	sparse := func(n int, zeros float64) []float32 {
		v := normal(n)
		for i := range v {
			if rng.Float64() < zeros {
				v[i] = 0
			}
		}
		return v
	}
	add("dense", "", []int{16, 8, 3, 3}, normal(1152))
	add("half", EncodingBitmap, []int{32, 16, 3, 3}, sparse(4608, 0.5))
	add("very_sparse", EncodingIndices, []int{32, 16, 3, 3}, sparse(4608, 0.97))
	big := sparse(70000, 0.99) // more than 65,536 elements: U32 indices
	big[69999] = 3
	add("big", EncodingIndices, []int{70000}, big)
	add("all_zero", EncodingIndices, []int{64, 64}, make([]float32, 4096))
	// −0 is not a zero (it is stored as a value); NaN keeps its bits.
	odd := sparse(2001, 0.8)
	odd[3], odd[7] = float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00123)
	add("odd", EncodingBitmap, []int{2001}, odd)
	bin := make([]float32, 16*16*9) // ±1, as BinaryConnect and HardQuantize leave them
	for i := range bin {
		bin[i] = optim.Sign(float32(rng.NormFloat64()))
	}
	add("binary", EncodingBinary, []int{16, 16, 3, 3}, bin)
	perFilter := make([]float32, 10*64)
	for i := range perFilter {
		s := float32(0.01 * float64(1+i/64))
		if rng.IntN(2) == 0 {
			s = -s
		}
		perFilter[i] = s
	}
	add("binary_per_filter", EncodingBinary, []int{10, 64}, perFilter)
	add("small", "", []int{3}, []float32{0, 0, 1})
	add("scalar", "", nil, []float32{0})
	add("empty", "", []int{0, 4}, nil)
	f.Set("counter", safetensors.FromInt64(nil, []int64{7}))
	want["counter"] = ""
	return f, want
}

// TestCompressRoundTrip compresses the fixture, writes and reads it back
// and expands it: every tensor must come back bit for bit, each encoded
// as expected, and the file must be smaller.
func TestCompressRoundTrip(t *testing.T) {
	f, want := compressFixture(rand.New(rand.NewPCG(31, 32)))
	c, err := Compress(f)
	if err != nil {
		t.Fatal(err)
	}
	for name, kind := range want {
		got := ""
		if e, ok := c.Metadata[EncodingKeyPrefix+name]; ok {
			got = e[strings.Index(e, `"kind":"`)+8:]
			got = got[:strings.IndexByte(got, '"')]
		}
		if got != kind {
			t.Errorf("%s: encoded as %q, want %q", name, got, kind)
		}
	}
	if !IsCompressed(c) || IsCompressed(f) {
		t.Error("IsCompressed wrong")
	}
	raw, err := safetensors.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dense, err := safetensors.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) >= len(dense)/2 {
		t.Errorf("compressed file %d bytes, dense %d: want less than half", len(raw), len(dense))
	}
	back, err := safetensors.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Expand(back)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Names(), f.Names()) {
		t.Fatalf("names %v, want %v", e.Names(), f.Names())
	}
	for _, name := range f.Names() {
		a, b := f.Tensors[name], e.Tensors[name]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
			t.Errorf("%s: %s%v after the round trip, want %s%v (data equal: %v)", name, b.DType, b.Shape, a.DType, a.Shape, bytes.Equal(a.Data, b.Data))
		}
	}
	if len(e.Metadata) != 1 || e.Metadata["arch"] != "test" {
		t.Errorf("metadata after Expand: %v", e.Metadata)
	}
	if _, err := Compress(c); err == nil {
		t.Error("Compress accepted a compressed file")
	}
}

// TestSaveCompressedModelLoads saves a model with sparse and binary
// weights compressed and loads it with LoadModel: every tensor must equal
// the original bit for bit, and the file must be smaller than SaveModel's.
func TestSaveCompressedModelLoads(t *testing.T) {
	rng := newRng(33)
	m := tiny(t, 1)
	for i, p := range m.Params() {
		if p.T.Rank() < 2 {
			continue
		}
		for j := range p.T.Data {
			switch {
			case i%2 == 0 && rng.Float64() < 0.8:
				p.T.Data[j] = 0
			case i%2 == 1:
				p.T.Data[j] = optim.Sign(p.T.Data[j])
			}
		}
	}
	dir := t.TempDir()
	dense, small := filepath.Join(dir, "dense.safetensors"), filepath.Join(dir, "small.safetensors")
	if err := SaveModel(dense, m, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := SaveCompressedModel(small, m, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	sd, _ := os.Stat(dense)
	ss, _ := os.Stat(small)
	if ss.Size() >= sd.Size()/2 {
		t.Errorf("compressed %d bytes, dense %d", ss.Size(), sd.Size())
	}
	m2 := tiny(t, 2)
	meta, err := LoadModel(small, m2)
	if err != nil {
		t.Fatal(err)
	}
	if meta["k"] != "v" {
		t.Errorf("metadata %v", meta)
	}
	want, got := StateDict(m, ""), StateDict(m2, "")
	for name, a := range want.Tensors {
		if !bytes.Equal(a.Data, got.Tensors[name].Data) {
			t.Errorf("%s differs after loading the compressed file", name)
		}
	}
}

// corruptions maps a description to a change of a compressed fixture and
// a fragment of the error Expand must return.
var corruptions = []struct {
	name, want string
	change     func(f *safetensors.File)
}{
	{"missing part", `part "half@values" is missing`, func(f *safetensors.File) { delete(f.Tensors, "half@values") }},
	{"orphan part", `no "encoding:ghost" metadata`, func(f *safetensors.File) {
		f.Set("ghost@values", safetensors.FromFloat32([]int{1}, []float32{1}))
	}},
	{"bad json", "bad encoding metadata", func(f *safetensors.File) { f.Metadata["encoding:half"] = "{" }},
	{"unknown kind", `unknown encoding kind "zip"`, func(f *safetensors.File) {
		f.Metadata["encoding:half"] = `{"kind":"zip","dtype":"F32","shape":[4608]}`
	}},
	{"dtype", `dtype "F16"`, func(f *safetensors.File) {
		f.Metadata["encoding:half"] = `{"kind":"sparse-bitmap","dtype":"F16","shape":[32,16,3,3]}`
	}},
	{"negative shape", "invalid shape", func(f *safetensors.File) {
		f.Metadata["encoding:very_sparse"] = `{"kind":"sparse-indices","dtype":"F32","shape":[-1]}`
	}},
	{"huge shape", "invalid shape", func(f *safetensors.File) {
		f.Metadata["encoding:very_sparse"] = `{"kind":"sparse-indices","dtype":"F32","shape":[1000000,1000000]}`
	}},
	{"wrong shape for bitmap", "bitmap is U8[576], want U8[72]", func(f *safetensors.File) {
		f.Metadata["encoding:half"] = `{"kind":"sparse-bitmap","dtype":"F32","shape":[576]}`
	}},
	{"bitmap count", "values has", func(f *safetensors.File) {
		t := f.Tensors["half@bitmap"]
		t.Data = slices.Clone(t.Data)
		t.Data[0] ^= 1
		f.Tensors["half@bitmap"] = t
	}},
	{"stray bits", "bits set beyond element 2001", func(f *safetensors.File) {
		t := f.Tensors["odd@bitmap"]
		t.Data = slices.Clone(t.Data)
		t.Data[len(t.Data)-1] |= 0x80
		f.Tensors["odd@bitmap"] = t
	}},
	{"unsorted indices", "must increase strictly", func(f *safetensors.File) {
		t := f.Tensors["very_sparse@indices"]
		t.Data = slices.Clone(t.Data)
		t.Data[0], t.Data[1], t.Data[2], t.Data[3] = t.Data[2], t.Data[3], t.Data[0], t.Data[1]
		f.Tensors["very_sparse@indices"] = t
	}},
	{"index out of range", "stay below 100", func(f *safetensors.File) {
		f.Metadata["encoding:very_sparse"] = `{"kind":"sparse-indices","dtype":"F32","shape":[100]}`
	}},
	{"index dtype", "want U16 or U32", func(f *safetensors.File) {
		t := f.Tensors["very_sparse@indices"]
		t.DType = safetensors.I16
		f.Tensors["very_sparse@indices"] = t
	}},
	{"values count", "want F32[", func(f *safetensors.File) {
		t := f.Tensors["very_sparse@values"]
		t.Shape = []int{t.Shape[0] - 1}
		t.Data = t.Data[:len(t.Data)-4]
		f.Tensors["very_sparse@values"] = t
	}},
	{"zero scale", "positive finite", func(f *safetensors.File) {
		f.Tensors["binary@scale"] = safetensors.FromFloat32([]int{1}, []float32{0})
	}},
	{"scale count", "want 1 or one per filter", func(f *safetensors.File) {
		f.Tensors["binary@scale"] = safetensors.FromFloat32([]int{3}, []float32{1, 1, 1})
	}},
	{"no scales", "want 1 or one per filter", func(f *safetensors.File) {
		f.Tensors["binary@scale"] = safetensors.FromFloat32([]int{0}, nil)
	}},
	{"total over MaxExpanded", "expand to at most 268435456 elements together", func(f *safetensors.File) {
		f.Metadata["encoding:very_sparse"] = `{"kind":"sparse-indices","dtype":"F32","shape":[134217729]}`
		f.Metadata["encoding:half"] = `{"kind":"sparse-bitmap","dtype":"F32","shape":[134217728]}`
	}},
	{"dense duplicate", "also stored densely", func(f *safetensors.File) {
		f.Set("half", safetensors.FromFloat32([]int{1}, []float32{1}))
	}},
}

// TestExpandRejectsCorruptFiles checks that every corruption gives an
// error naming what is wrong, through LoadStateDict as well.
func TestExpandRejectsCorruptFiles(t *testing.T) {
	for _, tc := range corruptions {
		f, _ := compressFixture(rand.New(rand.NewPCG(31, 32)))
		c, err := Compress(f)
		if err != nil {
			t.Fatal(err)
		}
		tc.change(c)
		_, err = Expand(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if err := LoadStateDict(c, tiny(t, 1), LoadOptions{NonStrict: true}); err == nil {
			t.Errorf("%s: LoadStateDict accepted the corrupt file", tc.name)
		}
	}
}

// FuzzExpand checks that Expand never panics on any file Parse accepts,
// and that what it accepts has no parts left. Run it with
//
//	go test ./nn/checkpoint -run '^$' -fuzz FuzzExpand -fuzztime 60s
func FuzzExpand(f *testing.F) {
	fx, _ := compressFixture(rand.New(rand.NewPCG(31, 32)))
	c, err := Compress(fx)
	if err != nil {
		f.Fatal(err)
	}
	for _, tc := range corruptions[:6] {
		cc, _ := Compress(fx)
		tc.change(cc)
		if b, err := safetensors.Marshal(cc); err == nil {
			f.Add(b)
		}
	}
	b, err := safetensors.Marshal(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// Small valid files, one per encoding and a mix, so that the fuzzer
	// mutates inputs it can run and minimise quickly (the fixture above is
	// over 100 KB) instead of spending its budget on one large input.
	rng := rand.New(rand.NewPCG(5, 6))
	small := func(n int, zeros float64, sign bool) []float32 {
		v := make([]float32, n)
		for i := range v {
			switch {
			case rng.Float64() < zeros:
			case sign && rng.IntN(2) == 0:
				v[i] = -0.25
			case sign:
				v[i] = 0.25
			default:
				v[i] = float32(rng.NormFloat64())
			}
		}
		return v
	}
	for _, tensors := range [][]struct {
		shape []int
		v     []float32
	}{
		{{[]int{4}, small(4, 0, false)}},
		{{[]int{8, 8}, small(64, 0.5, false)}},
		{{[]int{100}, small(100, 0.97, false)}},
		{{[]int{4, 2, 3, 3}, small(72, 0, true)}},
		{{[]int{3}, small(3, 0, false)}, {[]int{16}, small(16, 0.9, false)}, {[]int{2, 8}, small(16, 0, true)}, {[]int{4, 4}, make([]float32, 16)}},
	} {
		sf := &safetensors.File{Metadata: map[string]string{"arch": "seed"}}
		for i, tn := range tensors {
			sf.Set(fmt.Sprint("t", i), safetensors.FromFloat32(tn.shape, tn.v))
		}
		sc, err := Compress(sf)
		if err != nil {
			f.Fatal(err)
		}
		b, err := safetensors.Marshal(sc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := safetensors.Parse(b)
		if err != nil {
			return
		}
		e, err := Expand(file)
		if err != nil {
			return
		}
		if IsCompressed(e) {
			t.Fatal("Expand left encoding metadata")
		}
		for name, tt := range e.Tensors {
			if IsCompressed(file) && tt.DType == safetensors.F32 && len(tt.Data) != 4*tt.Numel() {
				t.Fatalf("%s: %d bytes for shape %v", name, len(tt.Data), tt.Shape)
			}
		}
	})
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLoadChecksBeforeExpanding: LoadStateDict checks the names of the
// compressed tensors against the model, and their shapes against the
// model's, before it expands any: a binary-encoded tensor of 2^24
// elements (64 MiB expanded, 2 MiB stored) that the model does not have,
// or stored under a model tensor's name with another shape, is refused
// (ignored, when NonStrict) without being expanded. The audit's file of
// three such tensors of 2^28 elements took 3.3 GB to refuse.
func TestLoadChecksBeforeExpanding(t *testing.T) {
	const n = 1 << 24
	bomb := func(name string) *safetensors.File {
		f := StateDict(tiny(t, 1), "")
		delete(f.Tensors, name)
		f.Metadata = map[string]string{EncodingKeyPrefix + name: fmt.Sprintf(`{"kind":"binary","dtype":"F32","shape":[%d]}`, n)}
		f.Set(name+"@signs", safetensors.Tensor{DType: safetensors.U8, Shape: []int{n / 8}, Data: make([]byte, n/8)})
		f.Set(name+"@scale", safetensors.FromFloat32([]int{1}, []float32{1}))
		return f
	}
	for _, c := range []struct {
		name string
		f    *safetensors.File
		opt  LoadOptions
		want string
	}{
		{"unexpected", bomb("fake"), LoadOptions{}, "1 unexpected keys (fake)"},
		{"unexpected, non-strict", bomb("fake"), LoadOptions{NonStrict: true}, ""},
		{"wrong shape", bomb("linear.weight"), LoadOptions{}, `tensor "linear.weight": shape [16777216] in the file, the model has [10 `},
	} {
		m := tiny(t, 2)
		var err error
		a := allocated(func() { err = LoadStateDict(c.f, m, c.opt) })
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if a > 4<<20 {
			t.Errorf("%s: LoadStateDict allocated %d bytes: the tensor was expanded", c.name, a)
		}
	}
}
