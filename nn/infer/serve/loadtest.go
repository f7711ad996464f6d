package serve

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LoadConfig describes a closed-loop load test: Concurrency clients each
// send the same request back to back until Duration has passed or
// Requests requests were sent in all.
type LoadConfig struct {
	// URL is the classification endpoint, e.g.
	// "http://127.0.0.1:8080/classify?k=1".
	URL string
	// Body and ContentType are the request sent.
	Body        []byte
	ContentType string
	// Concurrency is the number of clients; default 8.
	Concurrency int
	// Duration bounds the test; default 5s.
	Duration time.Duration
	// Requests, if positive, stops the test after that many requests.
	Requests int
	// Client sends the requests; nil means a client with keep-alive
	// connections for every client goroutine.
	Client *http.Client
}

// LoadResult summarises a load test.
type LoadResult struct {
	Concurrency       int            `json:"concurrency"`
	Requests          int            `json:"requests"`
	Errors            int            `json:"errors"`
	Status            map[string]int `json:"status"`
	Seconds           float64        `json:"seconds"`
	RequestsPerSecond float64        `json:"requests_per_s"`
	Latency           Latency        `json:"latency_ms"`
	Server            *Metrics       `json:"server,omitempty"`
}

// LoadTest runs the load test cfg describes and returns its figures:
// requests per second and the latency percentiles seen by the clients
// (nearest rank, over every request). Failed requests (transport errors
// or a status other than 200) count as errors and are not in the
// percentiles. It returns an error only when no request succeeded.
func LoadTest(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	var (
		mu        sync.Mutex
		latencies []float64
		status    = map[string]int{}
		errs      int
		firstErr  error
		sent      int
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if cfg.Requests > 0 && sent >= cfg.Requests {
			return false
		}
		sent++
		return true
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && take() {
				t0 := time.Now()
				code, err := send(ctx, client, cfg)
				d := time.Since(t0)
				if ctx.Err() != nil && err != nil {
					return // cut off by the end of the test, not counted
				}
				mu.Lock()
				switch {
				case err != nil:
					errs++
					firstErr = cmp.Or(firstErr, err)
					status["transport"]++
				case code != http.StatusOK:
					errs++
					status[strconv.Itoa(code)]++
				default:
					status[strconv.Itoa(code)]++
					latencies = append(latencies, float64(d)/float64(time.Millisecond))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	r := LoadResult{
		Concurrency:       cfg.Concurrency,
		Requests:          len(latencies) + errs,
		Errors:            errs,
		Status:            status,
		Seconds:           elapsed,
		RequestsPerSecond: float64(len(latencies)) / elapsed,
		Latency:           summarize(latencies),
	}
	if len(latencies) == 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("statuses %v", status)
		}
		return r, fmt.Errorf("serve: load test: no request succeeded: %w", firstErr)
	}
	return r, nil
}

// send posts one request and returns its status, the body read and
// discarded.
func send(ctx context.Context, client *http.Client, cfg LoadConfig) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(cfg.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", cfg.ContentType)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}
