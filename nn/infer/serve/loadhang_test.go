//go:build unix

package serve_test

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// TestReloadCannotHang replaces a served model's file by what the audit of
// issue 35 found hanging or exhausting loads — a FIFO (before: the load
// request hung forever holding the model's load lock), a symlink to
// /dev/zero (before: 3 GiB read in 3.7 s), a directory and a file over
// Config.MaxModelBytes (sparse, 1 GiB) — and reloads: each load is an
// error within a second, by SIGHUP's path (ReloadChanged) and the load
// endpoint's (Reload), the old version keeps serving, and the next load of
// a good file succeeds.
func TestReloadCannotHang(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	good := filepath.Join(dir, "good.safetensors")
	writeModel(t, good, 3, 1)
	content, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := serve.NewModels(serve.Config{Log: log.New(io.Discard, "", 0), MaxModelBytes: 64 << 20, LoadTimeout: 5 * time.Second},
		serve.Source{Name: "m", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fifo := func() error { return syscall.Mkfifo(path, 0o644) }
	zero := func() error { return os.Symlink("/dev/zero", path) }
	mkdir := func() error { return os.Mkdir(path, 0o755) }
	big := func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(1 << 30)
	}
	for i, c := range []struct {
		name string
		make func() error
		want string
	}{
		{"FIFO", fifo, "a FIFO"},
		{"symlink to /dev/zero", zero, "a character device"},
		{"directory", mkdir, "a directory"},
		{"1 GiB file", big, "over the limit of 67108864"},
	} {
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := c.make(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		serving := srv.Models()[0].Version
		for _, force := range []bool{false, true} {
			t0 := time.Now()
			_, err := srv.Reload("m", force)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.want)
			}
			if d := time.Since(t0); d > time.Second {
				t.Errorf("%s: the load took %v", c.name, d)
			}
		}
		if st := srv.Models()[0]; st.Version != serving || st.State != "READY" {
			t.Errorf("%s: %+v, want version %s still serving", c.name, st, serving)
		}
		// The next load of a good file succeeds.
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		writeModel(t, path, uint64(10+i), 1)
		if ok, err := srv.Reload("m", false); !ok || err != nil {
			t.Fatalf("%s: the next load of a good file: %v, %v", c.name, ok, err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if ok, err := srv.Reload("m", true); !ok || err != nil {
			t.Fatalf("%s: reloading the first file: %v, %v", c.name, ok, err)
		}
	}
}
