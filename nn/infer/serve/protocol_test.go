package serve_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
)

// do sends a request with a JSON (or empty) body and returns the status and
// the answer, which must be JSON.
func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	resp, b := exchange(t, method, url, ct, strings.NewReader(body), "application/json")
	return resp.StatusCode, b
}

// wantJSON requires the answer b to equal the JSON text want (compared as
// decoded values).
func wantJSON(t *testing.T, what string, b []byte, want string) {
	t.Helper()
	var got, exp any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %s: %v", what, b, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s: %s, want %s", what, b, want)
	}
}

// wantV2Error requires the protocol's error form: an object with the one
// member "error", a string containing msg.
func wantV2Error(t *testing.T, what string, code int, b []byte, wantCode int, msg string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil || code != wantCode || len(e) != 1 {
		t.Errorf("%s: status %d %s, want %d and {\"error\": ...}", what, code, b, wantCode)
		return
	}
	if s, ok := e["error"].(string); !ok || !strings.Contains(s, msg) {
		t.Errorf("%s: error %v, want it to mention %q", what, e["error"], msg)
	}
}

// TestV2HealthAndMetadata walks the protocol's health and metadata
// endpoints as its documentation shows them.
func TestV2HealthAndMetadata(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v2/health/live", `{"live":true}`},
		{"GET", "/v2/health/ready", `{"ready":true}`},
		{"GET", "/v2", `{"name":"proxgen","version":"1","extensions":["model_repository","classification"]}`},
		{"GET", "/v2/", `{"name":"proxgen","version":"1","extensions":["model_repository","classification"]}`},
		{"GET", "/v2/models/model/ready", `{"name":"model","ready":true}`},
		{"GET", "/v2/models/model/versions/1/ready", `{"name":"model","ready":true}`},
		{"POST", "/v2/repository/index", `[{"name":"model","version":"1","state":"READY"}]`},
	} {
		code, b := do(t, c.method, r.url+c.path, "")
		if code != http.StatusOK {
			t.Errorf("%s %s: status %d %s", c.method, c.path, code, b)
		}
		wantJSON(t, c.path, b, c.want)
	}
	spec := m.Spec()
	jsonText := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	params, _ := json.Marshal(serve.ModelParameters{Architecture: m.String(), NumClasses: spec.NumClasses,
		Mean: jsonText(spec.Mean), Std: jsonText(spec.Std), Classes: jsonText(spec.Classes)})
	meta := `{"name":"model","versions":["1"],"platform":"proxgen",
		"inputs":[{"name":"input","datatype":"FP32","shape":[-1,3,32,32]},{"name":"image","datatype":"BYTES","shape":[-1]}],
		"outputs":[{"name":"probabilities","datatype":"FP32","shape":[-1,10]},{"name":"top_k","datatype":"BYTES","shape":[-1,-1]}],
		"parameters":` + string(params) + `}`
	for _, path := range []string{"/v2/models/model", "/v2/models/model/versions/1"} {
		code, b := do(t, "GET", r.url+path, "")
		if code != http.StatusOK {
			t.Errorf("%s: status %d", path, code)
		}
		wantJSON(t, path, b, meta)
	}
	for _, c := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", "/v2/models/nope", 404, `no model "nope"`},
		{"GET", "/v2/models/nope/ready", 404, `no model "nope"`},
		{"GET", "/v2/models/model/versions/2", 404, "no version"},
		{"POST", "/v2/models/nope/infer", 404, `no model "nope"`},
		{"POST", "/v2/health/live", 405, "use GET"},
		{"GET", "/v2/models/model/infer", 405, "use POST"},
		{"GET", "/v2/nothing", 404, "no endpoint"},
		{"POST", "/v2/repository/models/nope/load", 404, `no model "nope"`},
		{"POST", "/v2/repository/models/model/load", 400, "no file to reload"},
	} {
		code, b := do(t, c.method, r.url+c.path, "")
		wantV2Error(t, c.method+" "+c.path, code, b, c.code, c.msg)
	}

	r.srv.Close() // draining: not ready, still live
	for _, c := range []struct {
		path string
		code int
	}{{"/v2/health/live", 200}, {"/v2/health/ready", 503}, {"/v2/models/model/ready", 503}} {
		if code, b := do(t, "GET", r.url+c.path, ""); code != c.code {
			t.Errorf("after Close: %s: status %d %s, want %d", c.path, code, b, c.code)
		}
	}
}

