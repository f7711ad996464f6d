package serve_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
	"github.com/proxgen/proxgen/nn/models"
)

// TestSourceOptions checks that a model file with mostly exact zeros is
// served sparse by default and dense with Source.Options infer.Dense(),
// as /healthz's model description says.
func TestSourceOptions(t *testing.T) {
	spec := models.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range net.Params() {
		if p.T.Rank() < 2 {
			continue
		}
		for i := range p.T.Data {
			if rng.Float64() < 0.97 {
				p.T.Data[i] = 0
			}
		}
	}
	path := filepath.Join(t.TempDir(), "sparse.safetensors")
	if err := checkpoint.SaveModel(path, net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts []infer.Option
		want string
	}{
		{[]infer.Option{infer.MinZeros(0.9)}, "8 of 8 layers sparse"},
		{[]infer.Option{infer.Dense()}, "0 of 8 layers sparse"},
	} {
		srv, err := serve.NewModels(serve.Config{}, serve.Source{Name: "m", Path: path, Options: tc.opts})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		srv.Close()
		var h serve.Health
		if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(h.Model, tc.want) {
			t.Errorf("options %d: /healthz model %q, want %q", len(tc.opts), h.Model, tc.want)
		}
	}
}
