package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
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
	spec := infer.Spec{Model: "resnet8", Width: 0.25}
	net, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := checkpoint.SaveModel(path, net, spec.Metadata()); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeUntilSignal(t *testing.T) {
	path := modelFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-model", path, "-addr", "127.0.0.1:0", "-threads", "1"}, &stdout, &stderr)
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
	c := run(context.Background(), []string{"-model", path, "-loadtest", "300ms", "-concurrency", "2", "-threads", "1"}, &stdout, &stderr)
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
		{nil, exitUsage, "-model is required"},
		{[]string{"-model", path, "extra"}, exitUsage, "unexpected argument"},
		{[]string{"-model", path, "-concurrency", "0"}, exitUsage, "-concurrency 0"},
		{[]string{"-model", filepath.Join(t.TempDir(), "none")}, exitError, "none"},
		{[]string{"-model", path, "-arch", "resnet20"}, exitError, "missing keys"},
		{[]string{"-model", path, "-max-batch", "-1"}, exitError, "negative"},
		{[]string{"-model", path, "-addr", "256.0.0.1:0"}, exitError, "256.0.0.1"},
	} {
		var stdout, stderr syncBuffer
		got := run(context.Background(), c.args, &stdout, &stderr)
		if got != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, got, stderr.String(), c.code, c.msg)
		}
	}
}
