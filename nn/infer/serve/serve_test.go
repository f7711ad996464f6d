package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
	"github.com/proxgen/proxgen/nn/models"
)

// tinyModel returns a small random ResNet-8 loaded from a model file.
func tinyModel(t testing.TB) *infer.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeModel(t, path, 11, 1)
	m, err := infer.Load(path, models.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeModel writes a ResNet-8 of width 0.25 with random weights drawn
// from seed, the weights of its first convolution multiplied by scale, to
// path (through a temporary file and a rename, as a deployment replaces a
// model file).
func writeModel(t testing.TB, path string, seed uint64, scale float32) {
	t.Helper()
	spec := models.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 12))
	for i, p := range append(net.Params(), net.Buffers()...) {
		if strings.HasSuffix(p.Name, "num_batches_tracked") {
			continue
		}
		for j := range p.T.Data {
			v := rng.NormFloat64() * 0.3
			if strings.HasSuffix(p.Name, "running_var") {
				v = 0.5 + rng.Float64()
			}
			p.T.Data[j] = float32(v)
			if i == 0 {
				p.T.Data[j] *= scale
			}
		}
	}
	tmp := path + ".tmp"
	if err := checkpoint.SaveModel(tmp, net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// running is a Server serving on a loopback listener.
type running struct {
	srv    *serve.Server
	url    string
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, m *infer.Model, cfg serve.Config) *running {
	t.Helper()
	if cfg.DrainGrace == 0 {
		cfg.DrainGrace = -1 // the tests' cleanup need not wait for load balancers
	}
	srv, err := serve.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, srv)
}

// startServer serves srv on a loopback listener until the test ends.
func startServer(t *testing.T, srv *serve.Server) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		r.done <- nil
	})
	return r
}

// exchange sends a request (with Content-Type ct unless empty) and
// returns the answer, its body read, after checking that its
// Content-Type is want.
func exchange(t *testing.T, method, url, ct string, body io.Reader, want string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Content-Type"); got != want {
		t.Fatalf("%s %s: Content-Type %q, want %q; body %s", method, url, got, want, b)
	}
	return resp, b
}

// post sends body and returns the status and the JSON answer.
func post(t *testing.T, url, ct string, body []byte) (int, []byte) {
	t.Helper()
	resp, b := exchange(t, "POST", url, ct, bytes.NewReader(body), "application/json")
	return resp.StatusCode, b
}

func classify(t *testing.T, url, ct string, body []byte) []infer.Class {
	t.Helper()
	code, b := post(t, url, ct, body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var r serve.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return r.Predictions
}

func synthetic(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, 1))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 5), uint8(y * 7), uint8(rng.IntN(256)), 255})
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func rawImage(seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, cifar10.ImageSize)
	for i := range b {
		b[i] = uint8(rng.IntN(256))
	}
	return b
}

// direct classifies a raw image with the model itself.
func direct(m *infer.Model, raw []byte, k int) []infer.Class {
	x := make([]float32, infer.InputSize)
	if err := m.PreprocessRaw(x, raw); err != nil {
		panic(err)
	}
	return infer.TopK(m.Probabilities(nil, x), k, m.Spec().Classes)
}

// testImage returns a 45×37 image, its PNG and JPEG encodings, and the
// JPEG decoded (what the server sees).
func testImage(t *testing.T) (img image.Image, pngBytes, jpegBytes []byte, decoded image.Image) {
	t.Helper()
	img = synthetic(45, 37, 1)
	pngBytes, jpegBytes = encodePNG(t, img), encodeJPEG(t, img)
	decoded, err := jpeg.Decode(bytes.NewReader(jpegBytes))
	if err != nil {
		t.Fatal(err)
	}
	return img, pngBytes, jpegBytes, decoded
}

