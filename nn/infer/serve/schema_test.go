package serve_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// schema is the subset of JSON Schema that testdata/open_inference_rest.schema.json
// uses.
type schema struct {
	Ref        string             `json:"$ref"`
	Type       string             `json:"type"`
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *schema            `json:"items"`
	AnyOf      []*schema          `json:"anyOf"`
	Additional *schema            `json:"additionalProperties"`
}

func loadSchemas(t *testing.T) map[string]*schema {
	b, err := os.ReadFile(filepath.Join("testdata", "open_inference_rest.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definitions map[string]*schema `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Definitions
}

// validate returns the first way v (decoded with UseNumber) breaks s.
func validate(defs map[string]*schema, s *schema, v any, at string) error {
	if s.Ref != "" {
		return validate(defs, defs[strings.TrimPrefix(s.Ref, "#/definitions/")], v, at)
	}
	if s.AnyOf != nil {
		for _, alt := range s.AnyOf {
			if validate(defs, alt, v, at) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: %v matches none of anyOf", at, v)
	}
	switch s.Type {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", at, v)
		}
		for _, k := range s.Required {
			if _, ok := o[k]; !ok {
				return fmt.Errorf("%s: no %q", at, k)
			}
		}
		for k, x := range o {
			sub := s.Properties[k]
			if sub == nil {
				sub = s.Additional
			}
			if sub != nil {
				if err := validate(defs, sub, x, at+"."+k); err != nil {
					return err
				}
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", at, v)
		}
		for i, x := range a {
			if err := validate(defs, s.Items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want a string", at, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", at, v)
		}
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: %T, want a number", at, v)
		}
		if f, err := n.Float64(); s.Type == "integer" && (err != nil || f != math.Trunc(f)) {
			return fmt.Errorf("%s: %s, want an integer", at, n)
		}
	}
	return nil
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
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if err := validate(defs, defs[c.schema], v, c.schema); err != nil {
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
