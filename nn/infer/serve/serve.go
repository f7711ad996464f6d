// Package serve is an HTTP classification service for infer.Models,
// built on net/http alone. cmd/serve is its command-line front end; a Go
// program can mount Server (an http.Handler) in its own mux or run it with
// Serve.
//
// # Endpoints
//
// The Open Inference Protocol (KServe v2, REST), spoken by Triton, KServe,
// Seldon MLServer and OpenVINO Model Server clients:
//
//	GET  /v2/health/live                   {"live":true}
//	GET  /v2/health/ready                  {"ready":true}, 503 while draining
//	GET  /v2                               server metadata
//	GET  /v2/models/{name}[/versions/{v}]  model metadata
//	GET  /v2/models/{name}[/versions/{v}]/ready
//	POST /v2/models/{name}[/versions/{v}]/infer
//	POST /v2/repository/models/{name}/load   reload the model's file
//	POST /v2/repository/models/{name}/unload stop serving the model
//	POST /v2/repository/index                the models and their state
//
// (protocol.go describes the tensors), and this package's own:
//
//	POST /classify?k=5&model=NAME  body: one image; answers the k most probable classes
//	GET  /healthz                  {"status":"ok","model":"..."}, 503 while draining
//	GET  /metrics                  Prometheus text exposition format 0.0.4
//	GET  /metrics.json             Metrics as JSON
//
// The body of /classify is one image, its kind given by Content-Type:
//
//	image/png, image/jpeg     any size: converted to RGB, shorter side resized
//	                          to 32 (bilinear), centre-cropped to 32×32 exactly as
//	                          torchvision's Resize(32)+CenterCrop(32) (infer.RawImage)
//	application/octet-stream  a raw CIFAR-10 image: 3072 bytes (R, G and B planes
//	                          of 32×32, rows top to bottom) or a 3073-byte record of
//	                          the binary release (label byte first, ignored)
//
// k defaults to Config.DefaultK and is clamped to the number of classes;
// model defaults to the first model. The answer is
//
//	{"predictions":[{"class":3,"label":"cat","prob":0.8311},...]}
//
// with probabilities as float32 values (their JSON text parses back to the
// exact float32). Errors are JSON too: {"error":"...","status":415} from
// /classify and the other endpoints of this package, {"error":"..."} from
// the protocol's. The statuses: 400 for a malformed body or query, 404 for
// an unknown path or model, 405 for a wrong method, 408 when the client
// does not send its body within Config.BodyTimeout or at
// Config.MinBodyRate, 413 for a body over Config.MaxBodyBytes, an image
// over Config.MaxPixels, one with an aspect ratio over infer.MaxAspect or
// one whose decoding alone would exceed Config.MemoryBudget, 415 for another Content-Type, 429 when
// Config.MaxInFlight requests are already being handled, 503 when the
// memory budget stays exhausted for Config.AdmissionWait (both with
// Retry-After) and while shutting down, 500 when the model's output is
// not finite.
//
// # Admission
//
// A request holds no slot while its body arrives: it takes one of the
// Config.MaxInFlight slots only once the whole body is read, so clients
// that send slowly cannot hold capacity (they are cut off with 408 when
// they stay under Config.MinBodyRate). Memory is charged to
// Config.MemoryBudget as it is taken: the body's buffer as it grows with
// the bytes that arrived (a declared Content-Length reserves nothing);
// a fixed bound for parsing a protocol request (its parser refuses an
// array or object over its limit as it reads it, and copies no tensor
// data); once the shape and the outputs are read, and before any of it is
// allocated, the decoded tensors, the queued images and the whole answer
// (every output and its JSON text); and, before an image is decoded, what
// its decoding and preprocessing will take, computed from its header
// (width × height × the decoder's bytes per pixel, plus the preprocessing
// buffers). A charge waits up to Config.AdmissionWait for room.
//
// # Batching
//
// Handlers decode and preprocess their images concurrently and queue them;
// Config.Workers goroutines per model each take a queued image and gather
// more into one batch until it has Config.MaxBatch images, Config.MaxDelay
// has passed since its first image, or the queue is empty while no other
// request for that model is being received or decoded (so a lone request
// never waits). An image's probabilities do not depend on the batch it ran
// in, bit for bit.
//
// # Models and reloading
//
// A server serves one or more named models (Source). Reload and
// ReloadChanged load a model's file again: the new model is checked (a
// probe batch must give finite probabilities that sum to 1) and then takes
// the new requests, while requests that already hold the old one finish
// on it; a file that fails to load or to pass the check leaves the old
// model serving, and the failure is returned, logged and counted.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxgen/proxgen/internal/regfile"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// Config sets the limits of a Server; zero fields take the defaults noted.
type Config struct {
	// MaxBatch is the largest number of images run together; default 32.
	MaxBatch int
	// MaxDelay is how long a batch waits for more images after its first;
	// default 2ms.
	MaxDelay time.Duration
	// Workers is the number of batches of one model that may run at once;
	// default 1 (one batch already uses every core).
	Workers int
	// MaxBodyBytes bounds a request body; default 8 MiB.
	MaxBodyBytes int64
	// MaxPixels bounds the width×height of a PNG or JPEG (checked before
	// decoding); default 4096×4096.
	MaxPixels int
	// MaxImages bounds the images of one protocol request; default 64.
	MaxImages int
	// MaxInFlight bounds the inference requests handled at once once their
	// body has arrived (decoding, queued or running); more get 429.
	// Default 256.
	MaxInFlight int
	// MemoryBudget bounds, in bytes, the memory that requests may take
	// together for their bodies (charged as the buffers grow), the parsing
	// of protocol requests, their decoded tensors and answers (bounded
	// before they are allocated) and the decoding and preprocessing of
	// images (estimated from their headers); default
	// DefaultMemoryBudget().
	MemoryBudget int64
	// AdmissionWait is how long a request waits for room in MemoryBudget
	// before it gets 503; default 1s. Keep it well under
	// WriteTimeout: an answer later than that cannot be written.
	AdmissionWait time.Duration
	// DefaultK is the number of classes answered when the request has no
	// k; default 5.
	DefaultK int
	// LatencyWindow is the number of recent requests the latency
	// percentiles of Metrics cover; default 10000.
	LatencyWindow int
	// ReadHeaderTimeout, WriteTimeout and IdleTimeout are the http.Server
	// timeouts Serve uses; defaults 5s, 30s and 60s.
	ReadHeaderTimeout, WriteTimeout, IdleTimeout time.Duration
	// BodyTimeout bounds the time a client has to send its body; default
	// 10s. A slower client gets 408.
	BodyTimeout time.Duration
	// MinBodyRate is the slowest a body may arrive, in bytes per second
	// averaged since the headers, once BodyGrace has passed; slower
	// clients get 408. Default 16 KiB/s; negative turns the check off.
	MinBodyRate int64
	// BodyGrace is the time a body may take before MinBodyRate applies;
	// default 1s.
	BodyGrace time.Duration
	// DrainTimeout bounds how long Serve waits for requests in flight
	// after its context is cancelled; default 30s.
	DrainTimeout time.Duration
	// DrainGrace is how long Serve keeps its listeners open after its
	// context is cancelled even with no request in flight, answering
	// readiness and new inference requests with 503, so that load
	// balancers see the drain (capped by DrainTimeout); default 2s,
	// negative for none.
	DrainGrace time.Duration
	// LoadTimeout bounds a model load from its file (read, build and
	// check); a load that takes longer is abandoned with an error, and
	// the model serving keeps serving. Default 30s.
	LoadTimeout time.Duration
	// MaxModelBytes bounds the size of a model file; default 256 MiB
	// (VGG-16 for CIFAR-10 takes 60 MB).
	MaxModelBytes int64
	// Log receives reload results and shutdown reports; nil means
	// log.Default().
	Log *log.Logger
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxBatch, 32)
	def(&c.Workers, 1)
	def(&c.MaxPixels, 4096*4096)
	def(&c.MaxImages, 64)
	def(&c.MaxInFlight, 256)
	def(&c.DefaultK, 5)
	def(&c.LatencyWindow, 10000)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget()
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = 16 << 10
	}
	defDur(&c.MaxDelay, 2*time.Millisecond)
	defDur(&c.AdmissionWait, time.Second)
	defDur(&c.ReadHeaderTimeout, 5*time.Second)
	defDur(&c.BodyTimeout, 10*time.Second)
	defDur(&c.BodyGrace, time.Second)
	defDur(&c.WriteTimeout, 30*time.Second)
	defDur(&c.IdleTimeout, 60*time.Second)
	defDur(&c.DrainTimeout, 30*time.Second)
	defDur(&c.DrainGrace, 2*time.Second)
	defDur(&c.LoadTimeout, 30*time.Second)
	if c.MaxModelBytes == 0 {
		c.MaxModelBytes = 256 << 20
	}
	if c.Log == nil {
		c.Log = log.Default()
	}
	return c
}

