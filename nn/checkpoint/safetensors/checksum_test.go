package safetensors

import (
	"bytes"
	"encoding/binary"
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
	// The checksum key is reserved: an entry that is not this engine's
	// seal is refused, not read unchecked.
	other := &File{Tensors: f.Tensors, Metadata: map[string]string{ChecksumKey: "sha1:abc"}}
	ob, _ := Marshal(other)
	if _, err := Parse(ob); err == nil || !strings.Contains(err.Error(), "the seal is damaged") {
		t.Errorf("foreign checksum entry: error %v", err)
	}
}

// TestDamagedSealRefused: the audit's seal-damage cases of issue 35 — the
// seal's key renamed (case variants, another letter), its prefix changed,
// its entry or the seal mark replaced, each together with a zeroed 4 KiB
// page of weights — are all refused (before: 7 of 7 read, 4 as another
// model). A file written with no seal at all (PyTorch's) still reads; so
// does one whose every trace of the seal was rewritten by hand into other
// letters (the CRC detects corruption; it does not authenticate).
func TestDamagedSealRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	w := make([]float32, 4096)
	for i := range w {
		w[i] = rng.Float32()
	}
	f := &File{Metadata: map[string]string{"model": "resnet20"}}
	f.Set("conv.weight", FromFloat32([]int{4096}, w))
	good, err := Marshal(Sealed(f))
	if err != nil {
		t.Fatal(err)
	}
	hdr := 8 + int(binary.LittleEndian.Uint64(good))
	same := func(a, b string) func([]byte) []byte {
		return func(c []byte) []byte {
			if len(a) != len(b) {
				t.Fatalf("%q and %q differ in length", a, b)
			}
			i := bytes.Index(c[:hdr], []byte(a))
			if i < 0 {
				t.Fatalf("%q not in the header %q", a, c[:hdr])
			}
			copy(c[i:], b)
			return c
		}
	}
	for _, c := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"key cHecksum", same(`"checksum"`, `"cHecksum"`)},
		{"key CHECKSUM", same(`"checksum"`, `"CHECKSUM"`)},
		{"key checksuM", same(`"checksum"`, `"checksuM"`)},
		{"key bhecksum", same(`"checksum"`, `"bhecksum"`)},
		{"prefix crc32C", same(`"crc32c:`, `"crc32C:`)},
		{"prefix CRC32C", same(`"crc32c:`, `"CRC32C:`)},
		{"prefix crc32d", same(`"crc32c:`, `"crc32d:`)},
		{"key and prefix", func(c []byte) []byte {
			return same(`"checksum":"crc32c:`, `"xhecksum":"xrc32c:`)(c)
		}},
		{"seal mark renamed", same(`"sealed"`, `"Sealed"`)},
		{"key, prefix and mark in other cases", func(c []byte) []byte {
			return same(`"sealed":"crc32c"`, `"SEALED":"CRC32C"`)(same(`"checksum":"crc32c:`, `"Checksum":"Crc32c:`)(c))
		}},
		{"mark's value", same(`"sealed":"crc32c"`, `"sealed":"crc32d"`)},
	} {
		b := c.damage(bytes.Clone(good))
		clear(b[hdr+4096 : hdr+8192]) // a zeroed page of weights
		if g, err := Parse(b); err == nil {
			t.Errorf("%s: read, metadata %v", c.name, g.Metadata)
		}
		// The damaged seal alone is refused as well.
		if _, err := Parse(c.damage(bytes.Clone(good))); err == nil {
			t.Errorf("%s: read without the zeroed page", c.name)
		}
	}
	plain, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(plain); err != nil {
		t.Errorf("unsealed file: %v", err)
	}
}

// TestSealedDetectsEveryCorruption flips every bit of a sealed file, one
// at a time, and replaces every byte by each digit: each changed file must
// fail to read, or read back exactly the stored tensors and metadata (a
// hexadecimal digit of the checksum changed to upper case). Damage to the
// seal's own key or prefix is refused too (issue 35).
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
