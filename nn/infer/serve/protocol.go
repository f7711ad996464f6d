package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/nn/infer"
)

// The Open Inference Protocol (KServe v2 REST) as this server speaks it.
//
// A model takes one input tensor per request, either
//
//	{"name":"input","datatype":"FP32","shape":[N,3,32,32],"data":[...]}
//
// images already preprocessed (normalised with the model's mean and std,
// as the model's metadata gives them), the N×3×32×32 values row-major,
// flat or nested; or
//
//	{"name":"image","datatype":"BYTES","shape":[N],"data":["iVBORw0KGgo...",...]}
//
// N encoded PNG or JPEG images, each a base64 string (standard alphabet),
// preprocessed as /classify does. N is at most Config.MaxImages.
//
// The outputs are "probabilities", FP32 [N,classes], and "top_k", BYTES
// [N,k] whose elements are "prob:index:label" strings, most probable first
// (the form of Triton's classification extension). Without "outputs" in
// the request the answer has "probabilities" alone, and "top_k" too when
// the request's parameters hold "top_k": k. A requested "top_k" output
// takes its k from its own parameters ({"top_k": k}), else the request's,
// else Config.DefaultK; k is clamped to the number of classes.

// Names and types of the protocol's tensors.
const (
	InputTensor  = "input"         // FP32 [N,3,32,32]
	ImageTensor  = "image"         // BYTES [N]
	ProbTensor   = "probabilities" // FP32 [N,classes]
	TopKTensor   = "top_k"         // BYTES [N,k]
	platformName = "proxgen"
)

// InferRequest is the body of POST /v2/models/{name}/infer.
type InferRequest struct {
	ID         string          `json:"id,omitempty"`
	Parameters map[string]any  `json:"parameters,omitempty"`
	Inputs     []RequestInput  `json:"inputs"`
	Outputs    []RequestOutput `json:"outputs,omitempty"`
}

