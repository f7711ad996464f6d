package serve

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Metrics is a snapshot of a server's counters, as GET /metrics.json
// returns it.
type Metrics struct {
	// UptimeSeconds is the time since the server was created.
	UptimeSeconds float64 `json:"uptime_s"`
	// Requests counts the inference requests (/classify and the
	// protocol's infer) answered, whatever their status; Errors those
	// answered with a status of 400 or more.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// Status counts the inference responses by HTTP status code.
	Status map[string]int64 `json:"status"`
	// InFlight is the number of inference requests holding a slot now
	// (body received: decoding, queued or running); Reading the number
	// still receiving their body.
	InFlight int64 `json:"in_flight"`
	Reading  int64 `json:"reading"`
	// Latency summarises the time from the start of the handler to the
	// response of the most recent successful inference requests.
	Latency Latency `json:"latency_ms"`
	// Batches counts the network runs and Images the images they
	// classified; BatchSizes is the histogram of batch sizes: BatchSizes[n]
	// counts the batches of n images (sizes that never ran are absent).
	Batches    int64            `json:"batches"`
	Images     int64            `json:"images"`
	BatchSizes map[string]int64 `json:"batch_size"`
	// AdmissionRefused counts the requests refused (503) because the
	// memory budget stayed full.
	AdmissionRefused int64 `json:"admission_refused"`
	// Reloads and ReloadErrors count the model reloads that succeeded and
	// failed, by model.
	Reloads      map[string]int64 `json:"reloads"`
	ReloadErrors map[string]int64 `json:"reload_errors"`
}

// Latency holds percentiles in milliseconds over the Window most recent
// successful requests (nearest-rank percentiles).
type Latency struct {
	Window int     `json:"window"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// histogram counts observations into buckets with the upper bounds of
// bounds (and one for +Inf), Prometheus style.
type histogram struct {
	bounds []float64
	counts []int64 // counts[i]: observations in (bounds[i-1], bounds[i]]
	sum    float64
	count  int64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.count++
}

// Bucket bounds in seconds: requests and queueing, and network passes.
var (
	latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	computeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// modelStats are the counters of one model ("" for requests naming none
// that exists).
type modelStats struct {
	status   map[int]int64
	latency  histogram // successful requests, seconds
	queue    histogram // per image, enqueue to batch start, seconds
	compute  histogram // per batch, seconds
	batches  int64
	images   int64
	sizes    []int64 // sizes[n] counts batches of n images
	reloads  int64
	failed   int64
	lastFail string
}

// metrics are the live counters behind Metrics and the Prometheus text.
type metrics struct {
	start time.Time

	mu        sync.Mutex
	inFlight  int64
	reading   int64
	refused   int64
	latencies []float64 // ring buffer of recent latencies in ms
	next      int       // next slot of latencies to write
	filled    bool      // latencies has wrapped around
	models    map[string]*modelStats
}

func newMetrics(window, maxBatch int, names []string) *metrics {
	m := &metrics{start: time.Now(), latencies: make([]float64, window), models: map[string]*modelStats{}}
	for _, name := range append([]string{""}, names...) {
		m.models[name] = &modelStats{
			status:  map[int]int64{},
			latency: newHistogram(latencyBuckets),
			queue:   newHistogram(latencyBuckets),
			compute: newHistogram(computeBuckets),
			sizes:   make([]int64, maxBatch+1),
		}
	}
	return m
}

func (m *metrics) add(p *int64, d int64) {
	m.mu.Lock()
	*p += d
	m.mu.Unlock()
}

func (m *metrics) beginReading()     { m.add(&m.reading, 1) }
func (m *metrics) endReading()       { m.add(&m.reading, -1) }
func (m *metrics) beginInFlight()    { m.add(&m.inFlight, 1) }
func (m *metrics) endInFlight()      { m.add(&m.inFlight, -1) }
func (m *metrics) admissionRefused() { m.add(&m.refused, 1) }

// request records an inference response of model name.
func (m *metrics) request(name string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.models[name]
	st.status[status]++
	if status >= 400 {
		return
	}
	st.latency.observe(d.Seconds())
	m.latencies[m.next] = float64(d) / float64(time.Millisecond)
	m.next++
	if m.next == len(m.latencies) {
		m.next, m.filled = 0, true
	}
}

// batch records a network pass of model name that started at start and
// took d.
func (m *metrics) batch(name string, jobs []*job, start time.Time, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.models[name]
	st.batches++
	st.images += int64(len(jobs))
	st.sizes[len(jobs)]++
	st.compute.observe(d.Seconds())
	for _, j := range jobs {
		st.queue.observe(start.Sub(j.enqueued).Seconds())
	}
}

// reload records a reload of model name; err nil means it succeeded.
func (m *metrics) reload(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.models[name]
	if err == nil {
		st.reloads++
		st.lastFail = ""
		return
	}
	st.failed++
	st.lastFail = err.Error()
}

func (m *metrics) lastReloadError(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.models[name].lastFail
}

func (m *metrics) snapshot() Metrics {
	m.mu.Lock()
	out := Metrics{
		UptimeSeconds:    time.Since(m.start).Seconds(),
		Status:           map[string]int64{},
		InFlight:         m.inFlight,
		Reading:          m.reading,
		BatchSizes:       map[string]int64{},
		AdmissionRefused: m.refused,
		Reloads:          map[string]int64{},
		ReloadErrors:     map[string]int64{},
	}
	for name, st := range m.models {
		for code, n := range st.status {
			out.Requests += n
			if code >= 400 {
				out.Errors += n
			}
			out.Status[strconv.Itoa(code)] += n
		}
		out.Batches += st.batches
		out.Images += st.images
		for size, n := range st.sizes {
			if n > 0 {
				out.BatchSizes[strconv.Itoa(size)] += n
			}
		}
		if name != "" {
			out.Reloads[name] = st.reloads
			out.ReloadErrors[name] = st.failed
		}
	}
	recent := m.latencies[:m.next]
	if m.filled {
		recent = m.latencies
	}
	recent = slices.Clone(recent)
	m.mu.Unlock()

	out.Latency = summarize(recent)
	return out
}

// summarize sorts latencies (in ms) and returns their percentiles.
func summarize(latencies []float64) Latency {
	slices.Sort(latencies)
	l := Latency{
		Window: len(latencies),
		P50:    percentile(latencies, 0.50),
		P90:    percentile(latencies, 0.90),
		P99:    percentile(latencies, 0.99),
	}
	if len(latencies) > 0 {
		l.Max = latencies[len(latencies)-1]
	}
	return l
}

// percentile returns the nearest-rank p-quantile of the sorted values (0
// for none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
