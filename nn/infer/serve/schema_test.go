package serve_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxgen/proxgen/internal/jsonschema"
	"github.com/proxgen/proxgen/nn/infer/serve"
)

func loadSchemas(t *testing.T) jsonschema.Definitions {
	b, err := os.ReadFile(filepath.Join("testdata", "open_inference_rest.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defs, err := jsonschema.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

// checkOutputs checks what the schema cannot: each output's data holds as
// many elements as its shape, of its datatype.
func checkOutputs(b []byte) error {
	var resp serve.InferResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		return err
	}
	for _, o := range resp.Outputs {
		n := int64(1)
		for _, d := range o.Shape {
			n *= d
		}
		data, _ := o.Data.([]any)
		if int64(len(data)) != n {
			return fmt.Errorf("output %q: %d elements, shape %v", o.Name, len(data), o.Shape)
		}
		for _, x := range data {
			_, num := x.(float64)
			_, str := x.(string)
			if o.Datatype == "FP32" && !num || o.Datatype == "BYTES" && !str {
				return fmt.Errorf("output %q (%s): element %v", o.Name, o.Datatype, x)
			}
		}
	}
	return nil
}

// TestResponsesMatchSchema sends every endpoint of the protocol and of
// the model_repository extension the requests a client sends — server and
// model metadata, inference with every output by default, with Triton's
// classification parameter, failing ones, the repository index, unload,
// inference on the unloaded model, load — and validates each answer
// against the protocol's schema (testdata/open_inference_rest.schema.json,
// from the official open_inference_rest.yaml).
func TestResponsesMatchSchema(t *testing.T) {
	defs := loadSchemas(t)
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	x := fp32Data(preprocessed(t, m, rawImage(1), rawImage(2)))
	infer := `{"id":"7","inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + x + `}]}`
	classify := `{"inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + x + `}],"outputs":[{"name":"probabilities","parameters":{"classification":3}},{"name":"top_k"}]}`
	for _, c := range []struct {
		method, path, body string
		code               int
		schema             string
	}{
		{"GET", "/v2", "", 200, "metadata_server_response"},
		{"GET", "/v2/models/model", "", 200, "metadata_model_response"},
		{"GET", "/v2/models/model/versions/9", "", 404, "metadata_model_error_response"},
		{"POST", "/v2/models/model/infer", infer, 200, "inference_response"},
		{"POST", "/v2/models/model/infer", classify, 200, "inference_response"},
		{"POST", "/v2/models/model/infer", `{"inputs":[{"name":"input","DATA":[]}]}`, 400, "inference_error_response"},
		{"POST", "/v2/repository/index", "", 200, "repository_index_response"},
		{"POST", "/v2/repository/index", `{"ready":true}`, 200, "repository_index_response"},
		{"POST", "/v2/repository/models/model/unload", `{"parameters":{"unload_dependents":false}}`, 200, ""},
		{"POST", "/v2/repository/index", `{}`, 200, "repository_index_response"},
		{"POST", "/v2/models/model/infer", infer, 503, "inference_error_response"},
		{"GET", "/v2/models/model/ready", "", 503, "metadata_model_error_response"},
		{"POST", "/v2/repository/models/model/load", "", 200, ""},
		{"POST", "/v2/models/model/infer", infer, 200, "inference_response"},
		{"POST", "/v2/repository/models/model/load", `{"parameters":{"config":"{}"}}`, 400, "inference_error_response"},
	} {
		code, b := do(t, c.method, r.url+c.path, c.body)
		what := c.method + " " + c.path + " " + c.body[:min(len(c.body), 40)]
		if code != c.code {
			t.Errorf("%s: status %d (%s), want %d", what, code, b, c.code)
			continue
		}
		if c.schema == "" {
			continue
		}
		if err := defs.Validate(c.schema, b); err != nil {
			t.Errorf("%s: %v\n%s", what, err, b)
		}
		if c.schema == "inference_response" {
			if err := checkOutputs(b); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	}
	// The unloaded model is reported as such, and served again after load.
	if st := r.srv.Models()[0]; st.State != "READY" || st.Version != "2" {
		t.Errorf("after unload and load: %+v, want READY version 2", st)
	}
}
