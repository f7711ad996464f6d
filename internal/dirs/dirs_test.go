package dirs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAllRemoveEmpty(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "c")
	created, err := MkdirAll(dir)
	if err != nil || created != filepath.Join(base, "a") {
		t.Fatalf("MkdirAll = %q, %v; want %q", created, err, filepath.Join(base, "a"))
	}
	// A file in b keeps b and a.
	keep := filepath.Join(base, "a", "b", "f")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	RemoveEmpty(dir, created)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("empty %s kept", dir)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("non-empty folder removed: %v", err)
	}
	os.Remove(keep)
	RemoveEmpty(filepath.Join(base, "a", "b"), created)
	if _, err := os.Stat(filepath.Join(base, "a")); !os.IsNotExist(err) {
		t.Fatal("empty created folders kept")
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("a folder that existed was removed: %v", err)
	}
	if c, err := MkdirAll(base); c != "" || err != nil {
		t.Fatalf("MkdirAll of an existing folder = %q, %v", c, err)
	}
	RemoveEmpty(base, "")
	if _, err := os.Stat(base); err != nil {
		t.Fatal("RemoveEmpty with nothing created removed a folder")
	}
}
