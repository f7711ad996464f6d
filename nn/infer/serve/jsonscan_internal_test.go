package serve

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestParseBounded parses the audit's hostile bodies of 8 MiB: each is
// refused, and the parse allocates a bounded amount (under parseCost),
// not memory in proportion to the body (encoding/json took 778 MB for
// 2.8 million empty inputs).
func TestParseBounded(t *testing.T) {
	const size = 8 << 20
	fill := func(prefix, elem, suffix string) []byte {
		n := (size - len(prefix) - len(suffix)) / (len(elem) + 1)
		return []byte(prefix + strings.Repeat(elem+",", n-1) + elem + suffix)
	}
	for _, c := range []struct {
		name string
		body []byte
		msg  string
	}{
		{"empty inputs", fill(`{"inputs":[`, `{}`, `]}`), "more than 1 input"},
		{"repeated outputs", fill(`{"outputs":[`, `{"name":"probabilities"}`, `]}`), "more than 2 outputs"},
		{"repeated outputs after inputs", fill(`{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":[0]}],"outputs":[`, `{"name":"probabilities"}`, `]}`), "more than 2 outputs"},
		{"parameters", fill(`{"parameters":{`, `"a":1`, `}}`), "key \"a\" given twice"},
		{"distinct parameters", []byte(`{"parameters":{` + strings.Join(func() []string {
			var s []string
			for i := range 200000 {
				s = append(s, strconv.Quote("k"+strconv.Itoa(i))+":1")
			}
			return s
		}(), ",") + `}}`), "more than 16 keys"},
		{"shape", fill(`{"inputs":[{"shape":[`, `1`, `]}]}`), "more than 8 dimensions"},
		{"deep", []byte(`{"inputs":[{"data":` + strings.Repeat("[", size/2-20) + `]}]}`), "nested more than"},
		{"long id", []byte(`{"id":"` + strings.Repeat("x", size-10) + `"}`), "over the limit"},
	} {
		var herr *httpError
		n := allocated(func() { _, herr = parseInferRequest(c.body) })
		if herr == nil || !strings.Contains(herr.msg, c.msg) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, herr, c.msg)
		}
		if n > parseCost {
			t.Errorf("%s: the parse of %d bytes allocated %d bytes, over parseCost (%d)", c.name, len(c.body), n, parseCost)
		}
	}
}

// TestParseDataNotCopied: a valid request's tensor data stays a span of
// the body; parsing allocates a bounded amount however large the data.
func TestParseDataNotCopied(t *testing.T) {
	body := []byte(`{"id":"x","parameters":{"top_k":3},"inputs":[{"name":"input","shape":[64,3,32,32],"datatype":"FP32","data":[` +
		strings.Repeat("0.123456789,", 64*3072-1) + `1]}],"outputs":[{"name":"probabilities"},{"name":"top_k","parameters":{"classification":2}}]}`)
	var req *InferRequest
	var herr *httpError
	n := allocated(func() { req, herr = parseInferRequest(body) })
	if herr != nil {
		t.Fatal(herr)
	}
	if n > 16<<10 {
		t.Errorf("parsing %d bytes allocated %d bytes", len(body), n)
	}
	at := bytes.Index(body, []byte("[0.123"))
	if d := req.Inputs[0].Data; len(d) != 64*3072*12-9 || &d[0] != &body[at] {
		t.Errorf("data of %d bytes, not the span of the body", len(d))
	}
}

// TestResponseCost: the charged bound covers the answer's data and four
// times its JSON text for the largest answer (every output, the longest
// probability strings, labels that need escaping).
func TestResponseCost(t *testing.T) {
	for _, classes := range []int{10, 100} {
		labels := make([]string, classes)
		for i := range labels {
			labels[i] = strings.Repeat("\x01", 12)
		}
		n := 64
		outs := []output{{ProbTensor, 0}, {TopKTensor, classes}}
		probs := make([]float32, n*classes)
		for i := range probs {
			probs[i] = -1.17549435e-38
		}
		var top []string
		for range n * classes {
			top = append(top, strconv.FormatFloat(-1.17549435e-38, 'g', -1, 32)+":"+strconv.Itoa(classes-1)+":"+labels[0])
		}
		id := strings.Repeat("\x02", maxStringLen)
		resp := InferResponse{ModelName: "model", ModelVersion: "123456", ID: id, Outputs: []ResponseOutput{
			{Name: ProbTensor, Shape: []int64{int64(n), int64(classes)}, Datatype: "FP32", Data: probs},
			{Name: TopKTensor, Shape: []int64{int64(n), int64(classes)}, Datatype: "BYTES", Data: top},
		}}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data := int64(len(probs))*4 + int64(len(top))*(16+int64(len(top[0])))
		if got := responseCost(n, classes, outs, labels, id, "model"); got < data+4*int64(len(b)+1) {
			t.Errorf("%d classes: responseCost %d, under %d bytes of data and 4×%d of JSON", classes, got, data, len(b)+1)
		}
	}
}