// fp32Data formats values as a JSON array the way a client writes them.
func fp32Data(values []float32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

// preprocessed returns the network input for raw CIFAR-10 images.
func preprocessed(t *testing.T, m *infer.Model, raws ...[]byte) []float32 {
	x := make([]float32, len(raws)*infer.InputSize)
	for i, raw := range raws {
		if err := m.PreprocessRaw(x[i*infer.InputSize:(i+1)*infer.InputSize], raw); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// inferAnswer posts body to url and decodes the successful inference
// response.
func inferAnswer(t *testing.T, url, body string) serve.InferResponse {
	t.Helper()
	code, b := do(t, "POST", url, body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var resp serve.InferResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return resp
}

// probsOf returns the data of the "probabilities" output as float32s.
func probsOf(t *testing.T, resp serve.InferResponse, n int) []float32 {
	t.Helper()
	for _, o := range resp.Outputs {
		if o.Name != "probabilities" {
			continue
		}
		if o.Datatype != "FP32" || !reflect.DeepEqual(o.Shape, []int64{int64(n), 10}) {
			t.Fatalf("probabilities: %s %v", o.Datatype, o.Shape)
		}
		b, _ := json.Marshal(o.Data)
		var p []float32
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatalf("no probabilities in %+v", resp)
	return nil
}

// topKStrings is what the top_k output holds for rows of probabilities.
func topKStrings(m *infer.Model, probs []float32, k int) []string {
	var out []string
	for i := 0; i < len(probs); i += m.NumClasses() {
		for _, c := range infer.TopK(probs[i:i+m.NumClasses()], k, m.Spec().Classes) {
			out = append(out, fmt.Sprintf("%s:%d:%s", strconv.FormatFloat(float64(c.Prob), 'g', -1, 32), c.Index, c.Name))
		}
	}
	return out
}

// TestV2InferFP32 sends preprocessed tensors as the protocol's examples
// write them (flat, nested, with an id, top_k by parameter and by
// requested output) and compares with the model's own probabilities, bit
// for bit.
func TestV2InferFP32(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	url := r.url + "/v2/models/model/infer"
	x := preprocessed(t, m, rawImage(1), rawImage(2))
	want := m.Probabilities(nil, x)

	body := `{"id":"42","inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	resp := inferAnswer(t, url, body)
	// Without "outputs": every output, top_k with k = Config.DefaultK.
	if resp.ModelName != "model" || resp.ModelVersion != "1" || resp.ID != "42" || len(resp.Outputs) != 2 ||
		resp.Outputs[1].Name != "top_k" || !reflect.DeepEqual(resp.Outputs[1].Data, anySlice(topKStrings(m, want, 5))) {
		t.Fatalf("answer %+v", resp)
	}
	if got := probsOf(t, resp, 2); !reflect.DeepEqual(got, want) {
		t.Fatalf("probabilities %v, want %v", got, want)
	}

	// The same through the versioned path, the data nested as [1][3][32][32].
	var nested strings.Builder
	nested.WriteString("[[")
	for c := range 3 {
		if c > 0 {
			nested.WriteByte(',')
		}
		nested.WriteByte('[')
		for y := range 32 {
			if y > 0 {
				nested.WriteByte(',')
			}
			nested.WriteString(fp32Data(x[c*1024+y*32 : c*1024+y*32+32]))
		}
		nested.WriteByte(']')
	}
	nested.WriteString("]]")
	body = `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + nested.String() + `}]}`
	resp = inferAnswer(t, r.url+"/v2/models/model/versions/1/infer", body)
	if got := probsOf(t, resp, 1); !reflect.DeepEqual(got, want[:10]) {
		t.Fatalf("nested: probabilities %v, want %v", got, want[:10])
	}

	// top_k as a request parameter: both outputs.
	body = `{"parameters":{"top_k":3},"inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	resp = inferAnswer(t, url, body)
	if len(resp.Outputs) != 2 {
		t.Fatalf("outputs %+v", resp.Outputs)
	}
	top := resp.Outputs[1]
	if top.Name != "top_k" || top.Datatype != "BYTES" || !reflect.DeepEqual(top.Shape, []int64{2, 3}) || !reflect.DeepEqual(top.Data, anySlice(topKStrings(m, want, 3))) {
		t.Fatalf("top_k %+v, want %v", top, topKStrings(m, want, 3))
	}

	// Requested outputs: top_k alone, k from its own parameters (clamped).
	body = `{"inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}],"outputs":[{"name":"top_k","parameters":{"top_k":20}}]}`
	resp = inferAnswer(t, url, body)
	if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "top_k" || !reflect.DeepEqual(resp.Outputs[0].Shape, []int64{2, 10}) ||
		!reflect.DeepEqual(resp.Outputs[0].Data, anySlice(topKStrings(m, want, 10))) {
		t.Fatalf("requested top_k: %+v", resp.Outputs)
	}

	// Triton's classification extension: "classification": k on an
	// output answers its k most probable classes under its own name.
	body = `{"inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}],"outputs":[{"name":"probabilities","parameters":{"classification":3}}]}`
	resp = inferAnswer(t, url, body)
	if len(resp.Outputs) != 1 || resp.Outputs[0].Name != "probabilities" || resp.Outputs[0].Datatype != "BYTES" ||
		!reflect.DeepEqual(resp.Outputs[0].Shape, []int64{2, 3}) || !reflect.DeepEqual(resp.Outputs[0].Data, anySlice(topKStrings(m, want, 3))) {
		t.Fatalf("classification: %+v", resp.Outputs)
	}
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestV2InferImages sends encoded images as BYTES elements (base64 in
// JSON) and compares with the model's Predict.
func TestV2InferImages(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	img, pngBytes, jpegBytes, decoded := testImage(t)
	body := fmt.Sprintf(`{"inputs":[{"name":"image","shape":[2],"datatype":"BYTES","data":[%q,%q]}],"outputs":[{"name":"top_k","parameters":{"top_k":10}}]}`,
		base64.StdEncoding.EncodeToString(pngBytes), base64.StdEncoding.EncodeToString(jpegBytes))
	resp := inferAnswer(t, r.url+"/v2/models/model/infer", body)
	var want []string
	for _, classes := range m.Predict([]image.Image{img, decoded}, 10) {
		for _, c := range classes {
			want = append(want, fmt.Sprintf("%s:%d:%s", strconv.FormatFloat(float64(c.Prob), 'g', -1, 32), c.Index, c.Name))
		}
	}
	if len(resp.Outputs) != 1 || !reflect.DeepEqual(resp.Outputs[0].Data, anySlice(want)) {
		t.Fatalf("top_k %+v, want %v", resp.Outputs, want)
	}
	// Shape [N,1] is accepted too.
	body = fmt.Sprintf(`{"inputs":[{"name":"image","shape":[1,1],"datatype":"BYTES","data":[[%q]]}]}`, base64.StdEncoding.EncodeToString(pngBytes))
	inferAnswer(t, r.url+"/v2/models/model/infer", body)
}

// TestV2InferErrors sends malformed requests: each gets the protocol's
// error form with the right status, and none is a 200 or a panic.
func TestV2InferErrors(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MaxImages: 4})
	x := fp32Data(preprocessed(t, m, rawImage(1)))
	pngBytes := encodePNG(t, synthetic(40, 40, 2))
	pngB64 := base64.StdEncoding.EncodeToString(pngBytes)
	halfB64 := base64.StdEncoding.EncodeToString(pngBytes[:len(pngBytes)/2])
	one := func(name, shape, datatype, data string) string {
		return `{"inputs":[{"name":"` + name + `","shape":` + shape + `,"datatype":"` + datatype + `","data":` + data + `}]}`
	}
	nan := strings.Replace(x, "[", `["NaN",`, 1)
	for _, c := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"not JSON", "model", `{"inputs":`, 400, "not an inference request"},
		{"trailing data", "model", one("input", "[1,3,32,32]", "FP32", x) + "{}", 400, "after the request"},
		{"no inputs", "model", `{"inputs":[]}`, 400, "0 inputs"},
		{"two inputs", "model", `{"inputs":[` + one("input", "[1,3,32,32]", "FP32", x)[11:len(one("input", "[1,3,32,32]", "FP32", x))-2] + `,{"name":"image"}]}`, 400, "more than 1 input"},
		{"unknown input", "model", one("pixels", "[1,3,32,32]", "FP32", x), 400, `unexpected input "pixels"`},
		{"wrong datatype", "model", one("input", "[1,3,32,32]", "FP64", x), 400, `datatype "FP64", want FP32`},
		{"bytes as fp32", "model", one("image", "[1]", "FP32", `["x"]`), 400, "want BYTES"},
		{"wrong shape", "model", one("input", "[1,3,28,28]", "FP32", x), 400, "want [N,3,32,32]"},
		{"wrong rank", "model", one("input", "[3072]", "FP32", x), 400, "shape [3072]"},
		{"too many images", "model", one("input", "[5,3,32,32]", "FP32", x), 400, "N must be 1 to 4"},
		{"zero images", "model", one("input", "[0,3,32,32]", "FP32", "[]"), 400, "N must be 1 to 4"},
		{"data shorter than shape", "model", one("input", "[2,3,32,32]", "FP32", x), 400, "3072 elements at depth 1, the shape [2,3,32,32] needs 6144"},
		{"NaN", "model", one("input", "[1,3,32,32]", "FP32", nan), 400, "not a number"},
		{"overflowing float32", "model", one("input", "[1,3,32,32]", "FP32", strings.Replace(x, "[", "[1e39,", 1)), 400, "not a finite float32"},
		{"object in data", "model", one("input", "[1,3,32,32]", "FP32", `[{"a":1}]`), 400, "object"},
		{"no data", "model", `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32"}]}`, 400, `has no "data"`},
		{"bad base64", "model", one("image", "[1]", "BYTES", `["***"]`), 400, "not base64"},
		{"not an image", "model", one("image", "[1]", "BYTES", `["aGVsbG8="]`), 400, "neither a PNG nor a JPEG"},
		{"corrupt png", "model", one("image", "[1]", "BYTES", "["+strconv.Quote(halfB64)+"]"), 400, "PNG"},
		{"bytes count", "model", one("image", "[2]", "BYTES", "["+strconv.Quote(pngB64)+"]"), 400, "1 elements at depth 1, the shape [2] needs 2"},
		{"unknown output", "model", `{"inputs":[` + one("input", "[1,3,32,32]", "FP32", x)[11:len(one("input", "[1,3,32,32]", "FP32", x))-2] + `],"outputs":[{"name":"logits"}]}`, 400, `unknown output "logits"`},
		{"bad top_k", "model", `{"parameters":{"top_k":1.5},"inputs":[` + one("input", "[1,3,32,32]", "FP32", x)[11:len(one("input", "[1,3,32,32]", "FP32", x))-2] + `]}`, 400, `parameter "top_k"`},
		// Strict JSON: exact key case, no repeated key, nesting as the
		// shape, counts refused as they are read.
		{"key case", "model", `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + x + `,"DATA":` + x + `}]}`, 400, `unknown key "DATA"`},
		{"request key case", "model", `{"Inputs":[]}`, 400, `unknown key "Inputs"`},
		{"repeated key", "model", `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + x + `,"data":` + x + `}]}`, 400, `key "data" given twice`},
		{"repeated top key", "model", `{"id":"a","id":"b","inputs":[]}`, 400, `key "id" given twice`},
		{"ragged", "model", one("input", "[1,3,32,32]", "FP32", nested(x, 31)), 400, "31 elements at depth 4, the shape [1,3,32,32] needs 32"},
		{"half nested", "model", one("input", "[1,3,32,32]", "FP32", "[["+x[1:len(x)-1]+"]]"), 400, "want an array at depth 3"},
		{"data longer than shape", "model", one("input", "[1,3,32,32]", "FP32", strings.Replace(x, "[", "[1,", 1)), 400, "more than 3072 elements"},
		{"many inputs", "model", `{"inputs":[` + strings.Repeat(`{},`, 1000) + `{}]}`, 400, "more than 1 input"},
		{"output twice", "model", `{"inputs":[` + one("input", "[1,3,32,32]", "FP32", x)[11:len(one("input", "[1,3,32,32]", "FP32", x))-2] + `],"outputs":[{"name":"probabilities"},{"name":"probabilities"}]}`, 400, `output "probabilities" is named twice`},
		{"many outputs", "model", `{"inputs":[],"outputs":[` + strings.Repeat(`{"name":"probabilities"},`, 1000) + `{}]}`, 400, "more than 2 outputs"},
		{"array parameter", "model", `{"parameters":{"a":[1]},"inputs":[]}`, 400, "a string, a number or a boolean"},
		{"binary output", "model", `{"inputs":[` + one("input", "[1,3,32,32]", "FP32", x)[11:len(one("input", "[1,3,32,32]", "FP32", x))-2] + `],"outputs":[{"name":"probabilities","parameters":{"binary_data":true}}]}`, 400, "binary tensor data extension is not supported"},
		{"deep data", "model", one("input", "[1,3,32,32]", "FP32", strings.Repeat("[", 100)+strings.Repeat("]", 100)), 400, "nested more than"},
		{"unknown model", "nope", one("input", "[1,3,32,32]", "FP32", x), 404, `no model "nope"`},
		{"unknown version", "model/versions/7", one("input", "[1,3,32,32]", "FP32", x), 404, `no version "7"`},
	} {
		code, b := do(t, "POST", r.url+"/v2/models/"+c.path+"/infer", c.body)
		wantV2Error(t, c.name, code, b, c.code, c.msg)
	}
	// The binary tensor data extension (tritonclient's default) is
	// refused by name, not as malformed JSON.
	req, err := http.NewRequest("POST", r.url+"/v2/models/model/infer", strings.NewReader(`{"inputs":[]}`+"\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Inference-Header-Content-Length", "13")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantV2Error(t, "binary data", resp.StatusCode, b, 400, "binary tensor data extension is not supported")
}

// nested writes the flat JSON array x nested as [1,3,32,32], its last row
// cut to last elements.
func nested(x string, last int) string {
	v := strings.Split(x[1:len(x)-1], ",")
	var b strings.Builder
	b.WriteString("[[")
	for c := range 3 {
		if c > 0 {
			b.WriteString(",")
		}
		b.WriteString("[")
		for r := range 32 {
			if r > 0 {
				b.WriteString(",")
			}
			row := v[(c*32+r)*32 : (c*32+r+1)*32]
			if c == 2 && r == 31 {
				row = row[:last]
			}
			b.WriteString("[" + strings.Join(row, ",") + "]")
		}
		b.WriteString("]")
	}
	b.WriteString("]]")
	return b.String()
}

// TestNonFiniteOutput sends finite inputs so large that the network
// overflows: the answer is a 500 naming the cause, counted as an error,
// not a 200 with an empty body.
func TestNonFiniteOutput(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	x := make([]float32, infer.InputSize)
	for i := range x {
		x[i] = 3e38
	}
	body := `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	code, b := do(t, "POST", r.url+"/v2/models/model/infer", body)
	wantV2Error(t, "overflowing input", code, b, http.StatusInternalServerError, "non-finite probability")
	if met := r.srv.Metrics(); met.Errors != 1 || met.Status["500"] != 1 {
		t.Fatalf("metrics %+v: want the 500 counted as an error", met)
	}
}

// TestInferChargedBeforeWork: a request's tensors, queued images and
// answer are charged to the memory budget from its shape and outputs
// before any of them is allocated, so that 64 small images that fit the
// body's budget but not their work are refused with 503 before they are
// decoded, and served with room enough; the budget is whole again after
// each (four in a row pass).
func TestInferChargedBeforeWork(t *testing.T) {
	m := tinyModel(t)
	png := strconv.Quote(base64.StdEncoding.EncodeToString(encodePNG(t, synthetic(8, 8, 3))))
	body := `{"inputs":[{"name":"image","shape":[64],"datatype":"BYTES","data":[` + strings.Repeat(png+",", 63) + png +
		`]}],"outputs":[{"name":"probabilities"},{"name":"top_k","parameters":{"classification":10}}]}`
	for _, c := range []struct {
		budget int64
		code   int
	}{{512 << 10, http.StatusServiceUnavailable}, {4 << 20, http.StatusOK}} {
		r := start(t, m, serve.Config{MemoryBudget: c.budget, AdmissionWait: time.Millisecond})
		for range 4 { // a charge not released would refuse the later ones
			code, b := do(t, "POST", r.url+"/v2/models/model/infer", body)
			if code != c.code {
				t.Fatalf("budget %d: status %d (%s), want %d", c.budget, code, b, c.code)
			}
			if code == http.StatusServiceUnavailable {
				wantV2Error(t, "small budget", code, b, code, "while decoding the tensors")
			}
		}
	}
}
