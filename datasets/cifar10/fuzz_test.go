package cifar10

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadFile reads arbitrary bytes as a data file: it must return an
// error or a split whose records are whole and whose labels are classes,
// never panic.
func FuzzReadFile(f *testing.F) {
	rec := make([]byte, RecordSize)
	f.Add([]byte{})
	f.Add(rec)
	f.Add(append(rec, 3))
	bad := append([]byte(nil), rec...)
	bad[0] = 10
	f.Add(bad)
	two := append(append([]byte(nil), rec...), rec...)
	two[RecordSize] = 9
	f.Add(two)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "data_batch_1.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := ReadFile(path)
		if err != nil {
			if s != nil {
				t.Fatal("a split and an error")
			}
			return
		}
		if len(data)%RecordSize != 0 || len(data) == 0 {
			t.Fatalf("%d bytes accepted", len(data))
		}
		if s.Len() != len(data)/RecordSize || len(s.Images) != s.Len()*ImageSize {
			t.Fatalf("%d labels and %d image bytes from %d bytes", s.Len(), len(s.Images), len(data))
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := range s.Len() {
			if s.Labels[i] != data[i*RecordSize] || s.Image(i)[0] != data[i*RecordSize+1] {
				t.Fatalf("record %d decoded wrongly", i)
			}
		}
	})
}
