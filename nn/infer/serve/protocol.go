package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
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
// the request the answer has every output, as the protocol says, "top_k"
// with the k of the request's parameters ("top_k": k) or Config.DefaultK.
// Each output may be named once.
// A requested "top_k" output takes its k from its own parameters
// ({"classification": k} or {"top_k": k}), else the request's "top_k",
// else Config.DefaultK; "probabilities" with {"classification": k} is
// answered as Triton's classification extension answers it, BYTES [N,k]
// "prob:index:label" strings under its own name; k is clamped to the
// number of classes.
//
// The JSON is read strictly: keys exactly as the protocol spells them
// (case-sensitive), none repeated, no unknown key, parameters that are
// strings, numbers or booleans, and tensor data either flat or nested
// exactly as its shape. Counts are checked as the body is read, so a
// request with a million inputs is refused at its second. The binary
// tensor data extension (a request with an Inference-Header-Content-Length
// header, or binary_data parameters) is refused with 400.

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

// ModelParameters are the model details in ModelMetadata. The protocol's
// parameter values are strings, numbers or booleans: the lists are JSON
// arrays written as strings ("[0.4914,0.4822,0.4465]").
type ModelParameters struct {
	Architecture string `json:"architecture"`
	NumClasses   int    `json:"num_classes"`
	Mean         string `json:"mean"`    // JSON array of the 3 channel means
	Std          string `json:"std"`     // JSON array of the 3 channel standard deviations
	Classes      string `json:"classes"` // JSON array of the class names
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
		writeV2Error(w, http.StatusServiceUnavailable, e.unavailable())
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
		Parameters: ModelParameters{Architecture: v.model.String(), NumClasses: spec.NumClasses,
			Mean: jsonText(spec.Mean), Std: jsonText(spec.Std), Classes: jsonText(spec.Classes)},
	})
}

// jsonText returns the JSON text of v, a list of numbers or strings.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
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

// repositoryIndex answers POST /v2/repository/index (the model_repository
// extension): the state of every model, or of the ready ones only with
// {"ready": true}.
func (s *Server) repositoryIndex(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, writeV2Error) {
		return
	}
	readyOnly := false
	herr := repositoryBody(w, r, func(sc *scanner, key string) error {
		switch key {
		case "repository_name":
			name, err := sc.str(maxStringLen)
			if err == nil && name != "" {
				return fmt.Errorf("repository %q: this server has one repository, \"\"", name)
			}
			return err
		case "ready":
			v, err := sc.param()
			b, ok := v.(bool)
			if err == nil && !ok {
				return fmt.Errorf("\"ready\" is %v, want a boolean", v)
			}
			readyOnly = b
			return err
		}
		return fmt.Errorf("unknown key %q (the index request has \"repository_name\" and \"ready\")", key)
	})
	if herr != nil {
		writeV2Error(w, herr.status, herr.msg)
		return
	}
	models := s.Models()
	if readyOnly {
		models = slices.DeleteFunc(models, func(m ModelState) bool { return m.State != "READY" })
	}
	writeJSON(w, http.StatusOK, models)
}