// Source is a model a server serves: its name in URLs, and either the
// model itself or the file it is loaded (and reloaded) from.
type Source struct {
	// Name is the model's name in the protocol's URLs and in ?model=.
	Name string
	// Path is the model file. New loads it when Model is nil; Reload
	// loads it again.
	Path string
	// Spec overrides the file's metadata (infer.Load).
	Spec models.Spec
	// Options are infer.Load's options (infer.Dense, infer.MinZeros).
	Options []infer.Option
	// Model, if not nil, is served as given (and Path, if set, is only
	// used by Reload).
	Model *infer.Model
}

// Server classifies images with one or more models. It is an
// http.Handler; create it with New or NewModels and stop it with Close
// (Serve does both around an http.Server).
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics
	models  map[string]*entry
	names   []string // in the order given; names[0] is /classify's default

	slots    chan struct{} // one token per request in flight
	budget   *budget       // memory for decoding and preprocessing
	draining atomic.Bool
	jobs     sync.Pool // *job
	retiring sync.WaitGroup

	readMu   sync.Mutex
	readers  map[*http.ResponseController]struct{} // requests reading their body
	aborting bool                                  // the drain deadline passed: readers are cut off

	closeOnce sync.Once

	active     atomic.Int64 // requests being handled by ServeHTTP
	splitAdmin atomic.Bool  // the admin endpoints are on their own listener

	// readFile reads a model file (regfile.ReadFile; tests stall it).
	readFile func(path string, max int64) ([]byte, error)
}

