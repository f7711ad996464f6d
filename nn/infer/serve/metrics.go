package serve

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Metrics is a snapshot of a server's counters, as GET /metrics returns
// it (JSON).
type Metrics struct {
	// UptimeSeconds is the time since the server was created.
	UptimeSeconds float64 `json:"uptime_s"`
	// Requests counts the classification requests answered, whatever
	// their status; Errors those answered with a status of 400 or more.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// Status counts the classification responses by HTTP status code.
	Status map[string]int64 `json:"status"`
	// InFlight is the number of classification requests being handled
	// now.
	InFlight int64 `json:"in_flight"`
	// Latency summarises the time from the start of the handler to the
	// response of the most recent successful classifications.
	Latency Latency `json:"latency_ms"`
	// Batches counts the network runs and Images the images they
	// classified; BatchSizes is the histogram of batch sizes: BatchSizes[n]
	// counts the batches of n images (sizes that never ran are absent).
	Batches    int64            `json:"batches"`
	Images     int64            `json:"images"`
	BatchSizes map[string]int64 `json:"batch_size"`
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

// metrics are the live counters behind Metrics.
type metrics struct {
	start time.Time

	mu        sync.Mutex
	requests  int64
	errors    int64
	inFlight  int64
	status    map[int]int64
	latencies []float64 // ring buffer of recent latencies in ms
	next      int       // next slot of latencies to write
	filled    bool      // latencies has wrapped around
	batches   int64
	images    int64
	sizes     []int64 // sizes[n] counts batches of n images
}

func newMetrics(window, maxBatch int) *metrics {
	return &metrics{
		start:     time.Now(),
		status:    map[int]int64{},
		latencies: make([]float64, window),
		sizes:     make([]int64, maxBatch+1),
	}
}

func (m *metrics) begin() {
	m.mu.Lock()
	m.inFlight++
	m.mu.Unlock()
}

// end records a classification response.
func (m *metrics) end(status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
	m.requests++
	m.status[status]++
	if status >= 400 {
		m.errors++
		return
	}
	m.latencies[m.next] = float64(d) / float64(time.Millisecond)
	m.next++
	if m.next == len(m.latencies) {
		m.next, m.filled = 0, true
	}
}

func (m *metrics) batch(n int) {
	m.mu.Lock()
	m.batches++
	m.images += int64(n)
	m.sizes[n]++
	m.mu.Unlock()
}

func (m *metrics) snapshot() Metrics {
	m.mu.Lock()
	out := Metrics{
		UptimeSeconds: time.Since(m.start).Seconds(),
		Requests:      m.requests,
		Errors:        m.errors,
		Status:        map[string]int64{},
		InFlight:      m.inFlight,
		Batches:       m.batches,
		Images:        m.images,
		BatchSizes:    map[string]int64{},
	}
	for code, n := range m.status {
		out.Status[strconv.Itoa(code)] = n
	}
	for size, n := range m.sizes {
		if n > 0 {
			out.BatchSizes[strconv.Itoa(size)] = n
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
