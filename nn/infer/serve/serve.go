// Package serve is an HTTP classification service for an infer.Model,
// built on net/http alone. cmd/serve is its command-line front end; a Go
// program can mount Server (an http.Handler) in its own mux or run it with
// Serve.
//
// # Endpoints
//
//	POST /classify?k=5   body: one image; answers the k most probable classes
//	GET  /healthz        {"status":"ok","model":"..."}, 503 while draining
//	GET  /metrics        Metrics as JSON
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
// k defaults to Config.DefaultK and is clamped to the number of classes.
// The answer is
//
//	{"predictions":[{"class":3,"label":"cat","prob":0.8311},...]}
//
// with probabilities as float32 values (their JSON text parses back to the
// exact float32). Errors are JSON too, {"error":"...","status":415}: 400
// for a malformed body or query (truncated or corrupt image, wrong raw
// length, bad k), 405 for a wrong method, 408 when the client does not
// send its body within Config.ReadTimeout, 413 for a body over
// Config.MaxBodyBytes or an image over Config.MaxPixels, 415 for another
// Content-Type, 429 when Config.MaxInFlight requests are already being
// handled (with Retry-After), 503 while shutting down.
//
// # Batching
//
// Handlers decode and preprocess their images concurrently and queue them;
// Config.Workers goroutines each take a queued image and gather more into
// one batch until it has Config.MaxBatch images, Config.MaxDelay has passed
// since its first image, or the queue is empty while no other request is
// being received or decoded (so a lone request never waits). An image's
// probabilities do not depend on the batch it ran in, bit for bit.
package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxgen/proxgen/nn/infer"
)

// Config sets the limits of a Server; zero fields take the defaults noted.
type Config struct {
	// MaxBatch is the largest number of images run together; default 32.
	MaxBatch int
	// MaxDelay is how long a batch waits for more images after its first;
	// default 2ms.
	MaxDelay time.Duration
	// Workers is the number of batches that may run at once; default 1
	// (one batch already uses every core).
	Workers int
	// MaxBodyBytes bounds a request body; default 8 MiB.
	MaxBodyBytes int64
	// MaxPixels bounds the width×height of a PNG or JPEG (checked before
	// decoding); default 4096×4096.
	MaxPixels int
	// MaxInFlight bounds the classification requests handled at once
	// (reading, decoding, queued or running); more get 429. Default 256.
	MaxInFlight int
	// DefaultK is the number of classes answered when the request has no
	// k; default 5.
	DefaultK int
	// LatencyWindow is the number of recent requests the latency
	// percentiles of Metrics cover; default 10000.
	LatencyWindow int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server timeouts Serve uses; defaults 5s, 10s, 30s and 60s. A
	// client slower than ReadTimeout in sending its request gets 408.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// DrainTimeout bounds how long Serve waits for requests in flight
	// after its context is cancelled; default 30s.
	DrainTimeout time.Duration
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
	def(&c.MaxInFlight, 256)
	def(&c.DefaultK, 5)
	def(&c.LatencyWindow, 10000)
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	defDur(&c.MaxDelay, 2*time.Millisecond)
	defDur(&c.ReadHeaderTimeout, 5*time.Second)
	defDur(&c.ReadTimeout, 10*time.Second)
	defDur(&c.WriteTimeout, 30*time.Second)
	defDur(&c.IdleTimeout, 60*time.Second)
	defDur(&c.DrainTimeout, 30*time.Second)
	return c
}

// Server classifies images with one model. It is an http.Handler; create
// it with New and stop it with Close (Serve does both around an
// http.Server).
type Server struct {
	model   *infer.Model
	classes []string
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics

	slots     chan struct{} // one token per request in flight
	queue     chan *job     // preprocessed images waiting for a batch
	receiving atomic.Int64  // requests admitted whose image is not queued yet
	draining  atomic.Bool
	jobs      sync.Pool // *job

	mu      sync.RWMutex // guards closed against sends on queue
	closed  bool
	workers sync.WaitGroup
}

// job is one image on its way through a batch.
type job struct {
	x     []float32 // preprocessed input, infer.InputSize values
	probs []float32 // the image's probabilities, set by the worker
	done  chan struct{}
}

