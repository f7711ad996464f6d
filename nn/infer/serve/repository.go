package serve

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
)

// entry is one named model: the version serving now, replaced by reloads.
type entry struct {
	src Source

	// receiving counts the requests for this model that are reading their
	// body or decoding: the batch workers wait for them (up to MaxDelay).
	receiving atomic.Int64

	mu     sync.RWMutex // guards cur, last and closed
	cur    *version     // nil while unloaded
	last   int          // the number of the latest version
	closed bool
}

// version is one load of a model, with its batch queue and workers. It
// stops once it is replaced (or the server closes) and the requests that
// hold it have finished.
type version struct {
	e      *entry
	s      *Server
	number int
	model  *infer.Model
	sum    [sha256.Size]byte // of the file; zero for a model given as such
	loaded time.Time

	queue   chan *job
	refs    sync.WaitGroup // requests holding this version
	workers sync.WaitGroup
}

// acquire returns the version serving now, held until release; false
// once the server is closing or while the model is unloaded
// (unavailable says which).
func (e *entry) acquire() (*version, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed || e.cur == nil {
		return nil, false
	}
	e.cur.refs.Add(1)
	return e.cur, true
}

// unavailable says why acquire failed.
func (e *entry) unavailable() string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return "the server is shutting down"
	}
	return fmt.Sprintf("model %q is unloaded (POST /v2/repository/models/%s/load loads it again)", e.src.Name, e.src.Name)
}

func (v *version) release() { v.refs.Done() }

// stop closes the queue and waits for the workers; no request may hold v.
func (v *version) stop() {
	close(v.queue)
	v.workers.Wait()
}

// close refuses new requests and stops the current version once the
// requests holding it have finished.
func (e *entry) close() {
	e.mu.Lock()
	e.closed = true
	v := e.cur
	e.mu.Unlock()
	if v != nil {
		v.refs.Wait()
		v.stop()
	}
}

// firstVersion returns e's first version: its model as given, or loaded
// from its file (prepare), checked, with its workers started.
func (s *Server) firstVersion(e *entry) (*version, error) {
	v := &version{e: e, s: s, number: 1, model: e.src.Model, loaded: time.Now()}
	if v.model == nil {
		p, err := s.prepare(e, nil)
		if err != nil {
			return nil, err
		}
		v.model, v.sum = p.model, p.sum
	} else {
		if e.src.Path != "" {
			if b, err := s.readFile(e.src.Path, s.cfg.MaxModelBytes); err == nil {
				v.sum = sha256.Sum256(b)
			}
		}
		if err := check(v.model); err != nil {
			return nil, fmt.Errorf("model %q: %w", e.src.Name, err)
		}
	}
	v.start()
	return v, nil
}

// start starts v's batch workers.
func (v *version) start() {
	v.queue = make(chan *job, v.s.cfg.MaxInFlight)
	for range v.s.cfg.Workers {
		v.workers.Add(1)
		go v.work()
	}
}

// prepared is a model loaded from its file and checked, not serving yet.
type prepared struct {
	model     *infer.Model
	sum       [sha256.Size]byte
	unchanged bool // the file's sum was the one given: nothing was built
}

// prepare loads e's model from its file and checks it, within
// Config.LoadTimeout and holding no lock: the file must be a regular file
// of at most Config.MaxModelBytes, opened non-blocking (regfile), so that
// a FIFO, a device or a directory at the path is an error at once, and a
// read that hangs anyway (a stalled network file system) is abandoned at
// the timeout without blocking any later load. With skip set, a file
// whose SHA-256 is *skip is reported unchanged and not built.
func (s *Server) prepare(e *entry, skip *[sha256.Size]byte) (prepared, error) {
	type result struct {
		p   prepared
		err error
	}
	done := make(chan result, 1) // the abandoned load's send does not block
	read := s.readFile
	go func() {
		var r result
		defer func() { done <- r }()
		b, err := read(e.src.Path, s.cfg.MaxModelBytes)
		if err != nil {
			r.err = err
			return
		}
		r.p.sum = sha256.Sum256(b)
		if skip != nil && r.p.sum == *skip {
			r.p.unchanged = true
			return
		}
		f, err := safetensors.Parse(b)
		if err != nil {
			r.err = fmt.Errorf("%s: %w", e.src.Path, err)
			return
		}
		b = nil
		if r.p.model, err = infer.FromFile(f, e.src.Spec, e.src.Options...); err != nil {
			r.err = fmt.Errorf("%s: %w", e.src.Path, err)
			return
		}
		r.err = check(r.p.model)
	}()
	timer := time.NewTimer(s.cfg.LoadTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return prepared{}, fmt.Errorf("model %q: %w", e.src.Name, r.err)
		}
		return r.p, nil
	case <-timer.C:
		return prepared{}, fmt.Errorf("model %q: loading %s took longer than the load timeout (%v); abandoned", e.src.Name, e.src.Path, s.cfg.LoadTimeout)
	}
}

