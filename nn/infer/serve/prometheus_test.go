package serve_test

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/infer/serve"
)

// sample is one parsed sample line.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// key identifies a sample: its name and labels in order.
func (s sample) key(skip string) string {
	names := make([]string, 0, len(s.labels))
	for k := range s.labels {
		if k != skip {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(s.name)
	for _, k := range names {
		fmt.Fprintf(&b, ",%s=%q", k, s.labels[k])
	}
	return b.String()
}

var (
	metricName = `[a-zA-Z_:][a-zA-Z0-9_:]*`
	labelName  = regexp.MustCompile(`\A[a-zA-Z_][a-zA-Z0-9_]*\z`)
	helpLine   = regexp.MustCompile(`\A# HELP (` + metricName + `) ((?:[^\\\n]|\\\\|\\n)*)\z`)
	typeLine   = regexp.MustCompile(`\A# TYPE (` + metricName + `) (counter|gauge|histogram|summary|untyped)\z`)
	sampleHead = regexp.MustCompile(`\A(` + metricName + `)`)
)

// parseValue parses a sample value as the format writes it: a Go float,
// +Inf, -Inf or NaN.
func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// parseLabels parses `{name="value",...}` at the start of s and returns the
// labels and the rest of s.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	if !strings.HasPrefix(s, "{") {
		return labels, s, nil
	}
	s = s[1:]
	for {
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || !labelName.MatchString(s[:eq]) {
			return nil, "", fmt.Errorf("bad label name in %q", s)
		}
		name := s[:eq]
		if _, dup := labels[name]; dup {
			return nil, "", fmt.Errorf("label %s twice", name)
		}
		s = s[eq+1:]
		if !strings.HasPrefix(s, `"`) {
			return nil, "", fmt.Errorf("label %s: value not quoted", name)
		}
		var v strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			switch {
			case s[i] == '\n':
				return nil, "", fmt.Errorf("label %s: raw newline", name)
			case s[i] == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '"' || s[i+1] == 'n'):
				v.WriteByte(map[byte]byte{'\\': '\\', '"': '"', 'n': '\n'}[s[i+1]])
				i++
			case s[i] == '\\':
				return nil, "", fmt.Errorf("label %s: bad escape", name)
			default:
				v.WriteByte(s[i])
			}
		}
		if i == len(s) {
			return nil, "", fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = v.String()
		s = s[i+1:]
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return nil, "", fmt.Errorf("after label %s: %q", name, s)
		}
	}
}