// New returns a server for m and starts its batch workers. It fails on a
// negative limit in cfg.
func New(m *infer.Model, cfg Config) (*Server, error) {
	if cfg.MaxBatch < 0 || cfg.MaxDelay < 0 || cfg.Workers < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxPixels < 0 ||
		cfg.MaxInFlight < 0 || cfg.DefaultK < 0 || cfg.LatencyWindow < 0 || cfg.ReadHeaderTimeout < 0 ||
		cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0 || cfg.DrainTimeout < 0 {
		return nil, fmt.Errorf("serve: negative limit in %+v", cfg)
	}
	cfg = cfg.withDefaults()
	s := &Server{
		model:   m,
		classes: m.Spec().Classes,
		cfg:     cfg,
		mux:     http.NewServeMux(),
		metrics: newMetrics(cfg.LatencyWindow, cfg.MaxBatch),
		slots:   make(chan struct{}, cfg.MaxInFlight),
		queue:   make(chan *job, cfg.MaxInFlight),
	}
	s.mux.HandleFunc("/classify", s.classify)
	s.mux.HandleFunc("/healthz", s.health)
	s.mux.HandleFunc("/metrics", s.serveMetrics)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s (POST /classify, GET /healthz, GET /metrics)", r.URL.Path))
	})
	for range cfg.Workers {
		s.workers.Add(1)
		go s.work()
	}
	return s, nil
}

// Config returns the server's limits with the defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP routes a request to its endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Metrics returns a snapshot of the server's counters.
func (s *Server) Metrics() Metrics { return s.metrics.snapshot() }

// Close stops the batch workers once the images already queued are
// classified; requests after Close get 503. Call it after the HTTP server
// has stopped (http.Server.Shutdown), so that no request is in flight.
func (s *Server) Close() {
	s.draining.Store(true)
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	s.workers.Wait()
}

// Serve serves s on ln until ctx is cancelled, then shuts down gracefully:
// /healthz turns to 503, the listener closes, requests in flight finish
// (for at most Config.DrainTimeout), and the workers stop. It returns nil
// after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	drain, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	err := hs.Shutdown(drain)
	<-errc // http.ErrServerClosed
	s.Close()
	if err != nil {
		return fmt.Errorf("serve: shutting down: %w", err)
	}
	return nil
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

// ErrorResponse is the answer to a failed request.
type ErrorResponse struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Status: status})
}

func (s *Server) classify(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST with an image body")
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.metrics.begin()
		s.metrics.end(http.StatusTooManyRequests, time.Since(start))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many requests in flight (limit %d); retry later", s.cfg.MaxInFlight))
		return
	}
	defer func() { <-s.slots }()
	s.metrics.begin()
	status := http.StatusOK
	defer func() { s.metrics.end(status, time.Since(start)) }()

	resp, herr := s.handle(r)
	if herr != nil {
		status = herr.status
		if status == http.StatusRequestTimeout || status == http.StatusRequestEntityTooLarge {
			w.Header().Set("Connection", "close")
		}
		writeError(w, status, herr.msg)
		return
	}
	writeJSON(w, status, resp)
}

// handle reads, decodes and classifies the image of r.
func (s *Server) handle(r *http.Request) (*Response, *httpError) {
	s.receiving.Add(1)
	queued := false
	defer func() {
		if !queued {
			s.receiving.Add(-1)
		}
	}()
	if s.draining.Load() {
		return nil, fail(http.StatusServiceUnavailable, "the server is shutting down")
	}
	k := s.cfg.DefaultK
	if v := r.URL.Query().Get("k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fail(http.StatusBadRequest, "query k=%q: want a positive integer", v)
		}
		k = n
	}
	kind, err := contentKind(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, fail(http.StatusUnsupportedMediaType, "%v", err)
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, fail(http.StatusRequestEntityTooLarge, "body of %d bytes is over the limit of %d", r.ContentLength, s.cfg.MaxBodyBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodyBytes+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fail(http.StatusRequestTimeout, "the body did not arrive within %v", s.cfg.ReadTimeout)
	case err != nil:
		return nil, fail(http.StatusBadRequest, "reading the body: %v", err)
	case int64(len(body)) > s.cfg.MaxBodyBytes:
		return nil, fail(http.StatusRequestEntityTooLarge, "body over the limit of %d bytes", s.cfg.MaxBodyBytes)
	}

	j := s.getJob()
	defer s.jobs.Put(j)
	if herr := s.preprocess(j.x, kind, body); herr != nil {
		return nil, herr
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fail(http.StatusServiceUnavailable, "the server is shutting down")
	}
	s.queue <- j // never blocks: the queue holds MaxInFlight jobs
	queued = true
	s.receiving.Add(-1)
	s.mu.RUnlock()
	<-j.done
	return &Response{Predictions: infer.TopK(j.probs, k, s.classes)}, nil
}