func TestClassifyFormats(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	img, pngBytes, jpegBytes, decoded := testImage(t)
	raw := rawImage(3)
	for _, c := range []struct {
		name, ct, query string
		body            []byte
		want            []infer.Class
	}{
		{"png", "image/png", "?k=3", pngBytes, m.Predict([]image.Image{img}, 3)[0]},
		{"jpeg", "image/jpeg", "?k=2", jpegBytes, m.Predict([]image.Image{decoded}, 2)[0]},
		{"raw", "application/octet-stream", "?k=4", raw, direct(m, raw, 4)},
		{"record", "application/octet-stream; charset=binary", "?k=1", append([]byte{7}, raw...), direct(m, raw, 1)},
		{"default k", "application/octet-stream", "", raw, direct(m, raw, 5)},
		{"k clamped", "application/octet-stream", "?k=99", raw, direct(m, raw, 10)},
	} {
		got := classify(t, r.url+"/classify"+c.query, c.ct, c.body)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestClassifyErrors(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MaxBodyBytes: 64 << 10, MaxPixels: 100 * 100})
	img := synthetic(40, 40, 4)
	pngBytes, jpegBytes := encodePNG(t, img), encodeJPEG(t, img)
	big := encodePNG(t, synthetic(101, 100, 5))
	for _, c := range []struct {
		name, method, path, ct string
		body                   io.Reader
		want                   int
		msg                    string
	}{
		{"wrong content type", "POST", "/classify", "text/plain", bytes.NewReader(pngBytes), 415, "not supported"},
		{"no content type", "POST", "/classify", "", bytes.NewReader(pngBytes), 415, "no Content-Type"},
		{"bad content type", "POST", "/classify", "image/", bytes.NewReader(pngBytes), 415, "Content-Type"},
		{"truncated png", "POST", "/classify", "image/png", bytes.NewReader(pngBytes[:len(pngBytes)/2]), 400, "PNG"},
		{"truncated jpeg", "POST", "/classify", "image/jpeg", bytes.NewReader(jpegBytes[:len(jpegBytes)/2]), 400, "JPEG"},
		{"png as jpeg", "POST", "/classify", "image/jpeg", bytes.NewReader(pngBytes), 400, "JPEG"},
		{"raw wrong length", "POST", "/classify", "application/octet-stream", bytes.NewReader(make([]byte, 3000)), 400, "3072"},
		{"bad k", "POST", "/classify?k=0", "image/png", bytes.NewReader(pngBytes), 400, "k="},
		{"huge body", "POST", "/classify", "image/png", bytes.NewReader(make([]byte, 1<<20)), 413, "limit"},
		// io.MultiReader hides the length: the body is sent chunked.
		{"huge chunked body", "POST", "/classify", "image/png", io.MultiReader(bytes.NewReader(make([]byte, 1<<20))), 413, "limit"},
		{"too many pixels", "POST", "/classify", "image/png", bytes.NewReader(big), 413, "101×100"},
		{"GET classify", "GET", "/classify", "", nil, 405, "POST"},
		{"unknown path", "GET", "/nothing", "", nil, 404, "no endpoint"},
	} {
		req, err := http.NewRequest(c.method, r.url+c.path, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e serve.ErrorResponse
		if resp.StatusCode != c.want || json.Unmarshal(b, &e) != nil || e.Status != c.want || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: status %d, body %s; want %d with a JSON error mentioning %q", c.name, resp.StatusCode, b, c.want, c.msg)
		}
	}
	met := r.srv.Metrics()
	if met.Errors != 11 || met.Requests != 11 || met.Status["415"] != 3 || met.Status["413"] != 3 {
		t.Errorf("metrics %+v", met)
	}
}

// held is a request whose body is only partly sent.
type held struct {
	conn net.Conn
	rest []byte // the rest of the body
}

// hold opens n connections, each sending the headers of a raw-image
// request for image i (rawImage(i)) with query k and the first sent bytes
// of the body, and waits until the server handles all of them.
func hold(t *testing.T, r *running, n, sent, k int) []held {
	t.Helper()
	hs := make([]held, n)
	for i := range hs {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		body := rawImage(uint64(i))
		fmt.Fprintf(c, "POST /classify?k=%d HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", k, len(body))
		if _, err := c.Write(body[:sent]); err != nil {
			t.Fatal(err)
		}
		hs[i] = held{c, body[sent:]}
	}
	waitReading(t, r.srv, int64(n))
	return hs
}

// finish sends the rest of the body and returns the answer.
func (h held) finish(t *testing.T) (int, []byte) {
	if _, err := h.conn.Write(h.rest); err != nil {
		t.Error(err)
		return 0, nil
	}
	return readAnswer(t, h.conn)
}

// readAnswer reads the HTTP response on c.
func readAnswer(t *testing.T, c net.Conn) (int, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestSlowClient(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{BodyTimeout: 300 * time.Millisecond, MinBodyRate: -1})
	h := hold(t, r, 1, 100, 2)[0]
	t0 := time.Now()
	code, b := readAnswer(t, h.conn)
	if code != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive") {
		t.Fatalf("slow client: status %d %s, want 408", code, b)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}
	// The server still works.
	classify(t, r.url+"/classify", "application/octet-stream", rawImage(2))
}

