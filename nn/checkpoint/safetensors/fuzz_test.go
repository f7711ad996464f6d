package safetensors

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead checks that Parse never panics, and that whatever it accepts
// can be written again and reads back unchanged, with conversions that do
// not panic either. Run it with
//
//	go test ./nn/checkpoint/safetensors -run '^$' -fuzz FuzzRead -fuzztime 60s
func FuzzRead(f *testing.F) {
	f.Add(handMade())
	for seed := uint64(1); seed <= 3; seed++ {
		b, err := Marshal(randomFile(rand.New(rand.NewPCG(seed, 1))))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, name := range []string{"pytorch_small.safetensors", "pytorch_default.safetensors"} {
		if b, err := os.ReadFile(filepath.Join(fixtureDir, name)); err == nil {
			f.Add(b)
		}
	}
	f.Add(build(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add(build(`{"__metadata__":{"n":"a"},"e":{"dtype":"BOOL","shape":[0],"data_offsets":[0,0]}}`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %v is a %T, not a *FormatError", err, err)
			}
			return
		}
		for _, tt := range file.Tensors {
			tt.Float32()
			tt.Float64()
			tt.Int64()
		}
		out, err := Marshal(file)
		if err != nil {
			t.Fatalf("Parse accepted a file that Marshal rejects: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse rejects what Marshal wrote: %v", err)
		}
		if !equalFiles(file, again) {
			t.Fatal("write and read changed the file")
		}
	})
}
