package serve

import (
	"io"
	"log"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/internal/regfile"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
)

// TestLoadTimeout stalls a model file's read (as a hung network file
// system would): the load is answered with an error at Config.LoadTimeout,
// the old version keeps serving, and a later load succeeds while the
// stalled read is still blocked — no lock is held across the read. The
// timeout leaves the real loads (which time the model's plans, slowly under
// the race detector on a loaded machine) seconds to spare.
func TestLoadTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	path := filepath.Join(t.TempDir(), "m.safetensors")
	spec := models.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.SaveModel(path, net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	srv, err := NewModels(Config{Log: log.New(io.Discard, "", 0), LoadTimeout: timeout}, Source{Name: "m", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stall := make(chan struct{})
	defer close(stall)
	srv.readFile = func(string, int64) ([]byte, error) { <-stall; return nil, io.EOF }
	for range 2 {
		t0 := time.Now()
		_, err := srv.Reload("m", true)
		if err == nil || !strings.Contains(err.Error(), "took longer than the load timeout (3s)") {
			t.Fatalf("stalled load: %v", err)
		}
		if d := time.Since(t0); d < timeout || d > timeout+2*time.Second {
			t.Errorf("stalled load answered after %v", d)
		}
	}
	srv.readFile = regfile.ReadFile
	if ok, err := srv.Reload("m", true); !ok || err != nil {
		t.Fatalf("a load after the stalled ones: %v, %v", ok, err)
	}
	if st := srv.Models()[0]; st.Version != "2" {
		t.Errorf("%+v, want version 2", st)
	}
}