// TestConcurrencyLimit fills the in-flight slots with two requests whose
// batch waits (a third request is still being received, so the worker
// waits up to MaxDelay for it): a complete request then gets 429, while the
// request still sending its body held no slot.
func TestConcurrencyLimit(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MaxInFlight: 2, MaxDelay: 3 * time.Second})
	slow := hold(t, r, 1, 10, 2)[0]
	codes := make(chan int, 2)
	for i := range 2 {
		go func() {
			code, _ := post(t, r.url+"/classify", "application/octet-stream", rawImage(uint64(i)))
			codes <- code
		}()
	}
	waitInFlight(t, r.srv, 2)
	code, b := post(t, r.url+"/classify", "application/octet-stream", rawImage(9))
	if code != http.StatusTooManyRequests || !strings.Contains(string(b), "limit 2") {
		t.Fatalf("third request: status %d %s, want 429", code, b)
	}
	if code, b := slow.finish(t); code != http.StatusTooManyRequests {
		t.Fatalf("the request that held no slot while sending: status %d %s, want 429", code, b)
	}
	for range 2 {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("request in a slot: status %d", code)
		}
	}
	classify(t, r.url+"/classify", "application/octet-stream", rawImage(9))
}

// waitMetric waits until get(s.Metrics()) is n.
func waitMetric(t *testing.T, s *serve.Server, what string, get func(serve.Metrics) int64, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); get(s.Metrics()) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%s %d, want %d", what, get(s.Metrics()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitInFlight waits until n requests hold a slot.
func waitInFlight(t *testing.T, s *serve.Server, n int64) {
	t.Helper()
	waitMetric(t, s, "in flight", func(m serve.Metrics) int64 { return m.InFlight }, n)
}

// waitReading waits until n requests are receiving their body.
func waitReading(t *testing.T, s *serve.Server, n int64) {
	t.Helper()
	waitMetric(t, s, "reading", func(m serve.Metrics) int64 { return m.Reading }, n)
}

// TestBatching sends concurrent requests: some run in batches of more than
// one image, and every answer equals the answer to the same request sent
// alone, bit for bit.
func TestBatching(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MaxBatch: 8, MaxDelay: 200 * time.Millisecond, Workers: 2})
	const n = 24
	alone := make([][]infer.Class, n)
	for i := range n {
		alone[i] = classify(t, r.url+"/classify?k=10", "application/octet-stream", rawImage(uint64(i)))
		if !reflect.DeepEqual(alone[i], direct(m, rawImage(uint64(i)), 10)) {
			t.Fatalf("request %d differs from the model's own answer", i)
		}
	}
	if sizes := r.srv.Metrics().BatchSizes; len(sizes) != 1 || sizes["1"] != n {
		t.Fatalf("sequential requests ran in batches %v, want %d of 1", sizes, n)
	}
	// All n requests are admitted and being received before any image
	// arrives in full, so the first batch waits for the others.
	hs := hold(t, r, n, 100, 10)
	var wg sync.WaitGroup
	got := make([][]infer.Class, n)
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := h.finish(t)
			var a serve.Response
			if err := json.Unmarshal(b, &a); err != nil || code != 200 {
				t.Errorf("request %d: status %d %s", i, code, b)
			}
			got[i] = a.Predictions
		}()
	}
	wg.Wait()
	for i := range n {
		if !reflect.DeepEqual(got[i], alone[i]) {
			t.Errorf("request %d: batched %+v, alone %+v", i, got[i], alone[i])
		}
	}
	met := r.srv.Metrics()
	batched := int64(0)
	for size, count := range met.BatchSizes {
		s, _ := strconv.Atoi(size)
		if s > 8 {
			t.Errorf("batch of %d images, limit 8", s)
		}
		if s > 1 {
			batched += count
		}
	}
	if batched == 0 || met.Images != 2*n {
		t.Fatalf("no batch of more than one image: %+v", met)
	}
	t.Logf("batch sizes %v", met.BatchSizes)
}