// DefaultModelName is the name New gives its model.
const DefaultModelName = "model"

// New returns a server for m, named DefaultModelName, and starts its batch
// workers. It fails on a negative limit in cfg.
func New(m *infer.Model, cfg Config) (*Server, error) {
	return NewModels(cfg, Source{Name: DefaultModelName, Model: m})
}

// NewModels returns a server for the models of sources, loading those
// given by path, and starts their batch workers. It fails on a negative
// limit in cfg, on no source, on a repeated or invalid name, and on a
// model that does not load or pass the check.
func NewModels(cfg Config, sources ...Source) (*Server, error) {
	if cfg.MaxBatch < 0 || cfg.MaxDelay < 0 || cfg.Workers < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxPixels < 0 ||
		cfg.MaxImages < 0 || cfg.MaxInFlight < 0 || cfg.MemoryBudget < 0 || cfg.AdmissionWait < 0 ||
		cfg.DefaultK < 0 || cfg.LatencyWindow < 0 || cfg.ReadHeaderTimeout < 0 || cfg.BodyTimeout < 0 ||
		cfg.BodyGrace < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0 || cfg.DrainTimeout < 0 ||
		cfg.LoadTimeout < 0 || cfg.MaxModelBytes < 0 {
		return nil, fmt.Errorf("serve: negative limit in %+v", cfg)
	}
	if len(sources) == 0 {
		return nil, errors.New("serve: no model to serve")
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:      cfg,
		mux:      http.NewServeMux(),
		models:   map[string]*entry{},
		slots:    make(chan struct{}, cfg.MaxInFlight),
		budget:   newBudget(cfg.MemoryBudget),
		readers:  map[*http.ResponseController]struct{}{},
		readFile: regfile.ReadFile,
	}
	for _, src := range sources {
		if err := validName(src.Name); err != nil {
			return nil, err
		}
		if _, dup := s.models[src.Name]; dup {
			return nil, fmt.Errorf("serve: model name %q given twice", src.Name)
		}
		if src.Model == nil && src.Path == "" {
			return nil, fmt.Errorf("serve: model %q has neither a model nor a path", src.Name)
		}
		s.models[src.Name] = &entry{src: src}
		s.names = append(s.names, src.Name)
	}
	s.metrics = newMetrics(cfg.LatencyWindow, cfg.MaxBatch, s.names)
	for i, name := range s.names {
		e := s.models[name]
		v, err := s.firstVersion(e)
		if err != nil {
			err = fmt.Errorf("serve: %w", err)
			for _, prev := range s.names[:i] {
				s.models[prev].cur.stop()
			}
			return nil, err
		}
		e.cur, e.last = v, 1
	}
	s.routes()
	return s, nil
}