// parseExposition checks text against the text exposition format 0.0.4
// line by line and returns the samples and the type of each family. It
// checks: HELP and TYPE lines, at most one of each per family, TYPE before
// the family's samples, the samples of a family together, names, label
// names and escapes, values, no sample twice, and for histograms
// increasing le bounds ending at +Inf, cumulative bucket counts and the
// +Inf bucket equal to _count.
func parseExposition(text string) ([]sample, map[string]string, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, nil, errors.New("the exposition does not end with a newline")
	}
	types := map[string]string{}
	helps := map[string]bool{}
	done := map[string]bool{} // families whose samples ended
	seen := map[string]bool{}
	var samples []sample
	current := ""
	family := func(name string) string {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == "histogram" {
				return base
			}
		}
		return name
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			m := helpLine.FindStringSubmatch(line)
			if m == nil || helps[m[1]] {
				return nil, nil, fail("malformed or repeated HELP")
			}
			helps[m[1]] = true
		case strings.HasPrefix(line, "# TYPE "):
			m := typeLine.FindStringSubmatch(line)
			if m == nil || types[m[1]] != "" || done[m[1]] || m[1] == current {
				return nil, nil, fail("malformed TYPE, repeated, or after the family's samples")
			}
			types[m[1]] = m[2]
		case strings.HasPrefix(line, "#"):
			// a comment
		case line == "":
			return nil, nil, fail("empty line")
		default:
			m := sampleHead.FindString(line)
			if m == "" {
				return nil, nil, fail("no metric name")
			}
			labels, rest, err := parseLabels(line[len(m):])
			if err != nil {
				return nil, nil, fail("%v", err)
			}
			fields := strings.Split(rest, " ")
			if len(fields) < 2 || len(fields) > 3 || fields[0] != "" {
				return nil, nil, fail("want one space, a value and an optional timestamp")
			}
			v, err := parseValue(fields[1])
			if err != nil {
				return nil, nil, fail("value: %v", err)
			}
			if len(fields) == 3 {
				if _, err := strconv.ParseInt(fields[2], 10, 64); err != nil {
					return nil, nil, fail("timestamp: %v", err)
				}
			}
			f := family(m)
			if f != current {
				if done[f] {
					return nil, nil, fail("samples of %s are not together", f)
				}
				if current != "" {
					done[current] = true
				}
				current = f
			}
			s := sample{m, labels, v}
			if seen[s.key("")] {
				return nil, nil, fail("sample twice")
			}
			seen[s.key("")] = true
			samples = append(samples, s)
		}
	}
	// Histograms.
	type series struct {
		les     []float64
		buckets []float64
		count   float64
		hasSum  bool
	}
	hists := map[string]*series{}
	get := func(s sample, base string) *series {
		s.name = base
		k := s.key("le")
		if hists[k] == nil {
			hists[k] = &series{count: -1}
		}
		return hists[k]
	}
	for _, s := range samples {
		base := family(s.name)
		if types[base] != "histogram" {
			if _, ok := s.labels["le"]; ok && types[base] != "" {
				return nil, nil, fmt.Errorf("%s: le label outside a histogram", s.name)
			}
			continue
		}
		h := get(s, base)
		switch {
		case strings.HasSuffix(s.name, "_bucket"):
			le, err := parseValue(s.labels["le"])
			if err != nil {
				return nil, nil, fmt.Errorf("%s: le %q", s.name, s.labels["le"])
			}
			h.les = append(h.les, le)
			h.buckets = append(h.buckets, s.value)
		case strings.HasSuffix(s.name, "_sum"):
			h.hasSum = true
		case strings.HasSuffix(s.name, "_count"):
			h.count = s.value
		default:
			return nil, nil, fmt.Errorf("%s: a histogram sample that is not _bucket, _sum or _count", s.name)
		}
	}
	for k, h := range hists {
		if len(h.les) == 0 || !math.IsInf(h.les[len(h.les)-1], 1) || !h.hasSum || h.count < 0 || h.buckets[len(h.buckets)-1] != h.count {
			return nil, nil, fmt.Errorf("histogram %s: le %v buckets %v count %v sum %v", k, h.les, h.buckets, h.count, h.hasSum)
		}
		for i := 1; i < len(h.les); i++ {
			if !(h.les[i] > h.les[i-1]) || h.buckets[i] < h.buckets[i-1] {
				return nil, nil, fmt.Errorf("histogram %s: le %v buckets %v not increasing", k, h.les, h.buckets)
			}
		}
	}
	return samples, types, nil
}

// value returns the value of the sample with name and exactly the labels
// given (alternating names and values), failing if there is none.
func value(t *testing.T, samples []sample, name string, labels ...string) float64 {
	t.Helper()
	want := sample{name: name, labels: map[string]string{}}
	for i := 0; i < len(labels); i += 2 {
		want.labels[labels[i]] = labels[i+1]
	}
	for _, s := range samples {
		if s.key("") == want.key("") {
			return s.value
		}
	}
	t.Fatalf("no sample %s", want.key(""))
	return 0
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, b := exchange(t, "GET", url+"/metrics", "", nil, "text/plain; version=0.0.4; charset=utf-8")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: status %d", resp.StatusCode)
	}
	return string(b)
}