// check runs m on a probe batch — a constant input and a raw image of
// ramps through the model's normalisation — and requires finite
// probabilities that sum to 1: weights or normalisation constants that
// overflow are refused before the model serves.
func check(m *infer.Model) error {
	x := make([]float32, 2*infer.InputSize)
	raw := make([]byte, infer.InputSize)
	for i := range infer.InputSize {
		x[i] = 0.5
		raw[i] = byte(i * 37)
	}
	if err := m.PreprocessRaw(x[infer.InputSize:], raw); err != nil {
		return err
	}
	probs := m.Probabilities(nil, x)
	c := m.NumClasses()
	if len(probs) != 2*c {
		return fmt.Errorf("the probe batch gave %d probabilities, want %d", len(probs), 2*c)
	}
	for i := range 2 {
		sum := 0.0
		for j, p := range probs[i*c : (i+1)*c] {
			if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
				return fmt.Errorf("non-finite output %v (class %d) on a probe image: the weights or the normalisation overflow", p, j)
			}
			sum += float64(p)
		}
		if math.Abs(sum-1) > 1e-3 {
			return fmt.Errorf("the probabilities of a probe image sum to %v, not 1", sum)
		}
	}
	return nil
}

// Reload loads the named model's file again and, once it has loaded and
// passed the check, serves it to new requests; requests holding the old
// model finish on it. With force false the file is loaded only if its
// content changed. It reports whether the model was replaced. A failure
// leaves the old model serving; it is logged and counted in the metrics.
// An unloaded model (Unload) is loaded again, from its file or, for a
// model given as such, as given.
func (s *Server) Reload(name string, force bool) (bool, error) {
	e, ok := s.models[name]
	if !ok {
		return false, fmt.Errorf("no model %q", name)
	}
	e.mu.RLock()
	old, closed := e.cur, e.closed
	e.mu.RUnlock()
	if closed {
		return false, fmt.Errorf("model %q: the server is shutting down", name)
	}
	if e.src.Path == "" && old != nil {
		return false, fmt.Errorf("model %q has no file to reload", name)
	}
	var p prepared
	if e.src.Path == "" {
		p.model = e.src.Model // unloaded, given as such: served again
	} else {
		var skip *[sha256.Size]byte
		if !force && old != nil {
			skip = &old.sum
		}
		// The file is read, built and checked without any lock held: a
		// load that hangs blocks neither requests nor the next load.
		var err error
		if p, err = s.prepare(e, skip); err != nil {
			s.metrics.reload(name, err)
			if old != nil {
				s.cfg.Log.Printf("serve: reloading model %q failed, version %d keeps serving: %v", name, old.number, err)
			} else {
				s.cfg.Log.Printf("serve: loading model %q failed, it stays unloaded: %v", name, err)
			}
			return false, err
		}
		if p.unchanged {
			return false, nil
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false, fmt.Errorf("model %q: the server is shutting down", name)
	}
	old = e.cur
	e.last++
	v := &version{e: e, s: s, number: e.last, model: p.model, sum: p.sum, loaded: time.Now()}
	v.start()
	e.cur = v
	e.mu.Unlock()
	s.retire(old)
	s.metrics.reload(name, nil)
	from := e.src.Path
	if from == "" {
		from = "the model given"
	}
	s.cfg.Log.Printf("serve: model %q version %d (%s) loaded from %s", name, v.number, v.model, from)
	return true, nil
}

// retire stops v (if not nil) once the requests holding it finish.
func (s *Server) retire(v *version) {
	if v == nil {
		return
	}
	s.retiring.Add(1)
	go func() {
		defer s.retiring.Done()
		v.refs.Wait()
		v.stop()
	}()
}

// Unload stops serving the named model, as the model_repository
// extension's unload does: new requests for it are answered 503 and its
// state is UNAVAILABLE until Reload loads it again; requests that hold it
// finish. Unloading an unloaded model does nothing.
func (s *Server) Unload(name string) error {
	e, ok := s.models[name]
	if !ok {
		return fmt.Errorf("no model %q", name)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("model %q: the server is shutting down", name)
	}
	old := e.cur
	e.cur = nil
	e.mu.Unlock()
	s.retire(old)
	if old != nil {
		s.cfg.Log.Printf("serve: model %q version %d unloaded", name, old.number)
	}
	return nil
}

// ReloadChanged reloads every model whose file changed (Reload with force
// false), as SIGHUP does in cmd/serve, and returns the failures.
func (s *Server) ReloadChanged() []error {
	var errs []error
	for _, name := range s.names {
		if s.models[name].src.Path == "" {
			continue
		}
		if _, err := s.Reload(name, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ModelState describes a served model (POST /v2/repository/index): its
// state is READY, or UNAVAILABLE with the reason (unloaded, or the server
// is shutting down).
type ModelState struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// Models returns the state of every model, in the order given to New.
func (s *Server) Models() []ModelState {
	out := make([]ModelState, 0, len(s.names))
	for _, name := range s.names {
		st := ModelState{Name: name, State: "READY"}
		e := s.models[name]
		if v, ok := e.acquire(); ok {
			st.Version = strconv.Itoa(v.number)
			v.release()
		} else {
			st.State = "UNAVAILABLE"
			st.Reason = e.unavailable()
		}
		if msg := s.metrics.lastReloadError(name); msg != "" {
			st.Reason = "last reload failed: " + msg
		}
		out = append(out, st)
	}
	return out
}

// job is one image on its way through a batch.
type job struct {
	x        []float32 // preprocessed input, infer.InputSize values
	probs    []float32 // the image's probabilities, set by the worker
	done     chan struct{}
	enqueued time.Time
}

func (s *Server) getJob() *job {
	if j, ok := s.jobs.Get().(*job); ok {
		return j
	}
	return &job{x: make([]float32, infer.InputSize), done: make(chan struct{}, 1)}
}

// work runs batches until the queue is closed and empty.
func (v *version) work() {
	defer v.workers.Done()
	var (
		batch []*job
		x     []float32
		probs []float32
	)
	cfg := v.s.cfg
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for first := range v.queue {
		batch = append(batch[:0], first)
		deadline := time.Now().Add(cfg.MaxDelay)
	gather:
		for len(batch) < cfg.MaxBatch {
			select {
			case j, ok := <-v.queue:
				if !ok {
					break gather
				}
				batch = append(batch, j)
				continue
			default:
			}
			wait := time.Until(deadline)
			if wait <= 0 || v.e.receiving.Load() == 0 {
				break gather
			}
			timer.Reset(wait)
			select {
			case j, ok := <-v.queue:
				timer.Stop()
				if !ok {
					break gather
				}
				batch = append(batch, j)
			case <-timer.C:
				break gather
			}
		}
		t0 := time.Now()
		x = x[:0]
		for _, j := range batch {
			x = append(x, j.x...)
		}
		probs = v.model.Probabilities(probs, x)
		v.s.metrics.batch(v.e.src.Name, batch, t0, time.Since(t0))
		c := v.model.NumClasses()
		for i, j := range batch {
			j.probs = append(j.probs[:0], probs[i*c:(i+1)*c]...)
			j.done <- struct{}{}
		}
	}
}