// validName accepts the names that can stand in a URL path segment and a
// Prometheus label without escaping surprises.
func validName(name string) error {
	if name == "" {
		return errors.New("serve: empty model name")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') || name == "." || name == ".." {
			return fmt.Errorf("serve: model name %q: use letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("/classify", s.classify)
	s.mux.HandleFunc("/healthz", s.health)
	s.mux.HandleFunc("/metrics", s.servePrometheus)
	s.mux.HandleFunc("/metrics.json", s.serveMetricsJSON)
	s.mux.HandleFunc("/v2", s.serverMetadata)
	s.mux.HandleFunc("/v2/{$}", s.serverMetadata)
	s.mux.HandleFunc("/v2/health/live", s.live)
	s.mux.HandleFunc("/v2/health/ready", s.ready)
	s.mux.HandleFunc("/v2/models/{name}", s.modelMetadata)
	s.mux.HandleFunc("/v2/models/{name}/versions/{version}", s.modelMetadata)
	s.mux.HandleFunc("/v2/models/{name}/ready", s.modelReady)
	s.mux.HandleFunc("/v2/models/{name}/versions/{version}/ready", s.modelReady)
	s.mux.HandleFunc("/v2/models/{name}/infer", s.v2Infer)
	s.mux.HandleFunc("/v2/models/{name}/versions/{version}/infer", s.v2Infer)
	s.mux.HandleFunc("/v2/repository/index", s.repositoryIndex)
	s.mux.HandleFunc("/v2/repository/models/{name}/load", s.repositoryLoad)
	s.mux.HandleFunc("/v2/repository/models/{name}/unload", s.repositoryUnload)
	s.mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s", r.URL.Path))
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s (POST /classify, GET /healthz, GET /metrics, /v2/...)", r.URL.Path))
	})
}

