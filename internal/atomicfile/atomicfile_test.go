package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteKeepsModeAndPreviousGeneration(t *testing.T) {
	dir := t.TempDir()
	path, prev := filepath.Join(dir, "state"), filepath.Join(dir, "state.prev")
	if err := Write(path, []byte("one"), Options{Keep: prev}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	if _, err := os.Stat(prev); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a first write made %s (%v)", prev, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, gen := range []string{"two", "three"} {
		old := content(t, path)
		if err := Write(path, []byte(gen), Options{Keep: prev}); err != nil {
			t.Fatal(err)
		}
		if got := content(t, path); got != gen {
			t.Errorf("file holds %q, want %q", got, gen)
		}
		if got := content(t, prev); got != old {
			t.Errorf("previous generation holds %q, want %q", got, old)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("overwrite changed the mode to %v", st.Mode().Perm())
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state", "state.prev"}) {
		t.Errorf("folder holds %v", got)
	}
}

// TestWriteFailureLeavesOldFile fails a write at each of its steps (part
// of the data, after the sync, after keeping the previous generation) and
// requires the old file and the previous generation to be untouched and
// no temporary file to remain.
func TestWriteFailureLeavesOldFile(t *testing.T) {
	injected := errors.New("injected failure")
	for stop := range 3 {
		dir := t.TempDir()
		path, prev := filepath.Join(dir, "state"), filepath.Join(dir, "state.prev")
		for _, gen := range []string{"old-old", "old"} {
			if err := Write(path, []byte(gen), Options{Keep: prev}); err != nil {
				t.Fatal(err)
			}
		}
		events := 0
		opt := Options{Keep: prev, Event: func() error {
			if events++; events == stop {
				return injected
			}
			return nil
		}}
		if stop == 0 {
			opt.Fill = func(w io.Writer, data []byte) error {
				w.Write(data[:3])
				return injected
			}
		}
		err := Write(path, []byte("new content"), opt)
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), path) {
			t.Errorf("stop %d: error %v, want the injected failure naming %s", stop, err, path)
		}
		if got := content(t, path); got != "old" {
			t.Errorf("stop %d: file holds %q, want the old content", stop, got)
		}
		want := "old-old"
		if stop == 2 { // failed after the previous generation was kept
			want = "old"
		}
		if got := content(t, prev); got != want {
			t.Errorf("stop %d: previous generation holds %q, want %q", stop, got, want)
		}
		if got := names(t, dir); !slices.Equal(got, []string{"state", "state.prev"}) {
			t.Errorf("stop %d: folder holds %v", stop, got)
		}
	}
}

func TestWriteRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(sub, []byte("x"), Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("error %v, want a refusal of the folder", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"sub"}) {
		t.Errorf("folder holds %v", got)
	}
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".state.tmp-123", ".state.tmp-456", ".other.tmp-1", "state"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveStale(dir, []string{"state"}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{".other.tmp-1", "state"}) {
		t.Errorf("folder holds %v", got)
	}
}
