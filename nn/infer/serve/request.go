package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/proxgen/proxgen/nn/infer"
)

// call is one inference request on its way: read, admitted, run.
type call struct {
	s       *Server
	e       *entry // nil for an unknown model
	name    string // the model's label in the metrics ("" if unknown)
	start   time.Time
	status  int
	reading bool // counted in e.receiving
	slot    bool
	v       *version
	charged int64 // bytes charged to the memory budget for the body and its parsing
}

// begin starts an inference request for model name, or fails (with the
// status to answer) when the model is unknown, the server is draining,
// the body does not arrive in time or in size, or no slot is free. On
// success the request holds a slot and a version of the model until end.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, name string) (*call, []byte, *httpError) {
	c := &call{s: s, start: time.Now(), status: http.StatusOK}
	s.metrics.beginReading()
	e, ok := s.models[name]
	if !ok {
		s.metrics.endReading()
		return c, nil, fail(http.StatusNotFound, "no model %q (models: %q)", name, s.names)
	}
	c.e, c.name = e, name
	c.reading = true
	e.receiving.Add(1)
	if s.draining.Load() {
		s.metrics.endReading()
		return c, nil, fail(http.StatusServiceUnavailable, "the server is shutting down")
	}
	body, herr := c.readBody(w, r)
	s.metrics.endReading()
	if herr != nil {
		return c, nil, herr
	}
	select {
	case s.slots <- struct{}{}:
		c.slot = true
	default:
		w.Header().Set("Retry-After", "1")
		return c, nil, fail(http.StatusTooManyRequests, "too many requests in flight (limit %d); retry later", s.cfg.MaxInFlight)
	}
	s.metrics.beginInFlight()
	if c.v, ok = e.acquire(); !ok {
		return c, nil, fail(http.StatusServiceUnavailable, "%s", e.unavailable())
	}
	return c, body, nil
}

// queued marks the request's images as queued: the batch workers no
// longer wait for it.
func (c *call) queued() {
	if c.reading {
		c.reading = false
		c.e.receiving.Add(-1)
	}
}

// end releases what the request holds and records its status.
func (c *call) end() {
	c.queued()
	if c.charged > 0 {
		c.s.budget.release(c.charged)
	}
	if c.v != nil {
		c.v.release()
	}
	if c.slot {
		<-c.s.slots
		c.s.metrics.endInFlight()
	}
	c.s.metrics.request(c.name, c.status, time.Since(c.start))
}

// charge charges n more bytes to the memory budget until the request
// ends, waiting up to Config.AdmissionWait for room.
func (c *call) charge(ctx context.Context, n int64, what string) *httpError {
	if herr := c.s.admit(ctx, n, what); herr != nil {
		return herr
	}
	c.charged += n
	return nil
}

// admit charges n bytes to the memory budget, waiting up to
// Config.AdmissionWait for room; the caller releases them.
func (s *Server) admit(ctx context.Context, n int64, what string) *httpError {
	if !s.budget.acquire(ctx, n, s.cfg.AdmissionWait) {
		s.metrics.admissionRefused()
		return fail(http.StatusServiceUnavailable, "the memory budget (%d bytes) stayed full for %v while %s; retry later", s.cfg.MemoryBudget, s.cfg.AdmissionWait, what)
	}
	return nil
}

// readBody reads the request body: within Config.BodyTimeout, at no less
// than Config.MinBodyRate after Config.BodyGrace, and no more than
// Config.MaxBodyBytes. The buffer grows as the body arrives (a declared
// Content-Length reserves nothing), and each growth is charged to the
// memory budget.
func (c *call) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpError) {
	s := c.s
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return nil, fail(http.StatusRequestEntityTooLarge, "body of %d bytes is over the limit of %d", r.ContentLength, limit)
	}
	rc := http.NewResponseController(w)
	s.readMu.Lock()
	if s.aborting {
		s.readMu.Unlock()
		return nil, fail(http.StatusServiceUnavailable, "the server is shutting down")
	}
	s.readers[rc] = struct{}{}
	s.readMu.Unlock()
	defer func() {
		s.readMu.Lock()
		delete(s.readers, rc)
		s.readMu.Unlock()
	}()

	start := time.Now()
	hard := start.Add(s.cfg.BodyTimeout)
	want := limit + 1 // room to see the EOF, or what is over the limit
	if r.ContentLength >= 0 {
		want = min(want, r.ContentLength+1)
	}
	var buf []byte
	for {
		deadline := hard
		if rate := s.cfg.MinBodyRate; rate > 0 {
			// The next byte is due when the rate since BodyGrace
			// would otherwise fall below MinBodyRate.
			due := start.Add(s.cfg.BodyGrace + time.Duration(float64(len(buf)+1)/float64(rate)*float64(time.Second)))
			if due.Before(deadline) {
				deadline = due
			}
		}
		rc.SetReadDeadline(deadline) // not supported by httptest.ResponseRecorder: no deadline then
		if len(buf) == cap(buf) {
			size := min(max(2*int64(cap(buf)), 4<<10), want)
			if size <= int64(cap(buf)) {
				size = int64(cap(buf)) + 1
			}
			if herr := c.charge(r.Context(), size, "receiving the body"); herr != nil {
				w.Header().Set("Connection", "close")
				return nil, herr
			}
			buf = append(make([]byte, 0, size), buf...)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			w.Header().Set("Connection", "close")
			return nil, fail(http.StatusRequestEntityTooLarge, "body over the limit of %d bytes", limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			w.Header().Set("Connection", "close")
			s.readMu.Lock()
			aborting := s.aborting
			s.readMu.Unlock()
			switch {
			case aborting:
				return nil, fail(http.StatusServiceUnavailable, "the server is shutting down")
			case !errors.Is(err, os.ErrDeadlineExceeded):
				return nil, fail(http.StatusBadRequest, "reading the body: %v", err)
			case !time.Now().Before(hard):
				return nil, fail(http.StatusRequestTimeout, "the body did not arrive within %v", s.cfg.BodyTimeout)
			default:
				return nil, fail(http.StatusRequestTimeout, "the body arrived at under %d bytes/s (%d bytes in %v)",
					s.cfg.MinBodyRate, len(buf), time.Since(start).Round(time.Millisecond))
			}
		}
	}
	rc.SetReadDeadline(time.Time{})
	return buf, nil
}

