package safetensors

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func sealedFixture() *File {
	rng := rand.New(rand.NewPCG(3, 4))
	w := make([]float32, 24)
	for i := range w {
		w[i] = rng.Float32()*2 - 1
	}
	f := &File{Metadata: map[string]string{"model": "resnet20", "epoch": "7"}}
	f.Set("conv.weight", FromFloat32([]int{2, 3, 2, 2}, w))
	f.Set("bn.num_batches_tracked", FromInt64(nil, []int64{41}))
	f.Set("half", Tensor{DType: F16, Shape: []int{3}, Data: []byte{0, 60, 0, 64, 0, 188}})
	return f
}

func TestSealedRoundTrip(t *testing.T) {
	f := sealedFixture()
	b, err := Marshal(Sealed(f))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"`+ChecksumKey+`":"crc32c:`)) {
		t.Fatalf("sealed file has no checksum entry: %q", b[:200])
	}
	if _, ok := f.Metadata[ChecksumKey]; ok {
		t.Error("Sealed changed its argument's metadata")
	}
	g, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(g, f) || !maps.Equal(g.Metadata, f.Metadata) {
		t.Errorf("read back %v, want %v (the checksum entry is removed on reading)", g.Metadata, f.Metadata)
	}
	// Sealing again (a file read and written back) gives the same bytes,
	// and a file with only the checksum reads back without metadata.
	if b2, _ := Marshal(Sealed(g)); !bytes.Equal(b, b2) {
		t.Error("sealing a read-back file changed its bytes")
	}
	bare := &File{Tensors: f.Tensors}
	b3, _ := Marshal(Sealed(bare))
	if h, err := Parse(b3); err != nil || h.Metadata != nil {
		t.Errorf("metadata %v, err %v; want none", h.Metadata, err)
	}
	// An unsealed file (PyTorch's) and one whose "checksum" entry is not
	// ours load unchecked.
	plain, _ := Marshal(f)
	if _, err := Parse(plain); err != nil {
		t.Errorf("unsealed file: %v", err)
	}
	other := &File{Tensors: f.Tensors, Metadata: map[string]string{ChecksumKey: "sha1:abc"}}
	ob, _ := Marshal(other)
	if h, err := Parse(ob); err != nil || h.Metadata[ChecksumKey] != "sha1:abc" {
		t.Errorf("foreign checksum entry: %v, %v", h, err)
	}
}

// TestSealedDetectsEveryCorruption flips every bit of a sealed file, one
// at a time, and replaces every byte by each digit: each changed file must
// fail to read, or read back exactly the stored tensors and metadata. The
// latter happens only when the change hits the checksum entry's own key
// or prefix: the file then reads as an unsealed one whose content is
// intact, with the damaged entry as one more metadata string.
func TestSealedDetectsEveryCorruption(t *testing.T) {
	f := sealedFixture()
	b, err := Marshal(Sealed(f))
	if err != nil {
		t.Fatal(err)
	}
	silent, tried := 0, 0
	check := func(c []byte, what string) {
		tried++
		g, err := Parse(c)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: error %v is not a *FormatError", what, err)
			}
			return
		}
		extra := maps.Clone(g.Metadata)
		for k := range f.Metadata {
			if extra[k] != f.Metadata[k] {
				continue
			}
			delete(extra, k)
		}
		intact := len(extra) == 0
		if len(extra) == 1 && len(g.Metadata) == len(f.Metadata)+1 {
			for k, v := range extra {
				intact = k != ChecksumKey || !strings.HasPrefix(v, checksumPrefix)
			}
		}
		if !equalFiles(&File{Tensors: g.Tensors}, &File{Tensors: f.Tensors}) || !intact {
			silent++
			t.Errorf("%s: read without error but with different content", what)
		}
	}
	c := make([]byte, len(b))
	for i := range b {
		for bit := range 8 {
			copy(c, b)
			c[i] ^= 1 << bit
			check(c, "bit "+itoa(bit)+" of byte "+itoa(i))
		}
		for d := byte('0'); d <= '9'; d++ {
			if b[i] == d {
				continue
			}
			copy(c, b)
			c[i] = d
			check(c, "byte "+itoa(i)+" set to "+string(d))
		}
	}
	t.Logf("%d corrupted files, %d read silently with other content", tried, silent)
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestChecksumMismatchNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := WriteFileAtomic(path, sealedFixture()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0x10 // a bit of the last tensor's data
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("error = %v, want a checksum mismatch naming %s", err, path)
	}
}