// RequestInput is one input tensor of an InferRequest; Data is a flat or
// nested JSON array.
type RequestInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters map[string]any  `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// RequestOutput names an output the client wants.
type RequestOutput struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// InferResponse is the answer of a successful inference.
type InferResponse struct {
	ModelName    string           `json:"model_name"`
	ModelVersion string           `json:"model_version,omitempty"`
	ID           string           `json:"id,omitempty"`
	Outputs      []ResponseOutput `json:"outputs"`
}

// ResponseOutput is one output tensor, its data flat in row-major order
// ([]float32 or []string).
type ResponseOutput struct {
	Name     string  `json:"name"`
	Shape    []int64 `json:"shape"`
	Datatype string  `json:"datatype"`
	Data     any     `json:"data"`
}

// MetadataTensor describes a model's input or output.
type MetadataTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// ModelMetadata is the answer of GET /v2/models/{name}. Parameters, an
// extension of the protocol's object, records the network, the
// normalisation the FP32 input expects and the class names.
type ModelMetadata struct {
	Name       string           `json:"name"`
	Versions   []string         `json:"versions"`
	Platform   string           `json:"platform"`
	Inputs     []MetadataTensor `json:"inputs"`
	Outputs    []MetadataTensor `json:"outputs"`
	Parameters ModelParameters  `json:"parameters"`
}

// ModelParameters are the model details in ModelMetadata.
type ModelParameters struct {
	Architecture string    `json:"architecture"`
	Mean         []float32 `json:"mean"`
	Std          []float32 `json:"std"`
	Classes      []string  `json:"classes"`
}

// ServerMetadata is the answer of GET /v2.
type ServerMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// Version is the server version GET /v2 reports.
const Version = "1"

func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, writeV2Error) {
		return
	}
	writeJSON(w, http.StatusOK, ServerMetadata{Name: platformName, Version: Version, Extensions: []string{"model_repository", "classification"}})
}

// allow answers 405 unless r uses method (GET also allows HEAD).
func allow(w http.ResponseWriter, r *http.Request, method string, errw func(http.ResponseWriter, int, string)) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	errw(w, http.StatusMethodNotAllowed, fmt.Sprintf("use %s for %s", method, r.URL.Path))
	return false
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodGet, writeV2Error) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	}
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, writeV2Error) {
		return
	}
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

// modelFor resolves the {name} and optional {version} of r to the
// version serving now (held: release it), or answers 404/503.
func (s *Server) modelFor(w http.ResponseWriter, r *http.Request) (*version, bool) {
	name := r.PathValue("name")
	e, ok := s.models[name]
	if !ok {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("no model %q", name))
		return nil, false
	}
	v, ok := e.acquire()
	if !ok {
		writeV2Error(w, http.StatusServiceUnavailable, "the server is shutting down")
		return nil, false
	}
	if want := r.PathValue("version"); want != "" && want != strconv.Itoa(v.number) {
		v.release()
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("model %q has no version %q (serving version %d)", name, want, v.number))
		return nil, false
	}
	return v, true
}

func (s *Server) modelMetadata(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, writeV2Error) {
		return
	}
	v, ok := s.modelFor(w, r)
	if !ok {
		return
	}
	defer v.release()
	spec := v.model.Spec()
	writeJSON(w, http.StatusOK, ModelMetadata{
		Name:     v.e.src.Name,
		Versions: []string{strconv.Itoa(v.number)},
		Platform: platformName,
		Inputs: []MetadataTensor{
			{Name: InputTensor, Datatype: "FP32", Shape: []int64{-1, 3, 32, 32}},
			{Name: ImageTensor, Datatype: "BYTES", Shape: []int64{-1}},
		},
		Outputs: []MetadataTensor{
			{Name: ProbTensor, Datatype: "FP32", Shape: []int64{-1, int64(spec.NumClasses)}},
			{Name: TopKTensor, Datatype: "BYTES", Shape: []int64{-1, -1}},
		},
		Parameters: ModelParameters{Architecture: v.model.String(), Mean: spec.Mean, Std: spec.Std, Classes: spec.Classes},
	})
}

func (s *Server) modelReady(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, writeV2Error) {
		return
	}
	v, ok := s.modelFor(w, r)
	if !ok {
		return
	}
	v.release()
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"name": v.e.src.Name, "ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": v.e.src.Name, "ready": true})
}

func (s *Server) repositoryIndex(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodPost, writeV2Error) {
		writeJSON(w, http.StatusOK, s.Models())
	}
}

func (s *Server) repositoryLoad(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, writeV2Error) {
		return
	}
	name := r.PathValue("name")
	if _, ok := s.models[name]; !ok {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("no model %q", name))
		return
	}
	if _, err := s.Reload(name, true); err != nil {
		writeV2Error(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// v2Infer answers POST /v2/models/{name}[/versions/{v}]/infer.
func (s *Server) v2Infer(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, writeV2Error) {
		return
	}
	c, body, herr := s.begin(w, r, r.PathValue("name"))
	defer c.end()
	var resp *InferResponse
	if herr == nil {
		if want := r.PathValue("version"); want != "" && want != strconv.Itoa(c.v.number) {
			herr = fail(http.StatusNotFound, "model %q has no version %q (serving version %d)", c.name, want, c.v.number)
		} else {
			resp, herr = s.infer(c, r, body)
		}
	}
	c.answer(w, resp, herr, writeV2Error)
}

// infer runs one protocol request on the call's model version.
func (s *Server) infer(c *call, r *http.Request, body []byte) (*InferResponse, *httpError) {
	// Parsing copies the tensor data (json.RawMessage) and decodes it
	// (float32 values, or base64 images): together at most twice the body.
	if herr := c.charge(r.Context(), 2*int64(len(body)), "parsing the request"); herr != nil {
		return nil, herr
	}
	req, herr := parseInferRequest(body)
	if herr != nil {
		return nil, herr
	}
	m := c.v.model
	outs, herr := s.wantedOutputs(req, m.NumClasses())
	if herr != nil {
		return nil, herr
	}
	in := req.Inputs[0]
	var jobs []*job
	defer func() {
		for _, j := range jobs {
			s.jobs.Put(j)
		}
	}()
	switch in.Name {
	case InputTensor:
		values, n, herr := tensorFP32(in, s.cfg.MaxImages)
		if herr != nil {
			return nil, herr
		}
		for i := range n {
			j := s.getJob()
			jobs = append(jobs, j)
			copy(j.x, values[i*infer.InputSize:])
		}
	case ImageTensor:
		images, herr := tensorImages(in, s.cfg.MaxImages)
		if herr != nil {
			return nil, herr
		}
		for i, img := range images {
			j := s.getJob()
			jobs = append(jobs, j)
			kind, ok := sniffKind(img)
			if !ok {
				return nil, fail(http.StatusBadRequest, "input %q element %d is neither a PNG nor a JPEG image", in.Name, i)
			}
			if herr := s.preprocess(r.Context(), m, j.x, kind, img); herr != nil {
				herr.msg = fmt.Sprintf("input %q element %d: %s", in.Name, i, herr.msg)
				return nil, herr
			}
		}
	default:
		return nil, fail(http.StatusBadRequest, "unexpected input %q: the model takes %q (FP32 [N,3,32,32]) or %q (BYTES [N], PNG or JPEG, base64)", in.Name, InputTensor, ImageTensor)
	}
	if herr := c.run(jobs); herr != nil {
		return nil, herr
	}
	resp := &InferResponse{ModelName: c.name, ModelVersion: strconv.Itoa(c.v.number), ID: req.ID}
	n, classes := len(jobs), m.NumClasses()
	names := m.Spec().Classes
	for _, o := range outs {
		if o.k == 0 {
			probs := make([]float32, 0, n*classes)
			for _, j := range jobs {
				probs = append(probs, j.probs...)
			}
			resp.Outputs = append(resp.Outputs, ResponseOutput{Name: ProbTensor, Shape: []int64{int64(n), int64(classes)}, Datatype: "FP32", Data: probs})
			continue
		}
		k := min(o.k, classes)
		top := make([]string, 0, n*k)
		for _, j := range jobs {
			for _, cl := range infer.TopK(j.probs, k, names) {
				top = append(top, strconv.FormatFloat(float64(cl.Prob), 'g', -1, 32)+":"+strconv.Itoa(cl.Index)+":"+cl.Name)
			}
		}
		resp.Outputs = append(resp.Outputs, ResponseOutput{Name: TopKTensor, Shape: []int64{int64(n), int64(k)}, Datatype: "BYTES", Data: top})
	}
	return resp, nil
}

// parseInferRequest decodes and checks the request's JSON object.
func parseInferRequest(body []byte) (*InferRequest, *httpError) {
	var req InferRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, fail(http.StatusBadRequest, "the request is not an inference request object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(http.StatusBadRequest, "data after the request object")
	}
	if len(req.Inputs) != 1 {
		return nil, fail(http.StatusBadRequest, "%d inputs: send one, %q or %q", len(req.Inputs), InputTensor, ImageTensor)
	}
	return &req, nil
}

// output is an output to answer: probabilities (k == 0) or top_k.
type output struct{ k int }

func (s *Server) wantedOutputs(req *InferRequest, classes int) ([]output, *httpError) {
	reqK, herr := intParam(req.Parameters, "top_k")
	if herr != nil {
		return nil, herr
	}
	if len(req.Outputs) == 0 {
		outs := []output{{}}
		if reqK > 0 {
			outs = append(outs, output{reqK})
		}
		return outs, nil
	}
	var outs []output
	for _, o := range req.Outputs {
		switch o.Name {
		case ProbTensor:
			outs = append(outs, output{})
		case TopKTensor:
			k, herr := intParam(o.Parameters, "top_k")
			if herr != nil {
				return nil, herr
			}
			outs = append(outs, output{cmpOr(k, reqK, s.cfg.DefaultK)})
		default:
			return nil, fail(http.StatusBadRequest, "unknown output %q: the model has %q and %q", o.Name, ProbTensor, TopKTensor)
		}
	}
	return outs, nil
}

func cmpOr(v ...int) int {
	for _, x := range v {
		if x != 0 {
			return x
		}
	}
	return 0
}

// intParam reads a positive integer parameter; 0 if absent.
func intParam(p map[string]any, key string) (int, *httpError) {
	v, ok := p[key]
	if !ok {
		return 0, nil
	}
	f, ok := v.(float64)
	if !ok || f < 1 || f > math.MaxInt32 || f != math.Trunc(f) {
		return 0, fail(http.StatusBadRequest, "parameter %q is %v: want a positive integer", key, v)
	}
	return int(f), nil
}

// checkShape requires in.Shape to be [N, rest...] with 1 ≤ N ≤ maxN, and
// returns N.
func checkShape(in RequestInput, maxN int, rest ...int64) (int, *httpError) {
	want := "[N," + strings.Trim(strings.ReplaceAll(fmt.Sprint(rest), " ", ","), "[]") + "]"
	if len(rest) == 0 {
		want = "[N]"
	}
	if len(in.Shape) != 1+len(rest) {
		return 0, fail(http.StatusBadRequest, "input %q has shape %v, want %s", in.Name, in.Shape, want)
	}
	for i, d := range rest {
		if in.Shape[1+i] != d {
			return 0, fail(http.StatusBadRequest, "input %q has shape %v, want %s", in.Name, in.Shape, want)
		}
	}
	n := in.Shape[0]
	if n < 1 || n > int64(maxN) {
		return 0, fail(http.StatusBadRequest, "input %q has shape %v: N must be 1 to %d", in.Name, in.Shape, maxN)
	}
	return int(n), nil
}

// tensorFP32 returns the values of an FP32 [N,3,32,32] input and N.
func tensorFP32(in RequestInput, maxN int) ([]float32, int, *httpError) {
	if in.Datatype != "FP32" {
		return nil, 0, fail(http.StatusBadRequest, "input %q has datatype %q, want FP32", in.Name, in.Datatype)
	}
	n, herr := checkShape(in, maxN, 3, 32, 32)
	if herr != nil {
		return nil, 0, herr
	}
	var values []float32
	if err := json.Unmarshal(in.Data, &values); err != nil {
		// Nested arrays, or an element that is not a float32.
		values = values[:0]
		if err := flatten(in.Data, func(tok json.Token) error {
			num, ok := tok.(json.Number)
			if !ok {
				return fmt.Errorf("element %d is %v, not a number", len(values), tok)
			}
			f, err := strconv.ParseFloat(string(num), 32)
			if err != nil {
				return fmt.Errorf("element %d, %s, is not a finite float32", len(values), num)
			}
			values = append(values, float32(f))
			return nil
		}); err != nil {
			return nil, 0, fail(http.StatusBadRequest, "input %q data: %v", in.Name, err)
		}
	}
	if len(values) != n*infer.InputSize {
		return nil, 0, fail(http.StatusBadRequest, "input %q has %d values, its shape %v needs %d", in.Name, len(values), in.Shape, n*infer.InputSize)
	}
	for i, v := range values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, 0, fail(http.StatusBadRequest, "input %q element %d is %v: values must be finite", in.Name, i, v)
		}
	}
	return values, n, nil
}

// tensorImages returns the decoded base64 elements of a BYTES [N] (or
// [N,1]) input.
func tensorImages(in RequestInput, maxN int) ([][]byte, *httpError) {
	if in.Datatype != "BYTES" {
		return nil, fail(http.StatusBadRequest, "input %q has datatype %q, want BYTES", in.Name, in.Datatype)
	}
	var n int
	var herr *httpError
	if len(in.Shape) == 2 {
		n, herr = checkShape(in, maxN, 1)
	} else {
		n, herr = checkShape(in, maxN)
	}
	if herr != nil {
		return nil, herr
	}
	var strs []string
	if err := json.Unmarshal(in.Data, &strs); err != nil {
		strs = strs[:0]
		if err := flatten(in.Data, func(tok json.Token) error {
			str, ok := tok.(string)
			if !ok {
				return fmt.Errorf("element %d is %v, not a string", len(strs), tok)
			}
			strs = append(strs, str)
			return nil
		}); err != nil {
			return nil, fail(http.StatusBadRequest, "input %q data: %v", in.Name, err)
		}
	}
	if len(strs) != n {
		return nil, fail(http.StatusBadRequest, "input %q has %d elements, its shape %v needs %d", in.Name, len(strs), in.Shape, n)
	}
	out := make([][]byte, n)
	for i, str := range strs {
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return nil, fail(http.StatusBadRequest, "input %q element %d is not base64: %v", in.Name, i, err)
		}
		out[i] = b
	}
	return out, nil
}

// flatten walks a JSON array, nested to any depth, and calls fn with its
// scalar elements in row-major order.
func flatten(raw json.RawMessage, fn func(json.Token) error) error {
	if len(raw) == 0 {
		return errors.New("missing")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['):
			depth++
		case json.Delim(']'):
			depth--
		case json.Delim('{'), json.Delim('}'):
			return errors.New("an object where tensor elements belong")
		default:
			if depth == 0 {
				return errors.New("not an array")
			}
			if err := fn(tok); err != nil {
				return err
			}
		}
	}
	return nil
}