// Kinds of image bodies.
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
		return 0, fmt.Errorf("Content-Type %q: %w", ct, err)
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

// sniffKind tells a PNG from a JPEG by its first bytes.
func sniffKind(b []byte) (int, bool) {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return kindPNG, true
	case bytes.HasPrefix(b, []byte{0xff, 0xd8}):
		return kindJPEG, true
	}
	return 0, false
}

// preprocess decodes body and writes the network input for model m into
// x. A PNG or JPEG is charged to the memory budget, from its header,
// while it is decoded and preprocessed.
func (s *Server) preprocess(ctx context.Context, m *infer.Model, x []float32, kind int, body []byte) *httpError {
	if kind == kindRaw {
		if err := m.PreprocessRaw(x, body); err != nil {
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
	if err := infer.CheckSize(cfg.Width, cfg.Height); err != nil {
		return fail(http.StatusRequestEntityTooLarge, "%s image: %v", name, err)
	}
	cost := decodeCost(kind, cfg)
	if cost > s.cfg.MemoryBudget {
		return fail(http.StatusRequestEntityTooLarge, "%s image of %d×%d pixels needs %d bytes to decode, over the memory budget of %d", name, cfg.Width, cfg.Height, cost, s.cfg.MemoryBudget)
	}
	if herr := s.admit(ctx, cost, "decoding the "+name+" image"); herr != nil {
		return herr
	}
	defer s.budget.release(cost)
	img, err := decode(bytes.NewReader(body))
	if err != nil {
		return fail(http.StatusBadRequest, "decoding the %s image: %v", name, err)
	}
	m.Preprocess(x, img)
	return nil
}

// run queues the images of jobs on the request's model version and waits
// for their probabilities, which it checks to be finite.
func (c *call) run(jobs []*job) *httpError {
	now := time.Now()
	for _, j := range jobs {
		j.enqueued = now
		c.v.queue <- j // the workers run until every holder of v is done
	}
	c.queued()
	for _, j := range jobs {
		<-j.done
	}
	for i, j := range jobs {
		for k, p := range j.probs {
			if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
				return fail(http.StatusInternalServerError, "model %q version %d produced a non-finite probability (%v for class %d of image %d): its weights or normalisation overflow on this input",
					c.name, c.v.number, p, k, i)
			}
		}
	}
	return nil
}

// classify answers POST /classify.
func (s *Server) classify(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST with an image body")
		return
	}
	name := r.URL.Query().Get("model")
	if name == "" {
		name = s.names[0]
	}
	c, body, herr := s.begin(w, r, name)
	defer c.end()
	var resp *Response
	if herr == nil {
		resp, herr = s.classifyBody(c, r, body)
	}
	c.answer(w, resp, herr, writeError)
}

// answer writes resp, or herr in the error form errw writes, and records
// the status.
func (c *call) answer(w http.ResponseWriter, resp any, herr *httpError, errw func(http.ResponseWriter, int, string)) {
	if herr != nil {
		c.status = herr.status
		if c.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		errw(w, c.status, herr.msg)
		return
	}
	writeJSON(w, c.status, resp)
}

func (s *Server) classifyBody(c *call, r *http.Request, body []byte) (*Response, *httpError) {
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
	j := s.getJob()
	defer s.jobs.Put(j)
	if herr := s.preprocess(r.Context(), c.v.model, j.x, kind, body); herr != nil {
		return nil, herr
	}
	if herr := c.run([]*job{j}); herr != nil {
		return nil, herr
	}
	return &Response{Predictions: infer.TopK(j.probs, k, c.v.model.Spec().Classes)}, nil
}
