package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer/serve"
	nnmodels "github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/pretrained"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func modelFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeModel(t, path, 1)
	return path
}

// writeModel writes a ResNet-8 of width 0.25 to path, its first weight
// set to w (through a rename, as a deployment replaces a file).
func writeModel(t *testing.T, path string, w float32) {
	t.Helper()
	spec := nnmodels.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	net.Params()[0].T.Data[0] = w
	if err := checkpoint.SaveModel(path+".tmp", net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// startRun runs the program with args until the test ends (or ctx is
// cancelled) and returns its base URL; the exit status arrives on code.
func startRun(t *testing.T, ctx context.Context, args []string, stderr *syncBuffer, hup chan os.Signal) (string, chan int) {
	t.Helper()
	var stdout syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, &stdout, stderr, hup) }()
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	// The bound is for a server that never starts: loading times the
	// shipped sparse model's candidate plans (infer.New), which takes
	// seconds on a machine loaded by the other test binaries.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], code
		}
		select {
		case c := <-code:
			t.Fatalf("exit %d:\n%s", c, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address in the log:\n%s", stderr.String())
		}
	}
}

// getJSON gets url and decodes its JSON answer into v, returning the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

// TestSeveralModelsAndSIGHUP serves three models (two by -model, one from
// -model-dir), replaces one file and
// corrupts the other, and sends SIGHUP (on run's channel): the first is
// reloaded, the second keeps serving its old version and the failure is
// logged.
func TestSeveralModelsAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "second.safetensors")
	writeModel(t, pathA, 1)
	writeModel(t, pathB, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	hup := make(chan os.Signal, 1)
	dirC := t.TempDir()
	writeModel(t, filepath.Join(dirC, "third.safetensors"), 4)
	os.WriteFile(filepath.Join(dirC, "notes.txt"), nil, 0o644)
	url, code := startRun(t, ctx, []string{"-model", "first=" + pathA, "-model", pathB, "-model-dir", dirC, "-addr", "127.0.0.1:0", "-threads", "1"}, &stderr, hup)
	version := func(name string) string {
		var meta serve.ModelMetadata
		if c := getJSON(t, url+"/v2/models/"+name, &meta); c != 200 || len(meta.Versions) != 1 {
			t.Fatalf("model %s: status %d %+v", name, c, meta)
		}
		return meta.Versions[0]
	}
	if version("first") != "1" || version("second") != "1" || version("third") != "1" {
		t.Fatal("models not served under their names")
	}
	resp, err := http.Post(url+"/classify?model=second", "application/octet-stream", bytes.NewReader(make([]byte, cifar10.ImageSize)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("classify with model=second: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	writeModel(t, pathA, 3)
	if err := os.WriteFile(pathB, []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	for deadline := time.Now().Add(10 * time.Second); version("first") != "2"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("first not reloaded after SIGHUP:\n%s", stderr.String())
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), `reloading model "second" failed, version 1 keeps serving`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the failed reload is not logged:\n%s", stderr.String())
		}
	}
	var ready map[string]any
	if c := getJSON(t, url+"/v2/models/second/ready", &ready); c != 200 || version("second") != "1" {
		t.Fatalf("second after a failed reload: status %d, version %s", c, version("second"))
	}
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d\n%s", c, stderr.String())
	}
}

// TestDrainDeadlineExitCode holds an upload half-sent across SIGINT with
// a short -drain-timeout: the upload is answered 503 and the program
// exits 3.
func TestDrainDeadlineExitCode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	url, code := startRun(t, ctx, []string{"-model", modelFile(t), "-addr", "127.0.0.1:0", "-threads", "1", "-drain-timeout", "200ms", "-min-body-rate", "-1"}, &stderr, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", cifar10.ImageSize)
	c.Write(make([]byte, 100))
	// The bound is for a server that never starts: loading times the
	// shipped sparse model's candidate plans (infer.New), which takes
	// seconds on a machine loaded by the other test binaries.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var m serve.Metrics
		if getJSON(t, url+"/metrics.json", &m); m.Reading == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload is not being read")
		}
	}
	cancel()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the stuck upload: %v %v", resp, err)
	}
	if got := <-code; got != exitDrain || !strings.Contains(stderr.String(), "drain deadline passed") || strings.Contains(stderr.String(), "serve: serve:") {
		t.Fatalf("exit %d, want %d\n%s", got, exitDrain, stderr.String())
	}
}

