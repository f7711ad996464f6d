// Command serve classifies images over HTTP with a model file: the
// front end of package nn/infer/serve.
//
// Usage:
//
//	serve -model FILE [flags]
//
// It loads FILE (a model file written by cmd/cifar, whose metadata names
// the network, or a PyTorch state dict with -arch), listens on -addr and
// answers
//
//	POST /classify?k=5   an image (Content-Type image/png, image/jpeg, or
//	                     application/octet-stream for a raw 3072-byte CIFAR-10
//	                     image or 3073-byte record) → the top-k classes as JSON
//	GET  /healthz        liveness, 503 while draining
//	GET  /metrics        requests, errors, latency percentiles, batch sizes (JSON)
//
// until SIGINT or SIGTERM, then stops accepting connections, finishes the
// requests in flight and exits 0. With -loadtest DURATION it instead serves
// on a loopback port, runs a closed-loop load test against itself for
// DURATION with -concurrency clients and prints the figures as one JSON
// line. docs/serve.md describes the API, the preprocessing and the limits.
//
// Examples:
//
//	go run ./cmd/serve -model runs/resnet20-proxgen-l12-s1/model.safetensors
//	curl -s --data-binary @cat.png -H 'Content-Type: image/png' 'localhost:8080/classify?k=3'
//	go run ./cmd/serve -model torch.safetensors -arch resnet20 -addr 127.0.0.1:9000
//	go run ./cmd/serve -model model.safetensors -loadtest 10s -concurrency 16
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses of run.
const (
	exitOK    = 0
	exitError = 1 // loading the model, listening or serving failed
	exitUsage = 2 // bad flags
)

type config struct {
	model       string
	spec        infer.Spec
	dense       bool
	addr        string
	threads     int
	srv         serve.Config
	loadtest    time.Duration
	concurrency int
	image       string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.model, "model", "", "model file (safetensors) to serve (required)")
	fs.StringVar(&c.spec.Model, "arch", "", "network of the file (resnet20, vgg16, ...); default: the file's metadata (needed for PyTorch files)")
	fs.Float64Var(&c.spec.Width, "width", 0, "channel multiplier of the network; default: the file's metadata, else 1")
	fs.StringVar(&c.spec.Shortcut, "shortcut", "", "shortcut of resnet20..56, A or B; default: the file's metadata, else A")
	fs.IntVar(&c.spec.NumClasses, "classes", 0, "number of classes; default: the file's metadata, else 10")
	fs.BoolVar(&c.dense, "dense", false, "run every layer densely (default: layers with mostly exact zeros run sparse)")
	fs.StringVar(&c.addr, "addr", ":8080", "address to listen on")
	fs.IntVar(&c.threads, "threads", 0, "worker threads (0: all cores)")
	fs.IntVar(&c.srv.MaxBatch, "max-batch", 32, "most images run together in one batch")
	fs.DurationVar(&c.srv.MaxDelay, "max-delay", 2*time.Millisecond, "longest a batch waits for more images after its first")
	fs.IntVar(&c.srv.Workers, "workers", 1, "batches run at once")
	fs.Int64Var(&c.srv.MaxBodyBytes, "max-body", 8<<20, "largest request body in bytes (larger: 413)")
	fs.IntVar(&c.srv.MaxPixels, "max-pixels", 4096*4096, "largest PNG/JPEG in pixels (larger: 413)")
	fs.IntVar(&c.srv.MaxInFlight, "max-inflight", 256, "most classification requests handled at once (more: 429)")
	fs.IntVar(&c.srv.DefaultK, "k", 5, "classes answered when a request has no k parameter")
	fs.DurationVar(&c.srv.ReadTimeout, "read-timeout", 10*time.Second, "time a client has to send its request (slower: 408)")
	fs.DurationVar(&c.srv.WriteTimeout, "write-timeout", 30*time.Second, "time to write a response")
	fs.DurationVar(&c.srv.DrainTimeout, "drain-timeout", 30*time.Second, "longest wait for requests in flight at shutdown")
	fs.DurationVar(&c.loadtest, "loadtest", 0, "run a load test against a loopback instance for this long, print JSON and exit")
	fs.IntVar(&c.concurrency, "concurrency", 8, "load test: clients sending requests back to back")
	fs.StringVar(&c.image, "image", "", "load test: PNG or JPEG file sent by every request (default: a random raw CIFAR-10 image)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.model == "" {
		return nil, errors.New("-model is required")
	}
	if c.threads < 0 || c.concurrency < 1 || c.loadtest < 0 {
		return nil, fmt.Errorf("-threads %d, -concurrency %d or -loadtest %v out of range", c.threads, c.concurrency, c.loadtest)
	}
	return c, nil
}

// run is the whole program; it returns the exit status. Errors go to
// stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return exitUsage
	}
	threads := c.threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	defer parallel.SetWorkers(parallel.SetWorkers(threads))
	if err := serveModel(ctx, c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return exitError
	}
	return exitOK
}

func serveModel(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	var opts []infer.Option
	if c.dense {
		opts = append(opts, infer.Dense())
	}
	m, err := infer.Load(c.model, c.spec, opts...)
	if err != nil {
		return err
	}
	if len(m.Sparsity().SparseLayers()) > 0 {
		fmt.Fprintf(stderr, "serve: %s", m.Sparsity())
	}
	srv, err := serve.New(m, c.srv)
	if err != nil {
		return err
	}
	addr := c.addr
	if c.loadtest > 0 {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(stderr, "serve: %s (%s) listening on http://%s\n", m, c.model, ln.Addr())
	if c.loadtest == 0 {
		if err := srv.Serve(ctx, ln); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "serve: shut down")
		return nil
	}

	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	cpu := cpuTime()
	res, lerr := loadTest(ctx, c, "http://"+ln.Addr().String())
	cpu = cpuTime() - cpu
	stop()
	if err := <-done; err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	met := srv.Metrics()
	res.Server = &met
	out := loadReport{LoadResult: res}
	if cpu > 0 {
		out.CPUSeconds = cpu.Seconds()
		out.RequestsPerCPUSecond = float64(res.Requests-res.Errors) / cpu.Seconds()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return nil
}

// loadReport is the output of -loadtest: the load test's figures and the
// CPU time the process (server and clients together) used, which depends
// less than requests/s on other processes of a shared machine.
type loadReport struct {
	serve.LoadResult
	CPUSeconds           float64 `json:"cpu_s,omitempty"`
	RequestsPerCPUSecond float64 `json:"requests_per_cpu_s,omitempty"`
}

func loadTest(ctx context.Context, c *config, url string) (serve.LoadResult, error) {
	lc := serve.LoadConfig{URL: url + "/classify?k=1", Concurrency: c.concurrency, Duration: c.loadtest}
	if c.image == "" {
		rng := rand.New(rand.NewPCG(1, 2))
		lc.Body, lc.ContentType = make([]byte, cifar10.ImageSize), "application/octet-stream"
		for i := range lc.Body {
			lc.Body[i] = uint8(rng.IntN(256))
		}
	} else {
		b, err := os.ReadFile(c.image)
		if err != nil {
			return serve.LoadResult{}, fmt.Errorf("-image: %w", err)
		}
		lc.Body, lc.ContentType = b, mime.TypeByExtension(filepath.Ext(c.image))
	}
	return serve.LoadTest(ctx, lc)
}
