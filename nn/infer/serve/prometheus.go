package serve

import (
	"bufio"
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PrometheusContentType is the Content-Type of GET /metrics: the
// Prometheus text exposition format, version 0.0.4.
const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

func (s *Server) servePrometheus(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, writeError) {
		return
	}
	// Written to memory first: the counters are locked while they are
	// written, and a slow scraper must not hold that lock.
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	s.writePrometheus(bw)
	bw.Flush()
	w.Header().Set("Content-Type", PrometheusContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes())
}

// promWriter writes metric families in the text exposition format.
type promWriter struct {
	w *bufio.Writer
}

// family writes the HELP and TYPE lines of a metric family.
func (p promWriter) family(name, typ, help string) {
	p.w.WriteString("# HELP " + name + " " + escapeHelp(help) + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one sample line; labels alternate names and values.
func (p promWriter) sample(name string, v float64, labels ...string) {
	p.w.WriteString(name)
	if len(labels) > 0 {
		p.w.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				p.w.WriteByte(',')
			}
			p.w.WriteString(labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
		}
		p.w.WriteByte('}')
	}
	p.w.WriteString(" " + formatValue(v) + "\n")
}

// histogram writes the _bucket, _sum and _count samples of h.
func (p promWriter) histogram(name string, h *histogram, labels ...string) {
	cum := int64(0)
	for i, b := range h.bounds {
		cum += h.counts[i]
		p.sample(name+"_bucket", float64(cum), append(slices.Clone(labels), "le", formatValue(b))...)
	}
	p.sample(name+"_bucket", float64(h.count), append(slices.Clone(labels), "le", "+Inf")...)
	p.sample(name+"_sum", h.sum, labels...)
	p.sample(name+"_count", float64(h.count), labels...)
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// writePrometheus writes every metric of s.
func (s *Server) writePrometheus(w *bufio.Writer) {
	p := promWriter{w}
	type info struct{ name, version, arch, classes string }
	var infos []info
	for _, name := range s.names {
		if v, ok := s.models[name].acquire(); ok {
			infos = append(infos, info{name, strconv.Itoa(v.number), v.model.String(), strconv.Itoa(v.model.NumClasses())})
			v.release()
		}
	}

	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	// Models in the order given, then requests for unknown models.
	names := append(slices.Clone(s.names), "")
	counted := func(name string) bool { return name != "" || len(m.models[""].status) > 0 }

	p.family("proxgen_requests_total", "counter", "Inference requests answered (/classify and /v2/models/{name}/infer), by model and HTTP status code; model is empty for requests naming an unknown model.")
	for _, name := range names {
		st := m.models[name]
		codes := make([]int, 0, len(st.status))
		for code := range st.status {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		for _, code := range codes {
			p.sample("proxgen_requests_total", float64(st.status[code]), "model", name, "code", strconv.Itoa(code))
		}
	}
	p.family("proxgen_request_errors_total", "counter", "Inference requests answered with a status of 400 or more, by model.")
	for _, name := range names {
		if !counted(name) {
			continue
		}
		n := int64(0)
		for code, c := range m.models[name].status {
			if code >= 400 {
				n += c
			}
		}
		p.sample("proxgen_request_errors_total", float64(n), "model", name)
	}
	p.family("proxgen_inferences_total", "counter", "Images classified, by model.")
	for _, name := range s.names {
		p.sample("proxgen_inferences_total", float64(m.models[name].images), "model", name)
	}
	p.family("proxgen_batches_total", "counter", "Network passes (batches), by model.")
	for _, name := range s.names {
		p.sample("proxgen_batches_total", float64(m.models[name].batches), "model", name)
	}
	p.family("proxgen_batch_size", "histogram", "Images per network pass, by model.")
	for _, name := range s.names {
		st := m.models[name]
		h := newHistogram(powersOfTwo(len(st.sizes) - 1))
		for size, n := range st.sizes {
			i, _ := slices.BinarySearch(h.bounds, float64(size))
			h.counts[i] += n
			h.sum += float64(size * int(n))
			h.count += n
		}
		p.histogram("proxgen_batch_size", &h, "model", name)
	}
	p.family("proxgen_request_duration_seconds", "histogram", "Time from the start of the handler to the answer of successful inference requests, by model.")
	for _, name := range s.names {
		p.histogram("proxgen_request_duration_seconds", &m.models[name].latency, "model", name)
	}
	p.family("proxgen_queue_duration_seconds", "histogram", "Time an image waited from its queueing to the start of its network pass, by model.")
	for _, name := range s.names {
		p.histogram("proxgen_queue_duration_seconds", &m.models[name].queue, "model", name)
	}
	p.family("proxgen_compute_duration_seconds", "histogram", "Time of a network pass (one batch), by model.")
	for _, name := range s.names {
		p.histogram("proxgen_compute_duration_seconds", &m.models[name].compute, "model", name)
	}
	p.family("proxgen_requests_in_flight", "gauge", "Inference requests holding a slot: body received, decoding, queued or running.")
	p.sample("proxgen_requests_in_flight", float64(m.inFlight))
	p.family("proxgen_requests_reading", "gauge", "Inference requests still receiving their body (they hold no slot).")
	p.sample("proxgen_requests_reading", float64(m.reading))
	p.family("proxgen_model_info", "gauge", "The models served: 1 per model, with its version (1 at start, +1 per reload), network and classes.")
	for _, in := range infos {
		p.sample("proxgen_model_info", 1, "model", in.name, "version", in.version, "architecture", in.arch, "classes", in.classes)
	}
	p.family("proxgen_model_reloads_total", "counter", "Model reloads, by model and result (success: the new version serves; failure: the old one keeps serving).")
	for _, name := range s.names {
		p.sample("proxgen_model_reloads_total", float64(m.models[name].reloads), "model", name, "result", "success")
		p.sample("proxgen_model_reloads_total", float64(m.models[name].failed), "model", name, "result", "failure")
	}
	p.family("proxgen_model_reload_failing", "gauge", "1 if the model's last reload failed (the previous version serves), else 0.")
	for _, name := range s.names {
		failing := 0.0
		if m.models[name].lastFail != "" {
			failing = 1
		}
		p.sample("proxgen_model_reload_failing", failing, "model", name)
	}
	p.family("proxgen_memory_budget_bytes", "gauge", "The memory budget for request bodies, their parsing, and decoding and preprocessing images.")
	p.sample("proxgen_memory_budget_bytes", float64(s.cfg.MemoryBudget))
	p.family("proxgen_memory_in_use_bytes", "gauge", "The part of the memory budget charged now.")
	p.sample("proxgen_memory_in_use_bytes", float64(s.budget.inUse()))
	p.family("proxgen_admission_refused_total", "counter", "Requests refused with 503 because the memory budget stayed full.")
	p.sample("proxgen_admission_refused_total", float64(m.refused))
	p.family("proxgen_uptime_seconds", "gauge", "Seconds since the server started.")
	p.sample("proxgen_uptime_seconds", time.Since(m.start).Seconds())
}

// powersOfTwo returns 1, 2, 4, ... up to the first at least n.
func powersOfTwo(n int) []float64 {
	var b []float64
	for v := 1; ; v *= 2 {
		b = append(b, float64(v))
		if v >= n {
			return b
		}
	}
}