// repositoryBody reads the optional JSON object of a model_repository
// request (at most 64 KiB): fn reads the value of each key.
func repositoryBody(w http.ResponseWriter, r *http.Request, fn func(sc *scanner, key string) error) *httpError {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		return fail(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	sc := &scanner{b: b}
	err = sc.object(4, func(key string) error { return fn(sc, key) })
	if err == nil {
		err = sc.end()
	}
	if err != nil {
		return fail(http.StatusBadRequest, "the request body: %v", err)
	}
	return nil
}

// repositoryParams reads the body {"parameters": {...}} of a load or
// unload request; allowed names the parameters accepted (with boolean
// values), any other is refused.
func repositoryParams(w http.ResponseWriter, r *http.Request, allowed ...string) *httpError {
	return repositoryBody(w, r, func(sc *scanner, key string) error {
		if key != "parameters" {
			return fmt.Errorf("unknown key %q (the request has \"parameters\")", key)
		}
		p, err := sc.params()
		if err != nil {
			return err
		}
		for k, v := range p {
			if _, ok := v.(bool); !ok || !slices.Contains(allowed, k) {
				return fmt.Errorf("parameter %q is not supported (this server loads each model from its file or as given)", k)
			}
		}
		return nil
	})
}

// repositoryLoad answers POST /v2/repository/models/{name}/load: the
// model is loaded again from its file (or, unloaded and given as such,
// served again); 200 once it serves, 400 with the reason if it fails.
func (s *Server) repositoryLoad(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, writeV2Error) {
		return
	}
	name := r.PathValue("name")
	if _, ok := s.models[name]; !ok {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("no model %q", name))
		return
	}
	if herr := repositoryParams(w, r); herr != nil {
		writeV2Error(w, herr.status, herr.msg)
		return
	}
	if _, err := s.Reload(name, true); err != nil {
		writeV2Error(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// repositoryUnload answers POST /v2/repository/models/{name}/unload
// (Unload); the parameter unload_dependents is accepted (a model here has
// no dependents).
func (s *Server) repositoryUnload(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, writeV2Error) {
		return
	}
	name := r.PathValue("name")
	if _, ok := s.models[name]; !ok {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("no model %q", name))
		return
	}
	if herr := repositoryParams(w, r, "unload_dependents"); herr != nil {
		writeV2Error(w, herr.status, herr.msg)
		return
	}
	if err := s.Unload(name); err != nil {
		writeV2Error(w, http.StatusServiceUnavailable, err.Error())
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

// binaryDataRefusal answers a request of the binary tensor data
// extension, which this server does not speak.
const binaryDataRefusal = "the binary tensor data extension is not supported: send the tensors as JSON in \"data\" (tritonclient: binary_data=False on each input and output)"

// parseCost is what parsing a request may allocate besides its tensor
// data, charged before parsing: the strings and parameters, whose sizes
// and counts the parser bounds (maxStringLen, maxParams, one input, two
// outputs).
const parseCost = 256 << 10

// infer runs one protocol request on the call's model version. Every
// allocation it makes is bounded before it is made and charged to the
// memory budget first: the parse by parseCost; then, from the shape and
// the outputs, the jobs, the decoded images and the response.
func (s *Server) infer(c *call, r *http.Request, body []byte) (*InferResponse, *httpError) {
	if r.Header.Get("Inference-Header-Content-Length") != "" {
		return nil, fail(http.StatusBadRequest, "%s", binaryDataRefusal)
	}
	if herr := c.charge(r.Context(), parseCost, "parsing the request"); herr != nil {
		return nil, herr
	}
	req, herr := parseInferRequest(body)
	if herr != nil {
		return nil, herr
	}
	m := c.v.model
	classes, names := m.NumClasses(), m.Spec().Classes
	outs, herr := s.wantedOutputs(req, classes)
	if herr != nil {
		return nil, herr
	}
	in := &req.Inputs[0]
	n, dims, herr := s.checkInput(in)
	if herr != nil {
		return nil, herr
	}
	cost := int64(n)*jobCost(classes) + responseCost(n, classes, outs, names, req.ID, c.name)
	if in.Name == ImageTensor {
		cost += int64(len(in.Data))/4*3 + 3 // the decoded base64
	}
	if herr := c.charge(r.Context(), cost, "decoding the tensors"); herr != nil {
		return nil, herr
	}
	jobs := make([]*job, n)
	for i := range jobs {
		jobs[i] = s.getJob()
	}
	defer func() {
		for _, j := range jobs {
			s.jobs.Put(j)
		}
	}()
	switch in.Name {
	case InputTensor:
		if herr := decodeFP32(in, dims, jobs); herr != nil {
			return nil, herr
		}
	case ImageTensor:
		images, herr := decodeImages(in, dims)
		if herr != nil {
			return nil, herr
		}
		for i, img := range images {
			kind, ok := sniffKind(img)
			if !ok {
				return nil, fail(http.StatusBadRequest, "input %q element %d is neither a PNG nor a JPEG image", in.Name, i)
			}
			if herr := s.preprocess(r.Context(), m, jobs[i].x, kind, img); herr != nil {
				herr.msg = fmt.Sprintf("input %q element %d: %s", in.Name, i, herr.msg)
				return nil, herr
			}
			images[i] = nil
		}
	}
	if herr := c.run(jobs); herr != nil {
		return nil, herr
	}
	resp := &InferResponse{ModelName: c.name, ModelVersion: strconv.Itoa(c.v.number), ID: req.ID}
	for _, o := range outs {
		if o.k == 0 {
			probs := make([]float32, 0, n*classes)
			for _, j := range jobs {
				probs = append(probs, j.probs...)
			}
			resp.Outputs = append(resp.Outputs, ResponseOutput{Name: o.name, Shape: []int64{int64(n), int64(classes)}, Datatype: "FP32", Data: probs})
			continue
		}
		k := min(o.k, classes)
		top := make([]string, 0, n*k)
		for _, j := range jobs {
			for _, cl := range infer.TopK(j.probs, k, names) {
				top = append(top, strconv.FormatFloat(float64(cl.Prob), 'g', -1, 32)+":"+strconv.Itoa(cl.Index)+":"+cl.Name)
			}
		}
		resp.Outputs = append(resp.Outputs, ResponseOutput{Name: o.name, Shape: []int64{int64(n), int64(k)}, Datatype: "BYTES", Data: top})
	}
	return resp, nil
}

// jobCost bounds the memory of one queued image: its input, its
// probabilities and the job's own fields.
func jobCost(classes int) int64 { return int64(infer.InputSize+classes)*4 + 256 }

// responseCost bounds the memory of the answer to n images with outs:
// the outputs' data, and four times their JSON text (json.Marshal's
// growing buffer, its copy, and the newline appended).
func responseCost(n, classes int, outs []output, labels []string, id, model string) int64 {
	label := 0
	for _, l := range labels {
		label = max(label, len(l))
	}
	data := int64(0)
	text := int64(4<<10 + 6*(len(id)+len(model)))
	for _, o := range outs {
		text += int64(6*len(o.name) + 64)
		if o.k == 0 {
			data += int64(n) * int64(classes) * 4
			text += int64(n) * int64(classes) * 16 // "-1.17549435e-38,"
			continue
		}
		k := int64(min(o.k, classes))
		elem := int64(15 + 1 + 20 + 1 + label) // prob:index:label
		data += int64(n) * k * (elem + 16)     // string header and bytes
		text += int64(n) * k * (6*elem + 3)    // escaped, quoted, comma
	}
	return data + 4*text
}

// parseInferRequest reads the request's JSON object strictly (scanner):
// the protocol's keys exactly, each once, one input, at most one of each
// output, parameters of the protocol's types. The input's data is not
// decoded: it stays a span of body, checked to be JSON.
func parseInferRequest(body []byte) (*InferRequest, *httpError) {
	var req InferRequest
	s := &scanner{b: body}
	err := s.object(4, func(key string) error {
		var err error
		switch key {
		case "id":
			req.ID, err = s.str(maxStringLen)
		case "parameters":
			req.Parameters, err = s.params()
		case "inputs":
			err = s.array(1, fmt.Sprintf("input (the model takes one, %q or %q)", InputTensor, ImageTensor), func(int) error {
				in, err := s.input()
				req.Inputs = append(req.Inputs, in)
				return err
			})
		case "outputs":
			err = s.array(2, fmt.Sprintf("outputs (the model has two, %q and %q)", ProbTensor, TopKTensor), func(int) error {
				o, err := s.output()
				req.Outputs = append(req.Outputs, o)
				return err
			})
		default:
			return s.errAt("unknown key %q in the request (its keys are \"id\", \"parameters\", \"inputs\" and \"outputs\", case-sensitive)", key)
		}
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		return nil
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, fail(http.StatusBadRequest, "the request is not an inference request object: %v", err)
	}
	if len(req.Inputs) != 1 {
		return nil, fail(http.StatusBadRequest, "%d inputs: send one, %q or %q", len(req.Inputs), InputTensor, ImageTensor)
	}
	return &req, nil
}

// input reads one object of "inputs".
func (s *scanner) input() (RequestInput, error) {
	var in RequestInput
	err := s.object(5, func(key string) error {
		var err error
		switch key {
		case "name":
			in.Name, err = s.str(maxStringLen)
		case "datatype":
			in.Datatype, err = s.str(maxStringLen)
		case "shape":
			in.Shape = []int64{}
			err = s.array(maxDims, "dimensions", func(int) error {
				d, err := s.integer()
				in.Shape = append(in.Shape, d)
				return err
			})
		case "parameters":
			in.Parameters, err = s.params()
		case "data":
			s.ws()
			start := s.i
			err = s.skip(maxDepth)
			in.Data = s.b[start:s.i]
		default:
			return s.errAt("unknown key %q in an input (its keys are \"name\", \"shape\", \"datatype\", \"parameters\" and \"data\", case-sensitive)", key)
		}
		if err != nil {
			return fmt.Errorf("input %q: %w", key, err)
		}
		return nil
	})
	return in, err
}

// output reads one object of "outputs".
func (s *scanner) output() (RequestOutput, error) {
	var o RequestOutput
	err := s.object(2, func(key string) error {
		var err error
		switch key {
		case "name":
			o.Name, err = s.str(maxStringLen)
		case "parameters":
			o.Parameters, err = s.params()
		default:
			return s.errAt("unknown key %q in an output (its keys are \"name\" and \"parameters\", case-sensitive)", key)
		}
		if err != nil {
			return fmt.Errorf("output %q: %w", key, err)
		}
		return nil
	})
	return o, err
}

// output is an output to answer under name: the probabilities (k == 0)
// or the k most probable classes as "prob:index:label" strings.
type output struct {
	name string
	k    int
}

// wantedOutputs resolves the request's outputs. Without "outputs" the
// answer has every output, "top_k" with the request's "top_k" parameter
// or Config.DefaultK. Each output may be named once. An output's
// "classification" parameter (Triton's classification extension) turns
// it into its k most probable classes; "top_k" takes its k from its own
// "classification" or "top_k" parameter, else the request's "top_k", else
// Config.DefaultK.
func (s *Server) wantedOutputs(req *InferRequest, classes int) ([]output, *httpError) {
	if b, ok := req.Parameters["binary_data_output"].(bool); ok && b {
		return nil, fail(http.StatusBadRequest, "%s", binaryDataRefusal)
	}
	reqK, herr := intParam(req.Parameters, "top_k")
	if herr != nil {
		return nil, herr
	}
	if len(req.Outputs) == 0 {
		return []output{{name: ProbTensor}, {TopKTensor, cmpOr(reqK, s.cfg.DefaultK)}}, nil
	}
	var outs []output
	for _, o := range req.Outputs {
		if b, ok := o.Parameters["binary_data"].(bool); ok && b {
			return nil, fail(http.StatusBadRequest, "output %q: %s", o.Name, binaryDataRefusal)
		}
		for _, prev := range outs {
			if prev.name == o.Name {
				return nil, fail(http.StatusBadRequest, "output %q is named twice: name each output once", o.Name)
			}
		}
		cls, herr := intParam(o.Parameters, "classification")
		if herr != nil {
			return nil, herr
		}
		switch o.Name {
		case ProbTensor:
			outs = append(outs, output{o.Name, cls})
		case TopKTensor:
			k, herr := intParam(o.Parameters, "top_k")
			if herr != nil {
				return nil, herr
			}
			outs = append(outs, output{o.Name, cmpOr(cls, k, reqK, s.cfg.DefaultK)})
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

// checkInput checks the input's name, datatype and shape against what
// the model takes, and returns N and the shape the data must have.
func (s *Server) checkInput(in *RequestInput) (int, []int64, *httpError) {
	var rest []int64
	switch in.Name {
	case InputTensor:
		if in.Datatype != "FP32" {
			return 0, nil, fail(http.StatusBadRequest, "input %q has datatype %q, want FP32", in.Name, in.Datatype)
		}
		rest = []int64{3, 32, 32}
	case ImageTensor:
		if in.Datatype != "BYTES" {
			return 0, nil, fail(http.StatusBadRequest, "input %q has datatype %q, want BYTES", in.Name, in.Datatype)
		}
		if len(in.Shape) == 2 {
			rest = []int64{1}
		}
	default:
		return 0, nil, fail(http.StatusBadRequest, "unexpected input %q: the model takes %q (FP32 [N,3,32,32]) or %q (BYTES [N], PNG or JPEG, base64)", in.Name, InputTensor, ImageTensor)
	}
	want := "[N" + strings.TrimPrefix(dimsText(rest), "[")
	if len(rest) > 0 {
		want = "[N," + strings.TrimPrefix(dimsText(rest), "[")
	}
	if len(in.Shape) != 1+len(rest) {
		return 0, nil, fail(http.StatusBadRequest, "input %q has shape %v, want %s", in.Name, in.Shape, want)
	}
	for i, d := range rest {
		if in.Shape[1+i] != d {
			return 0, nil, fail(http.StatusBadRequest, "input %q has shape %v, want %s", in.Name, in.Shape, want)
		}
	}
	n := in.Shape[0]
	if n < 1 || n > int64(s.cfg.MaxImages) {
		return 0, nil, fail(http.StatusBadRequest, "input %q has shape %v: N must be 1 to %d", in.Name, in.Shape, s.cfg.MaxImages)
	}
	if in.Data == nil {
		return 0, nil, fail(http.StatusBadRequest, "input %q has no \"data\"", in.Name)
	}
	return int(n), in.Shape, nil
}

// decodeFP32 decodes the values of an FP32 [N,3,32,32] input into the
// jobs' inputs, flat or nested as the shape, refusing any value past the
// shape's count before it is read.
func decodeFP32(in *RequestInput, dims []int64, jobs []*job) *httpError {
	s := &scanner{b: in.Data}
	err := s.tensor(dims, func(k int) error {
		if c := s.peek(); c != '-' && (c < '0' || c > '9') {
			return s.errAt("element %d is %s, not a number", k, s.describe())
		}
		at := s.i
		num, err := s.number()
		if err != nil {
			return fmt.Errorf("element %d: %w", k, err)
		}
		f, err := strconv.ParseFloat(string(num), 32)
		if err != nil {
			s.i = at
			return s.errAt("element %d, %s, is not a finite float32", k, num)
		}
		jobs[k/infer.InputSize].x[k%infer.InputSize] = float32(f)
		return nil
	})
	if err != nil {
		return fail(http.StatusBadRequest, "input %q data: %v", in.Name, err)
	}
	return nil
}

// decodeImages decodes the base64 elements of a BYTES [N] (or [N,1])
// input.
func decodeImages(in *RequestInput, dims []int64) ([][]byte, *httpError) {
	s := &scanner{b: in.Data}
	out := make([][]byte, dims[0])
	err := s.tensor(dims, func(k int) error {
		if s.peek() != '"' {
			return s.errAt("element %d is %s, not a string", k, s.describe())
		}
		at := s.i
		span, slow, err := s.strSpan()
		if err != nil {
			return fmt.Errorf("element %d: %w", k, err)
		}
		if slow {
			var str string
			if err := json.Unmarshal(s.b[at:s.i], &str); err != nil {
				return fmt.Errorf("element %d: %w", k, err)
			}
			span = []byte(str)
		}
		b := make([]byte, base64.StdEncoding.DecodedLen(len(span)))
		n, err := base64.StdEncoding.Decode(b, span)
		if err != nil {
			return fmt.Errorf("element %d is not base64: %w", k, err)
		}
		out[k] = b[:n]
		return nil
	})
	if err != nil {
		return nil, fail(http.StatusBadRequest, "input %q data: %v", in.Name, err)
	}
	return out, nil
}