// Kinds of request bodies.
const (
	kindPNG = iota
	kindJPEG
	kindRaw
)

func contentKind(ct string) (int, error) {
	const accepted = "image/png, image/jpeg or application/octet-stream (raw CIFAR-10)"
	if ct == "" {
		return 0, fmt.Errorf("no Content-Type: send %s", accepted)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, fmt.Errorf("Content-Type %q: %v", ct, err)
	}
	switch mt {
	case "image/png":
		return kindPNG, nil
	case "image/jpeg":
		return kindJPEG, nil
	case "application/octet-stream":
		return kindRaw, nil
	}
	return 0, fmt.Errorf("Content-Type %q is not supported: send %s", mt, accepted)
}

// preprocess decodes body and writes the network input into x.
func (s *Server) preprocess(x []float32, kind int, body []byte) *httpError {
	if kind == kindRaw {
		if err := s.model.PreprocessRaw(x, body); err != nil {
			return fail(http.StatusBadRequest, "%v", err)
		}
		return nil
	}
	name, decodeConfig, decode := "PNG", png.DecodeConfig, png.Decode
	if kind == kindJPEG {
		name, decodeConfig, decode = "JPEG", jpeg.DecodeConfig, jpeg.Decode
	}
	cfg, err := decodeConfig(bytes.NewReader(body))
	if err != nil {
		return fail(http.StatusBadRequest, "decoding the %s header: %v", name, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return fail(http.StatusBadRequest, "%s image of %d×%d pixels", name, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(s.cfg.MaxPixels) {
		return fail(http.StatusRequestEntityTooLarge, "%s image of %d×%d pixels is over the limit of %d pixels", name, cfg.Width, cfg.Height, s.cfg.MaxPixels)
	}
	img, err := decode(bytes.NewReader(body))
	if err != nil {
		return fail(http.StatusBadRequest, "decoding the %s image: %v", name, err)
	}
	s.model.Preprocess(x, img)
	return nil
}

func (s *Server) getJob() *job {
	if j, ok := s.jobs.Get().(*job); ok {
		return j
	}
	return &job{x: make([]float32, infer.InputSize), done: make(chan struct{}, 1)}
}

// work runs batches until the queue is closed and empty.
func (s *Server) work() {
	defer s.workers.Done()
	var (
		batch []*job
		x     []float32
		probs []float32
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for first := range s.queue {
		batch = append(batch[:0], first)
		deadline := time.Now().Add(s.cfg.MaxDelay)
	gather:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case j, ok := <-s.queue:
				if !ok {
					break gather
				}
				batch = append(batch, j)
				continue
			default:
			}
			wait := time.Until(deadline)
			if wait <= 0 || s.receiving.Load() == 0 {
				break gather
			}
			timer.Reset(wait)
			select {
			case j, ok := <-s.queue:
				timer.Stop()
				if !ok {
					break gather
				}
				batch = append(batch, j)
			case <-timer.C:
				break gather
			}
		}
		x = x[:0]
		for _, j := range batch {
			x = append(x, j.x...)
		}
		probs = s.model.Probabilities(probs, x)
		s.metrics.batch(len(batch))
		c := s.model.NumClasses()
		for i, j := range batch {
			j.probs = append(j.probs[:0], probs[i*c:(i+1)*c]...)
			j.done <- struct{}{}
		}
	}
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string `json:"status"`
	Model  string `json:"model"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, Health{Status: "draining", Model: s.model.String()})
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok", Model: s.model.String()})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Metrics())
}