// Config returns the server's limits with the defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP routes a request to its endpoint. While the server drains,
// every answer carries Connection: close.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	if s.splitAdmin.Load() && adminPath(r.URL.Path) {
		writeV2Error(w, http.StatusNotFound, fmt.Sprintf("%s is served on the admin address only", r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Metrics returns a snapshot of the server's counters.
func (s *Server) Metrics() Metrics { return s.metrics.snapshot() }

// Close stops the batch workers once the requests holding a model have
// finished; requests after Close get 503. Call it after the HTTP server
// has stopped (http.Server.Shutdown), so that no request is in flight.
func (s *Server) Close() {
	s.draining.Store(true)
	s.closeOnce.Do(func() {
		for _, name := range s.names {
			s.models[name].close()
		}
		s.retiring.Wait()
	})
}

// ErrDrainTimeout is returned (wrapped) by Serve when requests were still
// in flight at Config.DrainTimeout: those still sending their body were
// answered 503, the others were cut off.
var ErrDrainTimeout = errors.New("serve: the drain deadline passed with requests in flight")

// Serve serves s on ln until ctx is cancelled, then drains and shuts down
// (ServeWithAdmin with no admin listener).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeWithAdmin(ctx, ln, nil)
}

// ServeWithAdmin serves s on ln until ctx is cancelled, then drains and
// shuts down gracefully. With admin not nil, the administrative endpoints
// — the model_repository extension (load, unload, index) and the metrics
// — are served on admin only (and answered 404 on ln), so that they can
// stay off the port that clients reach.
//
// The drain: the readiness endpoints turn to 503 and new inference
// requests are answered 503 with Retry-After (and Connection: close),
// while the listeners stay open — for Config.DrainGrace at least, so that
// load balancers and readiness probes see the 503 instead of refused
// connections, and then until the requests in flight have finished, for
// at most Config.DrainTimeout in all. Then the listeners close and the
// workers stop. It returns nil after a clean shutdown. If requests are
// still in flight at the drain deadline, those still receiving their body
// are answered 503, the connections are closed a second later at most,
// and it returns an error wrapping ErrDrainTimeout.
//
// It answers net/http's own protocol errors (a header over 64 KiB, a
// malformed request line, TLS on this plain port) with the JSON error
// form as well (jsonErrorListener).
func (s *Server) ServeWithAdmin(ctx context.Context, ln, admin net.Listener) error {
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			// A backstop for the bodies no handler reads (net/http
			// discards them); the inference handlers set their own read
			// deadlines.
			ReadTimeout:    s.cfg.ReadHeaderTimeout + s.cfg.BodyTimeout,
			WriteTimeout:   s.cfg.WriteTimeout,
			IdleTimeout:    s.cfg.IdleTimeout,
			MaxHeaderBytes: 64 << 10,
			ErrorLog:       s.cfg.Log,
		}
	}
	servers := []*http.Server{newServer(s)}
	listeners := []net.Listener{ln}
	if admin != nil {
		s.splitAdmin.Store(true)
		servers = append(servers, newServer(http.HandlerFunc(s.serveAdmin)))
		listeners = append(listeners, admin)
	}
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { errc <- hs.Serve(jsonErrorListener{listeners[i]}) }()
	}
	shutdown := func(c context.Context) error {
		var first error
		for _, hs := range servers {
			if err := hs.Shutdown(c); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	select {
	case err := <-errc:
		shutdown(context.Background())
		s.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	deadline := time.Now().Add(s.cfg.DrainTimeout)
	drain, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// The listeners stay open through the grace and while requests are
	// in flight (up to the deadline): new requests get 503.
	grace := time.NewTimer(min(s.cfg.DrainGrace, s.cfg.DrainTimeout))
	select {
	case <-grace.C:
	case <-drain.Done():
	}
	for s.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	err := shutdown(drain)
	if err == nil {
		for range servers {
			<-errc // http.ErrServerClosed
		}
		s.Close()
		return nil
	}
	n := s.abortReaders()
	last, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if shutdown(last) != nil {
		for _, hs := range servers {
			hs.Close()
		}
	}
	for range servers {
		<-errc
	}
	s.Close()
	return fmt.Errorf("%w (%v; %d receiving their body answered 503)", ErrDrainTimeout, s.cfg.DrainTimeout, n)
}

// adminPath reports whether path is an administrative endpoint: the
// model_repository extension's and the metrics.
func adminPath(path string) bool {
	return path == "/metrics" || path == "/metrics.json" || strings.HasPrefix(path, "/v2/repository/")
}

// serveAdmin serves the administrative endpoints on the admin listener.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if !adminPath(r.URL.Path) && r.URL.Path != "/v2/health/live" && r.URL.Path != "/v2/health/ready" && r.URL.Path != "/healthz" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s on the admin address (/metrics, /metrics.json, /v2/repository/..., health)", r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// abortReaders makes the body reads of every request still receiving its
// body, and of any that starts to, fail at once; their handlers answer
// 503. It returns how many were receiving.
func (s *Server) abortReaders() int {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	s.aborting = true
	for rc := range s.readers {
		rc.SetReadDeadline(time.Now())
	}
	return len(s.readers)
}

// httpError is a failed request: its status and message.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func fail(status int, format string, args ...any) *httpError {
	return &httpError{status, fmt.Sprintf(format, args...)}
}

// Response is the answer to a successful classification.
type Response struct {
	Predictions []infer.Class `json:"predictions"`
}

// ErrorResponse is the answer to a failed request of this package's own
// endpoints; the protocol's endpoints answer {"error": "..."} alone.
type ErrorResponse struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// writeJSON encodes v before it writes the header, so that a value that
// cannot be encoded is answered 500 instead of a 200 with no body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Error: "encoding the answer: " + err.Error(), Status: status})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n')) // a failed write means the client left
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Status: status})
}

// V2Error is the Open Inference Protocol's error answer.
type V2Error struct {
	Error string `json:"error"`
}

func writeV2Error(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, V2Error{Error: msg})
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string `json:"status"`
	Model  string `json:"model"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	desc := ""
	if v, ok := s.models[s.names[0]].acquire(); ok {
		desc = v.model.String()
		v.release()
	}
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, Health{Status: "draining", Model: desc})
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok", Model: desc})
}

func (s *Server) serveMetricsJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Metrics())
}