// TestPrometheusMetrics sends successful and failed requests to two
// models, parses GET /metrics against the text format's grammar and checks
// the counts.
func TestPrometheusMetrics(t *testing.T) {
	m := tinyModel(t)
	srv, err := serve.NewModels(serve.Config{}, serve.Source{Name: "a", Model: m}, serve.Source{Name: "b", Model: m})
	if err != nil {
		t.Fatal(err)
	}
	r := startServer(t, srv)
	// Before any request: a valid exposition with zero counts.
	if _, _, err := parseExposition(scrape(t, r.url)); err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		classify(t, r.url+"/classify?model=a", "application/octet-stream", rawImage(uint64(i)))
	}
	x := fp32Data(preprocessed(t, m, rawImage(1), rawImage(2)))
	inferAnswer(t, r.url+"/v2/models/b/infer", `{"inputs":[{"name":"input","shape":[2,3,32,32],"datatype":"FP32","data":`+x+`}]}`)
	post(t, r.url+"/classify?model=a", "text/plain", nil)                     // 415
	do(t, "POST", r.url+"/v2/models/b/infer", `{"inputs":[]}`)                // 400
	do(t, "POST", r.url+"/v2/models/nope/infer", `{"inputs":[]}`)             // 404, no model
	post(t, r.url+"/classify?model=a", "application/octet-stream", []byte{1}) // 400

	text := scrape(t, r.url)
	samples, types, err := parseExposition(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for name, typ := range map[string]string{
		"proxgen_requests_total": "counter", "proxgen_request_errors_total": "counter", "proxgen_inferences_total": "counter",
		"proxgen_batches_total": "counter", "proxgen_request_duration_seconds": "histogram", "proxgen_queue_duration_seconds": "histogram",
		"proxgen_compute_duration_seconds": "histogram", "proxgen_batch_size": "histogram", "proxgen_requests_in_flight": "gauge",
		"proxgen_model_info": "gauge", "proxgen_model_reloads_total": "counter",
	} {
		if types[name] != typ {
			t.Errorf("%s: type %q, want %s", name, types[name], typ)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"proxgen_requests_total", []string{"model", "a", "code", "200"}, 3},
		{"proxgen_requests_total", []string{"model", "a", "code", "415"}, 1},
		{"proxgen_requests_total", []string{"model", "a", "code", "400"}, 1},
		{"proxgen_requests_total", []string{"model", "b", "code", "200"}, 1},
		{"proxgen_requests_total", []string{"model", "b", "code", "400"}, 1},
		{"proxgen_requests_total", []string{"model", "", "code", "404"}, 1},
		{"proxgen_request_errors_total", []string{"model", "a"}, 2},
		{"proxgen_request_errors_total", []string{"model", ""}, 1},
		{"proxgen_inferences_total", []string{"model", "a"}, 3},
		{"proxgen_inferences_total", []string{"model", "b"}, 2},
		{"proxgen_request_duration_seconds_count", []string{"model", "a"}, 3},
		{"proxgen_queue_duration_seconds_count", []string{"model", "b"}, 2},
		{"proxgen_batch_size_sum", []string{"model", "b"}, 2},
		{"proxgen_requests_in_flight", nil, 0},
		{"proxgen_requests_reading", nil, 0},
		{"proxgen_model_info", []string{"model", "a", "version", "1", "architecture", m.String(), "classes", "10"}, 1},
		{"proxgen_model_reloads_total", []string{"model", "b", "result", "failure"}, 0},
	} {
		if got := value(t, samples, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if value(t, samples, "proxgen_batches_total", "model", "a") != 3 ||
		value(t, samples, "proxgen_compute_duration_seconds_count", "model", "a") != 3 ||
		!(value(t, samples, "proxgen_compute_duration_seconds_sum", "model", "a") > 0) {
		t.Errorf("batches of model a:\n%s", text)
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", text)
	}
}

// TestExpositionParserRejects makes sure the grammar check fails on
// malformed text, and passes a valid exposition with every feature.
func TestExpositionParserRejects(t *testing.T) {
	good := "# HELP a A \\\\ help\\n.\n# TYPE a counter\na{b=\"x\\\"y\\n\"} 1 1700000000000\n# TYPE h histogram\n" +
		"h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n"
	if _, _, err := parseExposition(good); err != nil {
		t.Fatalf("valid exposition refused: %v", err)
	}
	for _, bad := range []string{
		"a 1",              // no final newline
		"a{b=\"x} 1\n",     // unterminated label
		"a{b=\"\\x\"} 1\n", // bad escape
		"a{1b=\"x\"} 1\n",  // bad label name
		"a one\n",          // bad value
		"a  1\n",           // two spaces
		"# TYPE a counter\n# TYPE a counter\na 1\n",
		"# TYPE a countr\na 1\n",
		"a 1\nb 1\na 2\n", // family not together
		"a 1\na 1\n",      // sample twice
		"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", // not cumulative
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",                          // no +Inf
		"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",                       // +Inf != count
	} {
		if _, _, err := parseExposition(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