func TestServeUntilSignal(t *testing.T) {
	path := modelFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-model", path, "-addr", "127.0.0.1:0", "-threads", "1"}, &stdout, &stderr, nil)
	}()
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no address in the log:\n%s", stderr.String())
		}
	}
	resp, err := http.Post(url+"/classify?k=2", "application/octet-stream", bytes.NewReader(make([]byte, cifar10.ImageSize)))
	if err != nil {
		t.Fatal(err)
	}
	var r serve.Response
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(r.Predictions) != 2 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, r, err)
	}
	cancel() // as SIGINT does
	select {
	case c := <-code:
		if c != exitOK || !strings.Contains(stderr.String(), "shut down") {
			t.Fatalf("exit %d\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the signal")
	}
}

func TestLoadTestMode(t *testing.T) {
	path := modelFile(t)
	var stdout, stderr syncBuffer
	c := run(context.Background(), []string{"-model", path, "-loadtest", "300ms", "-concurrency", "2", "-threads", "1"}, &stdout, &stderr, nil)
	if c != exitOK {
		t.Fatalf("exit %d\n%s", c, stderr.String())
	}
	var res loadReport
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if res.Requests == 0 || res.Errors != 0 || !(res.RequestsPerSecond > 0) || !(res.Latency.P99 >= res.Latency.P50) || res.Server == nil || res.Server.Images < int64(res.Requests) ||
		(runtime.GOOS == "linux" && !(res.RequestsPerCPUSecond > 0)) {
		t.Fatalf("load test %+v", res)
	}
}

func TestErrors(t *testing.T) {
	path := modelFile(t)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-model", "resnet20-no-such-model"}, exitUsage, "resnet20-no-such-model is neither a file nor a shipped model (resnet20-"},
		{[]string{"-model", filepath.Join(t.TempDir(), "none.safetensors")}, exitError, "serve: model \"none\": open "},
		{[]string{"-model-dir", filepath.Join(t.TempDir(), "none")}, exitError, "none"},
		{[]string{"-model-dir", t.TempDir()}, exitError, "no .safetensors file"},
		{[]string{"-model", path, "extra"}, exitUsage, "unexpected argument"},
		{[]string{"-model", path, "-concurrency", "0"}, exitUsage, "-concurrency 0"},
		{[]string{"-model", filepath.Join(t.TempDir(), "none")}, exitError, "none"},
		{[]string{"-model", path, "-arch", "resnet20"}, exitError, "missing keys"},
		{[]string{"-model", path, "-max-batch", "-1"}, exitError, "negative"},
		{[]string{"-model", path, "-addr", "256.0.0.1:0"}, exitError, "256.0.0.1"},
		{[]string{"-model", "=" + path}, exitUsage, "NAME=FILE"},
		{[]string{"-model", "a=" + path, "-model", "a=" + path}, exitError, `"a" given twice`},
		{[]string{"-model", "a/b=" + path}, exitError, "model name"},
	} {
		var stdout, stderr syncBuffer
		got := run(context.Background(), c.args, &stdout, &stderr, nil)
		if got != c.code || !strings.Contains(stderr.String(), c.msg) || strings.Contains(stderr.String(), "serve: serve:") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q (once prefixed)", c.args, got, stderr.String(), c.code, c.msg)
		}
	}
}

