package safetensors

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The fixtures are written by testdata/gen_safetensors.py with torch 1.13.
const fixtureDir = "../../../testdata/safetensors"

func readFixture(t *testing.T, name string) (*File, []byte) {
	t.Helper()
	path := filepath.Join(fixtureDir, name)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, raw
}

// sameFloat reports whether a and b are bit-identical or both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

func TestPyTorchFixture(t *testing.T) {
	f, raw := readFixture(t, "pytorch_small.safetensors")
	wantMeta := map[string]string{"format": "pt", "note": "caf\u00e9 \u2014 \"quoted\" <&> \\ tab\tend"}
	if !reflect.DeepEqual(f.Metadata, wantMeta) {
		t.Errorf("metadata = %q, want %q", f.Metadata, wantMeta)
	}
	wantTypes := map[string]DType{
		"src": F32, "src_f16": F16, "src_f16_f32": F32, "src_bf16": BF16, "src_bf16_f32": F32,
		"src_f64": F64, "randn": F32, "num_batches_tracked": I64, "i64": I64, "i32": I32,
		"i16": I16, "i8": I8, "u8": U8, "mask": BOOL, "empty": F32,
	}
	if len(f.Tensors) != len(wantTypes) {
		t.Errorf("got %d tensors, want %d", len(f.Tensors), len(wantTypes))
	}
	for name, dt := range wantTypes {
		if got := f.Tensors[name].DType; got != dt {
			t.Errorf("%s: dtype %s, want %s", name, got, dt)
		}
	}

	src, shape, err := f.Float32("src")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shape, []int{127}) || src[0] != 0 || src[2] != 1 || src[3] != -2.5 || !math.Signbit(float64(src[1])) {
		t.Fatalf("src shape %v starts %v", shape, src[:4])
	}
	// torch's own conversions decode to torch's float values, and the Go
	// encoders reproduce torch's F16 and BF16 rounding bit for bit.
	for _, c := range []struct {
		half, ref string
		dt        DType
	}{{"src_f16", "src_f16_f32", F16}, {"src_bf16", "src_bf16_f32", BF16}} {
		got, _, err := f.Float32(c.half)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := f.Float32(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !sameFloat(got[i], want[i]) {
				t.Errorf("%s[%d] (src %v) decodes to %v, torch says %v", c.half, i, src[i], got[i], want[i])
			}
		}
		enc, err := FromFloat32As(c.dt, shape, src)
		if err != nil {
			t.Fatal(err)
		}
		torchBytes := f.Tensors[c.half].Data
		for i := 0; i < len(src); i++ {
			if src[i] != src[i] {
				// NaN payloads differ between torch's scalar and vectorised
				// paths (BF16 0x7fc0 or 0xffff); both decode to NaN above.
				continue
			}
			if !bytes.Equal(enc.Data[2*i:2*i+2], torchBytes[2*i:2*i+2]) {
				t.Errorf("%s of %v: Go encodes % x, torch % x", c.dt, src[i], enc.Data[2*i:2*i+2], torchBytes[2*i:2*i+2])
			}
		}
	}
	f64, err := f.Tensors["src_f64"].Float64()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range src {
		if w := float64(v) * 3; f64[i] != w && !(math.IsNaN(w) && math.IsNaN(f64[i])) {
			t.Errorf("src_f64[%d] = %v, want %v", i, f64[i], w)
		}
	}

	ints := map[string][]int64{
		"num_batches_tracked": {1234},
		"i64":                 {0, -1, 1<<62 + 1, math.MinInt64, math.MaxInt64, 7},
		"i32":                 {math.MinInt32, math.MaxInt32, 5},
		"i16":                 {-32768, 32767, -3},
		"i8":                  {-128, 127, -1},
		"u8":                  {0, 255, 17},
		"mask":                {1, 0, 0, 1},
	}
	for name, want := range ints {
		got, err := f.Tensors[name].Int64()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	if s := f.Tensors["num_batches_tracked"].Shape; len(s) != 0 {
		t.Errorf("num_batches_tracked shape %v, want []", s)
	}
	if s := f.Tensors["i64"].Shape; !reflect.DeepEqual(s, []int{2, 3}) {
		t.Errorf("i64 shape %v", s)
	}
	if e := f.Tensors["empty"]; !reflect.DeepEqual(e.Shape, []int{0, 3}) || len(e.Data) != 0 {
		t.Errorf("empty = %+v", e)
	}
	randn, shape, err := f.Float32("randn")
	if err != nil || !reflect.DeepEqual(shape, []int{3, 4, 5}) {
		t.Fatalf("randn shape %v err %v", shape, err)
	}
	var sum float64
	for _, v := range randn {
		sum += float64(v) * float64(v)
	}
	if sum < 20 || sum > 120 { // chi-squared with 60 degrees of freedom
		t.Errorf("randn sum of squares %v is implausible for N(0,1) samples", sum)
	}

	// The Go writer lays the file out exactly as fixturelib.py does.
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, raw) {
		t.Errorf("re-encoding the PyTorch file changed its bytes (%d vs %d bytes)", len(out), len(raw))
	}
}

func TestPyTorchDefaultConversion(t *testing.T) {
	f, raw := readFixture(t, "pytorch_default.safetensors")
	if f.Metadata != nil {
		t.Errorf("metadata = %v, want none", f.Metadata)
	}
	x, shape, err := f.Float32("f64")
	if err != nil || f.Tensors["f64"].DType != F32 || !reflect.DeepEqual(shape, []int{2, 3}) {
		t.Fatalf("f64: %v %v %v", f.Tensors["f64"].DType, shape, err)
	}
	for i, v := range x {
		if v != float32(i)/4 {
			t.Errorf("f64[%d] = %v, want %v", i, v, float32(i)/4)
		}
	}
	for name, want := range map[string][]int64{"i32": {3, -4}, "flags": {1, 0, 1}} {
		tt := f.Tensors[name]
		got, err := tt.Int64()
		if err != nil || tt.DType != I64 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v (%s), %v; want %v as I64", name, got, tt.DType, err, want)
		}
	}
	out, err := Marshal(f)
	if err != nil || !bytes.Equal(out, raw) {
		t.Errorf("re-encoding changed the bytes (err %v)", err)
	}
}
