package serve_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
	"github.com/proxgen/proxgen/nn/models"
)

// syncLog is a log destination safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func loadFile(t *testing.T, path string) *infer.Model {
	t.Helper()
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReloadUnderLoad reloads a model 20 times, alternating two files,
// while clients send protocol requests back to back: no request fails,
// and after each reload a new request gets the new model's answer.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	pathA, pathB := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	writeModel(t, pathA, 1, 1)
	writeModel(t, pathB, 2, 1)
	models := []*infer.Model{loadFile(t, pathA), loadFile(t, pathB)}
	contents := make([][]byte, 2)
	for i, p := range []string{pathA, pathB} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		contents[i] = b
	}
	replace := func(i int) { // as a deployment does: a new file renamed over the old
		if err := os.WriteFile(path+".new", contents[i], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	replace(0)
	var logs syncLog
	srv, err := serve.NewModels(serve.Config{Log: newLogger(&logs)}, serve.Source{Name: "m", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := startServer(t, srv)

	x := preprocessed(t, models[0], rawImage(5))
	body := `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	want := [][]float32{models[0].Probabilities(nil, x), models[1].Probabilities(nil, x)}
	if reflect.DeepEqual(want[0], want[1]) {
		t.Fatal("the two models answer alike")
	}

	ctx, stop := context.WithCancel(context.Background())
	results := make(chan serve.LoadResult, 1)
	go func() {
		res, err := serve.LoadTest(ctx, serve.LoadConfig{
			URL: r.url + "/v2/models/m/infer", Body: []byte(body), ContentType: "application/json",
			Concurrency: 4, Duration: time.Minute,
		})
		if err != nil {
			t.Error(err)
		}
		results <- res
	}()
	const reloads = 20
	var took []time.Duration
	for i := 1; i <= reloads; i++ {
		time.Sleep(20 * time.Millisecond)
		replace(i % 2)
		t0 := time.Now()
		changed, err := srv.Reload("m", false)
		took = append(took, time.Since(t0))
		if err != nil || !changed {
			t.Fatalf("reload %d: changed %v, %v", i, changed, err)
		}
		resp := inferAnswer(t, r.url+"/v2/models/m/infer", body)
		if got := probsOf(t, resp, 1); !reflect.DeepEqual(got, want[i%2]) || resp.ModelVersion != strconv.Itoa(i+1) {
			t.Fatalf("after reload %d: version %s, probabilities %v, want version %d and %v", i, resp.ModelVersion, got, i+1, want[i%2])
		}
	}
	// An unchanged file is not loaded again.
	if changed, err := srv.Reload("m", false); changed || err != nil {
		t.Fatalf("reload of an unchanged file: changed %v, %v", changed, err)
	}
	// The server's errors before the load stops: stopping cancels the
	// clients' requests in flight, which the server may count as bodies
	// cut short (400) after the client no longer counts them.
	errorsBeforeStop := srv.Metrics().Errors
	stop()
	res := <-results
	slices.Sort(took)
	t.Logf("%d reloads under load (4 clients): %d requests, %d failed, %.0f requests/s, latency p50 %.1f ms p99 %.1f ms max %.1f ms; reload took %v to %v (median %v)",
		reloads, res.Requests, res.Errors, res.RequestsPerSecond, res.Latency.P50, res.Latency.P99, res.Latency.Max, took[0], took[len(took)-1], took[len(took)/2])
	if res.Errors != 0 || res.Requests < reloads {
		t.Fatalf("load during the reloads: %+v", res)
	}
	if met := srv.Metrics(); met.Reloads["m"] != reloads || met.ReloadErrors["m"] != 0 || errorsBeforeStop != 0 {
		t.Fatalf("metrics %+v (%d errors before the load stopped)", met, errorsBeforeStop)
	}
	if n := strings.Count(logs.String(), "loaded from"); n != reloads {
		t.Fatalf("%d reloads logged, want %d:\n%s", n, reloads, logs.String())
	}
}

// TestReloadFailureKeepsServing replaces the model file with a corrupt
// one and with one whose network overflows: each reload fails, is reported
// (error, log, metrics, repository index), and the old model keeps
// answering; a good file then loads through the repository endpoint.
func TestReloadFailureKeepsServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	writeModel(t, path, 1, 1)
	old := loadFile(t, path)
	var logs syncLog
	srv, err := serve.NewModels(serve.Config{Log: newLogger(&logs)}, serve.Source{Name: "m", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := startServer(t, srv)
	x := preprocessed(t, old, rawImage(3))
	body := `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	want := old.Probabilities(nil, x)

	for i, c := range []struct {
		name  string
		write func()
		msg   string
	}{
		{"corrupt file", func() { os.WriteFile(path, []byte("not a model"), 0o644) }, "m.safetensors"},
		{"overflowing weights", func() { writeModel(t, path, 2, 3e38) }, "non-finite output"},
	} {
		c.write()
		changed, err := srv.Reload("m", false)
		if changed || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Fatalf("%s: changed %v, error %v; want an error mentioning %q", c.name, changed, err, c.msg)
		}
		resp := inferAnswer(t, r.url+"/v2/models/m/infer", body)
		if got := probsOf(t, resp, 1); !reflect.DeepEqual(got, want) || resp.ModelVersion != "1" {
			t.Fatalf("%s: the old model does not answer: version %s", c.name, resp.ModelVersion)
		}
		if met := srv.Metrics(); met.ReloadErrors["m"] != int64(2*i+1) || met.Reloads["m"] != 0 {
			t.Fatalf("%s: metrics %+v", c.name, met)
		}
		if !strings.Contains(logs.String(), `reloading model "m" failed, version 1 keeps serving`) {
			t.Fatalf("%s: log %q", c.name, logs.String())
		}
		code, b := do(t, "POST", r.url+"/v2/repository/models/m/load", "")
		wantV2Error(t, c.name+": repository load", code, b, http.StatusBadRequest, c.msg)
		samples, _, err := parseExposition(scrape(t, r.url))
		if err != nil {
			t.Fatal(err)
		}
		if value(t, samples, "proxgen_model_reload_failing", "model", "m") != 1 ||
			value(t, samples, "proxgen_model_reloads_total", "model", "m", "result", "failure") != float64(2*i+2) {
			t.Fatalf("%s: the failure is not in /metrics", c.name)
		}
		code, b = do(t, "POST", r.url+"/v2/repository/index", "")
		if code != 200 || !strings.Contains(string(b), "last reload failed") {
			t.Fatalf("%s: repository index %d %s", c.name, code, b)
		}
	}

	writeModel(t, path, 2, 1)
	code, b := do(t, "POST", r.url+"/v2/repository/models/m/load", "")
	if code != http.StatusOK {
		t.Fatalf("repository load of a good file: %d %s", code, b)
	}
	resp := inferAnswer(t, r.url+"/v2/models/m/infer", body)
	if got := probsOf(t, resp, 1); resp.ModelVersion != "2" || !reflect.DeepEqual(got, loadFile(t, path).Probabilities(nil, x)) {
		t.Fatalf("after a good reload: version %s", resp.ModelVersion)
	}
	code, b = do(t, "GET", r.url+"/v2/models/m/ready", "")
	wantJSON(t, "ready after reload", b, `{"name":"m","ready":true}`)
	samples, _, _ := parseExposition(scrape(t, r.url))
	if value(t, samples, "proxgen_model_reload_failing", "model", "m") != 0 {
		t.Fatal("the good reload is not in /metrics")
	}
	// The architecture label is the served model's String, whose last part
	// (how a single image runs) is measured at load and may differ between
	// two loads of one file: the network's description before it must match.
	net, _, _ := strings.Cut(loadFile(t, path).String(), ";")
	info := 0
	for _, s := range samples {
		if s.name == "proxgen_model_info" && s.labels["model"] == "m" {
			info++
			if s.labels["version"] != "2" || s.labels["classes"] != "10" || s.value != 1 ||
				!strings.HasPrefix(s.labels["architecture"], net+";") {
				t.Fatalf("after a good reload: model info %v = %v, want version 2 of %q", s.labels, s.value, net)
			}
		}
	}
	if info != 1 {
		t.Fatalf("after a good reload: %d model info samples of m, want 1", info)
	}
}

// TestInFlightFinishOnOldModel holds a request on version 1 (its batch
// waits for a request still being received), reloads, and checks that the
// held request is answered by version 1 and the next by version 2.
func TestInFlightFinishOnOldModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	writeModel(t, path, 1, 1)
	old := loadFile(t, path)
	srv, err := serve.NewModels(serve.Config{MaxDelay: 2 * time.Second, Log: newLogger(io.Discard)}, serve.Source{Name: "m", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := startServer(t, srv)
	x := preprocessed(t, old, rawImage(3))
	body := `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + fp32Data(x) + `}]}`
	waiting := hold(t, r, 1, 10, 1)[0] // makes the batch of the next request wait
	answer := make(chan serve.InferResponse, 1)
	go func() { answer <- inferAnswer(t, r.url+"/v2/models/m/infer", body) }()
	waitInFlight(t, srv, 1)
	writeModel(t, path, 2, 1)
	if changed, err := srv.Reload("m", false); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if resp := inferAnswer(t, r.url+"/v2/models/m/infer", body); resp.ModelVersion != "2" ||
		!reflect.DeepEqual(probsOf(t, resp, 1), loadFile(t, path).Probabilities(nil, x)) {
		t.Fatalf("a request after the reload got version %s", resp.ModelVersion)
	}
	waiting.conn.Close()
	resp := <-answer
	if resp.ModelVersion != "1" || !reflect.DeepEqual(probsOf(t, resp, 1), old.Probabilities(nil, x)) {
		t.Fatalf("the request in flight during the reload got version %s", resp.ModelVersion)
	}
}

// TestNewRefusesOverflowingModel: a model whose forward pass overflows on
// the probe batch is not served at all.
func TestNewRefusesOverflowingModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	writeModel(t, path, 1, 3e38)
	_, err := serve.NewModels(serve.Config{}, serve.Source{Name: "m", Path: path})
	if err == nil || !strings.Contains(err.Error(), "non-finite output") {
		t.Fatalf("error %v, want a non-finite output", err)
	}
	// Normalisation constants that overflow: refused by the loader or
	// by the probe batch.
	tiny := []float32{1e-45, 1e-45, 1e-45}
	writeModel(t, path, 1, 1)
	if _, err := serve.NewModels(serve.Config{}, serve.Source{Name: "m", Path: path, Spec: models.Spec{Std: tiny}}); err == nil {
		t.Error("std 1e-45: no error")
	} else {
		t.Logf("std 1e-45: %v", err)
	}
	for _, src := range [][]serve.Source{
		{{Name: "a/b", Path: path}},
		{{Name: "", Path: path}},
		{{Name: "a"}},
		{{Name: "a", Model: tinyModel(t)}, {Name: "a", Model: tinyModel(t)}},
		nil,
	} {
		if _, err := serve.NewModels(serve.Config{}, src...); err == nil {
			t.Errorf("sources %+v: no error", src)
		}
	}
}

func newLogger(w io.Writer) *log.Logger { return log.New(w, "", 0) }
