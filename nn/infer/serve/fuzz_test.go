package serve_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// FuzzInferRequest sends arbitrary bodies to POST /v2/models/model/infer:
// every answer is the protocol's JSON (an inference response for 200, the
// error form otherwise) with a status the documentation lists, and the
// handler never panics.
func FuzzInferRequest(f *testing.F) {
	m := tinyModel(f)
	srv, err := serve.New(m, serve.Config{MaxImages: 4, MaxPixels: 256 * 256, MemoryBudget: 64 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	png := base64.StdEncoding.EncodeToString(encodePNG(f, synthetic(20, 12, 1)))
	jpg := base64.StdEncoding.EncodeToString(encodeJPEG(f, synthetic(33, 40, 2)))
	// Small seeds: minimising a new input re-runs it many times, and a
	// whole FP32 image (3072 numbers) would spend the budget there.
	for _, seed := range []string{
		`{"id":"1","inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":[0.5,-1,2e-3]}]}`,
		`{"parameters":{"top_k":2},"inputs":[{"name":"image","shape":[2],"datatype":"BYTES","data":["` + png + `","` + jpg + `"]}]}`,
		`{"inputs":[{"name":"image","shape":[1,1],"datatype":"BYTES","data":[["` + png + `"]]}],"outputs":[{"name":"top_k","parameters":{"top_k":3}},{"name":"probabilities"}]}`,
		`{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":[[[[1e38]]]]}]}`,
		`{"inputs":[{"name":"input","shape":[-1,3,32,32],"datatype":"FP32","data":[]}]}`,
		`{"inputs":[]}`, `[]`, `null`, `{"inputs":[{"data":{}}]}`, ``,
	} {
		f.Add([]byte(seed))
	}
	allowed := map[int]bool{200: true, 400: true, 413: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v2/models/model/infer", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if !allowed[w.Code] || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, Content-Type %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if w.Code == http.StatusOK {
			var resp serve.InferResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Outputs) == 0 || resp.ModelName != "model" {
				t.Fatalf("200 with %s (%v)", w.Body, err)
			}
			return
		}
		var e map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || len(e) != 1 || e["error"] == "" {
			t.Fatalf("status %d with %s: not the protocol's error form", w.Code, w.Body)
		}
		if w.Code == http.StatusInternalServerError && !strings.Contains(e["error"], "non-finite") {
			t.Fatalf("500: %s", e["error"])
		}
	})
}
