package cifar10

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureRecords is how many records each fixture file holds.
var fixtureRecords = map[string]int{
	"data_batch_1.bin": 3, "data_batch_2.bin": 2, "data_batch_3.bin": 4,
	"data_batch_4.bin": 3, "data_batch_5.bin": 1, "test_batch.bin": 5,
}

// fixturePixel is the content of byte j of image k of file f in fixtures.
func fixturePixel(f, k, j int) uint8 { return uint8(f*31 + k*17 + j*7 + j/1024*3) }

// fixtureLabel is the label of image k of file f in fixtures.
func fixtureLabel(f, k int) uint8 { return uint8((f*3 + k) % NumClasses) }

// fixtureFile returns the bytes of fixture file number f (0..4 training,
// 5 test) with n records.
func fixtureFile(f, n int) []byte {
	var b []byte
	for k := range n {
		b = append(b, fixtureLabel(f, k))
		for j := range ImageSize {
			b = append(b, fixturePixel(f, k, j))
		}
	}
	return b
}

// writeFixture writes a tiny but valid binary layout under
// root/cifar-10-batches-bin and returns that folder.
func writeFixture(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(root, FolderName)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, name := range append(TrainFiles(), TestFile) {
		if err := os.WriteFile(filepath.Join(bin, name), fixtureFile(f, fixtureRecords[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

func TestLoadFixture(t *testing.T) {
	root := t.TempDir()
	bin := writeFixture(t, root)
	for _, dir := range []string{root, bin} {
		ds, err := LoadWith(dir, LoadOptions{AllowSubset: true})
		if err != nil {
			t.Fatalf("Load(%s): %v", dir, err)
		}
		if got, want := ds.Train.Len(), 3+2+4+3+1; got != want {
			t.Fatalf("train has %d images, want %d", got, want)
		}
		if got := ds.Test.Len(); got != 5 {
			t.Fatalf("test has %d images, want 5", got)
		}
		// Training images are the five files concatenated in order.
		i := 0
		for f, name := range TrainFiles() {
			for k := range fixtureRecords[name] {
				if ds.Train.Labels[i] != fixtureLabel(f, k) {
					t.Fatalf("train label %d = %d, want %d", i, ds.Train.Labels[i], fixtureLabel(f, k))
				}
				img := ds.Train.Image(i)
				for _, j := range []int{0, 1, 1023, 1024, 2047, 2048, 3071} {
					if img[j] != fixturePixel(f, k, j) {
						t.Fatalf("train image %d byte %d = %d, want %d", i, j, img[j], fixturePixel(f, k, j))
					}
				}
				i++
			}
		}
		if !bytes.Equal(ds.Test.Image(4), fixtureFile(5, 5)[4*RecordSize+1:]) {
			t.Fatal("test image 4 differs from file content")
		}
		if err := ds.Train.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		damage func(bin string) error
		want   []string
	}{
		{
			name:   "missing file",
			damage: func(bin string) error { return os.Remove(filepath.Join(bin, "data_batch_3.bin")) },
			want:   []string{"missing file data_batch_3.bin"},
		},
		{
			name: "truncated file",
			damage: func(bin string) error {
				return os.Truncate(filepath.Join(bin, TestFile), 4*RecordSize+100)
			},
			want: []string{TestFile, "size 12392", "record 4 is truncated", "100 of 3073 bytes"},
		},
		{
			name: "bad label",
			damage: func(bin string) error {
				p := filepath.Join(bin, "data_batch_4.bin")
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				b[2*RecordSize] = 12
				return os.WriteFile(p, b, 0o644)
			},
			want: []string{"data_batch_4.bin: record 2", "offset 6146", "label 12, want 0..9"},
		},
		{
			name:   "empty file",
			damage: func(bin string) error { return os.WriteFile(filepath.Join(bin, "data_batch_5.bin"), nil, 0o644) },
			want:   []string{"data_batch_5.bin is empty"},
		},
		{
			name: "not a data folder",
			damage: func(bin string) error {
				return os.Rename(bin, bin+"-elsewhere")
			},
			want: []string{"holds neither a cifar-10-batches-bin folder nor test_batch.bin"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			bin := writeFixture(t, root)
			if err := tc.damage(bin); err != nil {
				t.Fatal(err)
			}
			_, err := LoadWith(root, LoadOptions{AllowSubset: true})
			if err == nil {
				t.Fatal("Load succeeded on broken data")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := LoadWith(filepath.Join(t.TempDir(), "nope"), LoadOptions{AllowSubset: true}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Load of a missing folder: error %v, want one naming the folder", err)
	}
}

func TestReadFileBadLabelAtEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.bin")
	b := fixtureFile(0, 3)
	b[2*RecordSize] = 255
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(p)
	if err == nil || !strings.Contains(err.Error(), "record 2") || !strings.Contains(err.Error(), "label 255") {
		t.Fatalf("ReadFile: error %v, want record 2 with label 255", err)
	}
}

func TestSubset(t *testing.T) {
	ds, err := LoadWith(filepath.Dir(writeFixture(t, t.TempDir())), LoadOptions{AllowSubset: true})
	if err != nil {
		t.Fatal(err)
	}
	s := ds.Train.Subset(4)
	if s.Len() != 4 || len(s.Images) != 4*ImageSize {
		t.Fatalf("Subset(4) has %d labels and %d bytes", s.Len(), len(s.Images))
	}
	if !bytes.Equal(s.Image(3), ds.Train.Image(3)) || s.Labels[3] != ds.Train.Labels[3] {
		t.Fatal("Subset(4) image 3 differs from the original")
	}
	// Appending to a subset must not overwrite the parent.
	before := ds.Train.Labels[4]
	s.Labels = append(s.Labels, 9)
	if ds.Train.Labels[4] != before {
		t.Fatal("appending to a subset changed the parent split")
	}
	if ds.Train.Subset(-1).Len() != ds.Train.Len() || ds.Train.Subset(1000).Len() != ds.Train.Len() {
		t.Fatal("Subset out of range should return everything")
	}
	if c := ds.Test.ClassCounts(); c[5] != 1 || c[9] != 1 || c[0] != 0 {
		t.Fatalf("test class counts %v", c)
	}
}

func TestValidate(t *testing.T) {
	s := &Split{Images: make([]uint8, 2*ImageSize), Labels: []uint8{1, 10}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "image 1 has label 10") {
		t.Fatalf("Validate: %v", err)
	}
	s = &Split{Images: make([]uint8, ImageSize), Labels: []uint8{1, 2}}
	if err := s.Validate(); err == nil {
		t.Fatal("Validate accepted 1 image for 2 labels")
	}
}

// TestRealData checks the real data set when it has been prepared with
// /work/shared/data/cifar10/prepare; it is skipped otherwise.
func TestRealData(t *testing.T) {
	dir := os.Getenv("CIFAR10_DIR")
	if dir == "" {
		t.Skip("set CIFAR10_DIR to a prepared CIFAR-10 folder to run")
	}
	ds, err := LoadWith(dir, LoadOptions{AllowSubset: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Train.Len() != 50000 || ds.Test.Len() != 10000 {
		t.Fatalf("train %d, test %d images", ds.Train.Len(), ds.Test.Len())
	}
	for c, n := range ds.Train.ClassCounts() {
		if n != 5000 {
			t.Errorf("train class %d has %d images, want 5000", c, n)
		}
	}
	for c, n := range ds.Test.ClassCounts() {
		if n != 1000 {
			t.Errorf("test class %d has %d images, want 1000", c, n)
		}
	}
}
