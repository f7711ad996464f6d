package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn/infer/serve"
)

// TestSlowBodyAttack opens 300 connections that send their headers and
// then one body byte every 200 ms (the minimum-rate cut-off is off, so only
// the admission order protects), beside a client sending ordinary
// requests: with 4 in-flight slots, every ordinary request succeeds, since
// a request takes a slot only once its body has arrived.
func TestSlowBodyAttack(t *testing.T) {
	const attackers = 300
	m := tinyModel(t)
	r := start(t, m, serve.Config{MaxInFlight: 4, MinBodyRate: -1, BodyTimeout: time.Minute})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range attackers {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", cifar10.ImageSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte{1}); err != nil {
						return
					}
				}
			}
		}()
	}
	waitReading(t, r.srv, attackers)
	var latencies []time.Duration
	for i := range 20 {
		t0 := time.Now()
		code, b := post(t, r.url+"/classify", "application/octet-stream", rawImage(uint64(i)))
		latencies = append(latencies, time.Since(t0))
		if code != http.StatusOK {
			t.Fatalf("ordinary request %d during the attack: status %d %s", i, code, b)
		}
	}
	met := r.srv.Metrics()
	close(stop)
	wg.Wait()
	slices.Sort(latencies)
	t.Logf("%d trickling connections (reading %d): 20/20 ordinary requests answered 200, latency median %v, max %v",
		attackers, met.Reading, latencies[10], latencies[19])
}

// TestMinBodyRate: a client trickling under MinBodyRate is cut off with
// 408 soon after BodyGrace, long before BodyTimeout, and a client that
// sends nothing after its headers likewise.
func TestMinBodyRate(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{MinBodyRate: 1 << 10, BodyGrace: 200 * time.Millisecond, BodyTimeout: time.Minute})
	for _, trickle := range []bool{true, false} {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		t0 := time.Now()
		fmt.Fprintf(c, "POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", cifar10.ImageSize)
		if trickle {
			go func() {
				for i := 0; i < 100; i++ {
					if _, err := c.Write([]byte{1}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		code, b := readAnswer(t, c)
		d := time.Since(t0)
		if code != http.StatusRequestTimeout || !strings.Contains(string(b), "bytes/s") || d > 5*time.Second {
			t.Fatalf("trickle %v: status %d %s after %v, want 408 within seconds", trickle, code, b, d)
		}
		t.Logf("trickle %v: 408 after %v", trickle, d.Round(time.Millisecond))
	}
	classify(t, r.url+"/classify", "application/octet-stream", rawImage(1))
}

// rawExchange sends req on a new connection to addr and reads the answer.
func rawExchange(t *testing.T, addr string, req []byte) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write(req) // the server may answer before it has read everything
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.40q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestProtocolErrorsAreJSON sends requests net/http refuses before any
// handler runs: the answers are the server's JSON error form.
func TestProtocolErrorsAreJSON(t *testing.T) {
	m := tinyModel(t)
	r := start(t, m, serve.Config{})
	clientHello := []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}
	clientHello = append(clientHello, make([]byte, 160)...)
	for _, c := range []struct {
		name string
		req  []byte
		code int
	}{
		{"1 MiB URL", []byte("GET /" + strings.Repeat("a", 1<<20) + " HTTP/1.1\r\nHost: x\r\n\r\n"), 431},
		{"1 MiB header", []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20) + "\r\n\r\n"), 431},
		{"malformed request line", []byte("HELLO\r\n\r\n"), 400},
		{"TLS ClientHello", clientHello, 400},
		{"no Host", []byte("GET /healthz HTTP/1.1\r\n\r\n"), 400},
		{"bad Content-Length", []byte("POST /classify HTTP/1.1\r\nHost: x\r\nContent-Length: 12345678901234567890123\r\n\r\n"), 400},
		{"unsupported transfer encoding", []byte("POST /classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"), 501},
	} {
		t0 := time.Now()
		resp, b := rawExchange(t, r.addr, c.req)
		if d := time.Since(t0); d > 3*time.Second {
			t.Errorf("%s: answered after %v", c.name, d)
		}
		var e serve.ErrorResponse
		if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &e) != nil || e.Status != c.code || e.Error == "" {
			t.Errorf("%s: status %d, Content-Type %q, body %q; want %d and a JSON error", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.code)
		}
	}
	// The server still works, and ordinary answers are left alone.
	classify(t, r.url+"/classify", "application/octet-stream", rawImage(1))
}

// TestDrainDeadline holds uploads half-sent across a shutdown whose drain
// deadline passes: they are answered 503 (JSON), and Serve reports
// ErrDrainTimeout.
func TestDrainDeadline(t *testing.T) {
	m := tinyModel(t)
	srv, err := serve.New(m, serve.Config{DrainTimeout: 300 * time.Millisecond, MinBodyRate: -1, BodyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	r := &running{srv: srv, addr: ln.Addr().String(), url: "http://" + ln.Addr().String()}
	hs := hold(t, r, 20, 100, 1)
	t0 := time.Now()
	cancel()
	for i, h := range hs {
		code, b := readAnswer(t, h.conn)
		var e serve.ErrorResponse
		if code != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, "shutting down") {
			t.Fatalf("upload %d stuck at shutdown: status %d %s, want 503", i, code, b)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, serve.ErrDrainTimeout) || !strings.Contains(err.Error(), "20 receiving") {
			t.Fatalf("Serve: %v, want ErrDrainTimeout", err)
		}
		t.Logf("drain deadline 300ms: 20 stuck uploads answered 503, Serve returned after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}