// TestShutdownDrains cancels Serve while requests are in flight: the
// listener stays open through the drain — a new connection gets
// /v2/health/ready 503 and a new inference request 503 with Retry-After
// (before issue 35 the listener closed at once and such connections got
// no answer) — the requests in flight all complete, and then, the grace
// past, the listener closes and Serve returns nil.
func TestShutdownDrains(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{DrainGrace: 300 * time.Millisecond, MinBodyRate: -1})
	hs := hold(t, r, 3, 1000, 2)
	t0 := time.Now()
	r.cancel()
	time.Sleep(50 * time.Millisecond)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(r.url + "/v2/health/ready")
	if err != nil {
		t.Fatalf("readiness during the drain: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readiness during the drain: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = client.Post(r.url+"/v2/models/model/infer", "application/json", strings.NewReader(`{"inputs":[]}`))
	if err != nil {
		t.Fatalf("inference during the drain: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("inference during the drain: %d %v", resp.StatusCode, resp.Header)
	}
	time.Sleep(400 * time.Millisecond) // past the grace: the held requests keep it open
	select {
	case err := <-r.done:
		t.Fatalf("Serve returned %v with requests in flight", err)
	default:
	}
	for i, h := range hs {
		code, b := h.finish(t)
		var a serve.Response
		if code != http.StatusOK || json.Unmarshal(b, &a) != nil || !reflect.DeepEqual(a.Predictions, direct(m, rawImage(uint64(i)), 2)) {
			t.Fatalf("request %d in flight at shutdown: status %d %s", i, code, b)
		}
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		r.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the requests finished")
	}
	if _, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond); err == nil {
		t.Error("the listener still accepts connections after Serve returned")
	}
	t.Logf("drain of 3 held requests: %v", time.Since(t0))
}

func TestHealthAndMetrics(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	resp, err := http.Get(r.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h serve.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || !strings.Contains(h.Model, "resnet8") {
		t.Fatalf("healthz: %d %+v", resp.StatusCode, h)
	}
	for i := range 5 {
		classify(t, r.url+"/classify", "application/octet-stream", rawImage(uint64(i)))
	}
	post(t, r.url+"/classify", "text/plain", nil)
	resp, err = http.Get(r.url + "/metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var met serve.Metrics
	if err := json.NewDecoder(resp.Body).Decode(&met); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if met.Requests != 6 || met.Errors != 1 || met.Status["200"] != 5 || met.Status["415"] != 1 ||
		met.Latency.Window != 5 || !(met.Latency.P50 > 0) || met.Latency.P50 > met.Latency.P99 ||
		met.Latency.P99 > met.Latency.Max || met.Batches != 5 || met.BatchSizes["1"] != 5 || met.InFlight != 0 || met.Reading != 0 {
		t.Fatalf("metrics %+v", met)
	}

	// Close turns health to draining and refuses classification.
	r.srv.Close()
	resp, err = http.Get(r.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, _ := post(t, r.url+"/classify", "application/octet-stream", rawImage(1))
	if resp.StatusCode != http.StatusServiceUnavailable || code != http.StatusServiceUnavailable {
		t.Fatalf("after Close: healthz %d, classify %d, want 503", resp.StatusCode, code)
	}
}

func TestNewRejectsNegativeLimits(t *testing.T) {
	if _, err := serve.New(tinyModel(t), serve.Config{MaxBatch: -1}); err == nil {
		t.Fatal("no error")
	}
}

// TestLoad is the bounded load test: ResNet-20 with random weights, 8
// clients for 3 seconds; it reports requests/s and latency percentiles.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	spec := models.Spec{Model: "resnet20"}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.New(net, spec)
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, m, serve.Config{MaxBatch: 64})
	res, err := serve.LoadTest(context.Background(), serve.LoadConfig{
		URL: r.url + "/classify?k=1", Body: rawImage(1), ContentType: "application/octet-stream",
		Concurrency: 8, Duration: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	met := r.srv.Metrics()
	t.Logf("%d clients: %.0f requests/s, latency p50 %.1f ms, p99 %.1f ms; server batches %v",
		res.Concurrency, res.RequestsPerSecond, res.Latency.P50, res.Latency.P99, met.BatchSizes)
	if res.Errors != 0 || res.Requests == 0 || met.Images < int64(res.Requests) {
		t.Fatalf("load test %+v, server %+v", res, met)
	}
}

// TestAdminListener serves the administrative endpoints on their own
// listener: /metrics and the model_repository extension answer there and
// 404 on the clients' port, where inference answers (and not on the
// admin one).
func TestAdminListener(t *testing.T) {
	m := tinyModel(t)
	srv, err := serve.New(m, serve.Config{DrainGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeWithAdmin(ctx, ln, admin) }()
	pub, adm := "http://"+ln.Addr().String(), "http://"+admin.Addr().String()
	x := fp32Data(preprocessed(t, m, rawImage(1)))
	infer := `{"inputs":[{"name":"input","shape":[1,3,32,32],"datatype":"FP32","data":` + x + `}]}`
	for _, c := range []struct {
		method, url, body string
		code              int
	}{
		{"GET", pub + "/metrics", "", 404},
		{"GET", pub + "/metrics.json", "", 404},
		{"POST", pub + "/v2/repository/index", "", 404},
		{"POST", adm + "/v2/repository/index", "", 200},
		{"POST", pub + "/v2/repository/models/model/unload", "", 404},
		{"POST", pub + "/v2/models/model/infer", infer, 200},
		{"POST", adm + "/v2/models/model/infer", infer, 404},
		{"GET", adm + "/v2/health/ready", "", 200},
	} {
		if code, b := do(t, c.method, c.url, c.body); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.url, code, b, c.code)
		}
	}
	resp, err := http.Get(adm + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /metrics on the admin address: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