// TestHostileMetadata serves model files whose metadata asks for networks
// far larger than their tensors (issue 26, F5): exit 1 naming the key,
// quickly, never a runtime fatal error.
func TestHostileMetadata(t *testing.T) {
	path := modelFile(t)
	for _, c := range []struct{ key, value, want string }{
		{nnmodels.KeyWidth, "10000", "width 10000: want more than 0 and at most 16"},
		{nnmodels.KeyModel, "resnet600000002", `model "resnet600000002"`},
		{nnmodels.KeyNumClasses, "500000000", "num_classes 500000000"},
	} {
		f, err := safetensors.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f.Metadata[c.key] = c.value
		bad := filepath.Join(t.TempDir(), "bad.safetensors")
		if err := safetensors.WriteFileAtomic(bad, f); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr syncBuffer
		start := time.Now()
		got := run(context.Background(), []string{"-model", bad, "-addr", "127.0.0.1:0"}, &stdout, &stderr, nil)
		t.Logf("%s=%s: exit %d in %v", c.key, c.value, got, time.Since(start))
		if got != exitError || !strings.Contains(stderr.String(), c.want) || strings.Contains(stderr.String(), "goroutine ") {
			t.Errorf("%s=%s: exit %d, stderr %q; want %d and %q", c.key, c.value, got, stderr.String(), exitError, c.want)
		}
	}
}

// TestShippedModels serves without -model (the shipped default, said in
// the log) and a second shipped model by name; both classify, under their
// names.
func TestShippedModels(t *testing.T) {
	names := pretrained.Names()
	other := names[0]
	if other == pretrained.Default {
		other = names[len(names)-1]
	}
	for _, args := range [][]string{nil, {"-model", other}} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncBuffer
		url, code := startRun(t, ctx, append(args, "-addr", "127.0.0.1:0", "-threads", "1"), &stderr, nil)
		name := pretrained.Default
		if args != nil {
			name = other
		} else if !strings.Contains(stderr.String(), "no -model given: serving the shipped model "+name) {
			t.Errorf("the log does not say which model it serves:\n%s", stderr.String())
		}
		resp, err := http.Post(url+"/classify?k=3&model="+name, "application/octet-stream", bytes.NewReader(make([]byte, cifar10.ImageSize)))
		if err != nil {
			t.Fatal(err)
		}
		var r serve.Response
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(r.Predictions) != 3 {
			t.Errorf("%q: status %d, %+v, %v", args, resp.StatusCode, r, err)
		}
		cancel()
		if c := <-code; c != exitOK {
			t.Errorf("%q: exit %d\n%s", args, c, stderr.String())
		}
	}
}

// TestByteSizeFlags: the byte-size flags take units as Kubernetes writes
// quantities (issue 35: "-memory-budget 128Mi" was refused), and -h shows
// one default per flag (it showed two for -model and -memory-budget).
func TestByteSizeFlags(t *testing.T) {
	c, err := parseFlags([]string{"-memory-budget", "128Mi", "-max-body", "1M", "-max-model-size", "1024"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.srv.MemoryBudget != 128<<20 || c.srv.MaxBodyBytes != 1e6 || c.srv.MaxModelBytes != 1024 {
		t.Errorf("budget %d, max body %d, max model %d", c.srv.MemoryBudget, c.srv.MaxBodyBytes, c.srv.MaxModelBytes)
	}
	for _, bad := range []string{"12Zi", "-1", "1.5Gi", "Mi", "99999999999Ti"} {
		if _, err := parseFlags([]string{"-memory-budget", bad}, io.Discard); err == nil {
			t.Errorf("-memory-budget %s accepted", bad)
		}
	}
	var help bytes.Buffer
	parseFlags([]string{"-h"}, &help)
	lines := strings.Split(help.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  -") && i+1 < len(lines) && strings.Count(lines[i+1], "(default") > 1 {
			t.Errorf("%s: %s", l, lines[i+1])
		}
	}
	if !strings.Contains(help.String(), "(default 8Mi)") {
		t.Errorf("-max-body's default is not shown as 8Mi:\n%s", help.String())
	}
}
