// Command serve classifies images over HTTP with a model file: the
// front end of package nn/infer/serve.
//
// Usage:
//
//	serve [-model [NAME=]FILE | -model NAME ...] [-model-dir DIR] [flags]
//
// It loads every FILE (and every *.safetensors file of DIR) (a model file
// written by cmd/cifar, whose metadata names the network, or a PyTorch
// state dict with -arch) under its NAME (default: the file name without its
// extension), and every model of package nn/pretrained named by -model
// NAME; with neither -model nor -model-dir it serves the shipped sparse
// ResNet-20 (pretrained.Default) and says so. It listens on -addr and
// answers
//
//	POST /classify?k=5&model=NAME  an image (Content-Type image/png, image/jpeg, or
//	                               application/octet-stream for a raw 3072-byte CIFAR-10
//	                               image or 3073-byte record) → the top-k classes as JSON
//	GET  /healthz                  liveness, 503 while draining
//	/v2/...                        the Open Inference Protocol (KServe v2 REST)
//	GET  /metrics                  Prometheus text format; /metrics.json the same as JSON
//
// until SIGINT or SIGTERM. SIGHUP reloads the models whose files changed
// (a file that fails to load leaves its old model serving and is logged).
// At SIGINT or SIGTERM it stops accepting connections, finishes the
// requests in flight and exits 0; if requests are still in flight after
// -drain-timeout, those still sending their body are answered 503 and it
// exits 3. With -loadtest DURATION it instead serves
// on a loopback port, runs a closed-loop load test against itself for
// DURATION with -concurrency clients and prints the figures as one JSON
// line. docs/serve.md describes the API, the preprocessing and the limits.
//
// Examples:
//
//	go run ./cmd/serve
//	go run ./cmd/serve -model resnet20-binary
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
	"log"
	"math"
	"math/rand/v2"
	"mime"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/infer/serve"
	nnmodels "github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/pretrained"
)

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "serve: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	// The signals stay caught until the process exits (no stop before
	// os.Exit, which would restore their default action and let a late
	// SIGINT kill the drain half-way).
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, hup))
}

// Exit statuses of run.
const (
	exitOK    = 0
	exitError = 1 // loading a model, listening or serving failed
	exitUsage = 2 // bad flags
	exitDrain = 3 // the drain deadline passed with requests in flight
)

// models is the repeatable -model flag.
type models []serve.Source

func (m *models) String() string { return fmt.Sprint(*m) }

// DefaultText shows no default: the flag's text says what it is.
func (m *models) DefaultText() string { return "" }

// byteSize is a flag of a number of bytes, given plain (8388608) or with
// a unit as Kubernetes writes quantities: Ki, Mi, Gi, Ti (powers of 1024)
// or k, M, G, T (powers of 1000): 128Mi, 8Mi, 1G. Zero shows no default
// (the flag's text says what zero means).
type byteSize struct{ p *int64 }

var byteUnits = []struct {
	suffix string
	scale  int64
}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}

func (b byteSize) String() string {
	if b.p == nil {
		return "0"
	}
	n := *b.p
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n != 0 && n%u.scale == 0 {
			return strconv.FormatInt(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set parses a size: digits and an optional unit.
func (b byteSize) Set(s string) error {
	num, scale := s, int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = rest, u.scale
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/scale {
		return fmt.Errorf("%q is not a size: want bytes, or a number with Ki, Mi, Gi, Ti, k, M, G or T (128Mi)", s)
	}
	*b.p = n * scale
	return nil
}

// Type names the values in the usage.
func (byteSize) Type() string { return "bytes" }

// DefaultText shows no default for zero.
func (b byteSize) DefaultText() string {
	if b.p == nil || *b.p == 0 {
		return ""
	}
	return b.String()
}

func (m *models) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok {
		if shipped(v) {
			// A shipped model: loaded from nn/pretrained (Path empty).
			*m = append(*m, serve.Source{Name: v})
			return nil
		}
		if _, err := os.Stat(v); err != nil && !strings.ContainsAny(v, `/\.`) {
			return fmt.Errorf("%s is neither a file nor a shipped model (%s)", v, strings.Join(pretrained.Names(), ", "))
		}
		path = v
		name = strings.TrimSuffix(filepath.Base(v), filepath.Ext(v))
	}
	if name == "" || path == "" {
		return fmt.Errorf("want NAME=FILE or FILE, got %q", v)
	}
	*m = append(*m, serve.Source{Name: name, Path: path})
	return nil
}

// shipped reports whether the -model value v names a model of
// nn/pretrained: a shipped name that is not also a file.
func shipped(v string) bool {
	if !pretrained.Has(v) {
		return false
	}
	_, err := os.Stat(v)
	return err != nil
}

type config struct {
	models       models
	defaultModel bool // no -model or -model-dir: the shipped default
	modelDir     string
	spec         nnmodels.Spec
	dense        bool
	addr         string
	adminAddr    string
	threads      int
	srv          serve.Config
	loadtest     time.Duration
	concurrency  int
	image        string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := cli.NewFlagSet("serve", "serve [-model [NAME=]FILE | -model NAME ...] [-model-dir DIR] [flags]", "classifies images over HTTP with one or more model files, or load-tests that service (docs/serve.md)", stderr)
	fs.Var(&c.models, "model", "`[NAME=]FILE or NAME`: a model file (safetensors) to serve under NAME (the file name without extension when no NAME is given), or a shipped model of nn/pretrained by its name; repeat for several (default: the shipped "+pretrained.Default+")")
	fs.StringVar(&c.modelDir, "model-dir", "", "serve every *.safetensors file of this directory under its name without extension (after the -model ones)")
	fs.StringVar(&c.spec.Model, "arch", "", "network of the file (resnet20, vgg16, ...); default: the file's metadata (needed for PyTorch files)")
	fs.Float64Var(&c.spec.Width, "width", 0, "channel multiplier of the network; default: the file's metadata, else 1")
	fs.StringVar(&c.spec.Shortcut, "shortcut", "", "shortcut of resnet20..56, A or B; default: the file's metadata, else A")
	fs.BoolVar(&c.dense, "dense", false, "run every layer densely (default: layers with mostly exact zeros run sparse where that is measured to be faster at load)")
	fs.IntVar(&c.spec.NumClasses, "classes", 0, "number of classes; default: the file's metadata, else 10")
	fs.StringVar(&c.addr, "addr", ":8080", "address to listen on")
	fs.IntVar(&c.threads, "threads", 0, "worker threads (0: all cores)")
	fs.IntVar(&c.srv.MaxBatch, "max-batch", 32, "most images run together in one batch")
	fs.DurationVar(&c.srv.MaxDelay, "max-delay", 2*time.Millisecond, "longest a batch waits for more images after its first")
	fs.IntVar(&c.srv.Workers, "workers", 1, "batches run at once")
	c.srv.MaxBodyBytes = 8 << 20
	fs.Var(byteSize{&c.srv.MaxBodyBytes}, "max-body", "largest request body (larger: 413); bytes, or with a unit: 8Mi")
	fs.IntVar(&c.srv.MaxPixels, "max-pixels", 4096*4096, "largest PNG/JPEG in pixels (larger: 413)")
	fs.IntVar(&c.srv.MaxImages, "max-images", 64, "most images in one protocol request")
	fs.IntVar(&c.srv.MaxInFlight, "max-inflight", 256, "most inference requests handled at once once their body arrived (more: 429)")
	fs.Var(byteSize{&c.srv.MemoryBudget}, "memory-budget", "memory that requests may take together for their bodies, parsing, tensors, answers and image decoding; bytes, or with a unit: 128Mi (default: a quarter of the memory available)")
	fs.DurationVar(&c.srv.AdmissionWait, "admission-wait", time.Second, "longest a request waits for room in -memory-budget (then 503)")
	fs.IntVar(&c.srv.DefaultK, "k", 5, "classes answered when a request has no k parameter")
	fs.DurationVar(&c.srv.BodyTimeout, "body-timeout", 10*time.Second, "time a client has to send its body (slower: 408)")
	fs.Int64Var(&c.srv.MinBodyRate, "min-body-rate", 16<<10, "slowest body in bytes/s after the first second (slower: 408; negative: no minimum)")
	fs.DurationVar(&c.srv.WriteTimeout, "write-timeout", 30*time.Second, "time to write a response")
	fs.DurationVar(&c.srv.DrainTimeout, "drain-timeout", 30*time.Second, "longest wait for requests in flight at shutdown")
	fs.DurationVar(&c.srv.DrainGrace, "drain-grace", 2*time.Second, "at shutdown, keep answering (readiness and new inference 503) at least this long, so that load balancers see the drain")
	fs.StringVar(&c.adminAddr, "admin-addr", "", "serve /metrics, /metrics.json and /v2/repository/... (load, unload, index) on this address only (default: on -addr)")
	fs.DurationVar(&c.srv.LoadTimeout, "load-timeout", 30*time.Second, "longest a model load from its file may take (then it is abandoned and the old version keeps serving)")
	c.srv.MaxModelBytes = 256 << 20
	fs.Var(byteSize{&c.srv.MaxModelBytes}, "max-model-size", "largest model file; bytes, or with a unit: 256Mi")
	fs.DurationVar(&c.loadtest, "loadtest", 0, "run a load test against a loopback instance for this long, print JSON and exit")
	fs.IntVar(&c.concurrency, "concurrency", 8, "load test: clients sending requests back to back")
	fs.StringVar(&c.image, "image", "", "load test: PNG or JPEG file sent by every request (default: a random raw CIFAR-10 image)")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if len(c.models) == 0 && c.modelDir == "" {
		c.models = models{{Name: pretrained.Default}}
		c.defaultModel = true
	}
	if c.threads < 0 || c.concurrency < 1 || c.loadtest < 0 {
		return nil, fmt.Errorf("-threads %d, -concurrency %d or -loadtest %v out of range", c.threads, c.concurrency, c.loadtest)
	}
	return c, nil
}

// run is the whole program; it returns the exit status. Errors go to
// stderr. Each value on hup reloads the models whose files changed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, hup <-chan os.Signal) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return exitUsage
	}
	_, restore := compute.SetThreads(c.threads)
	defer restore()
	if c.srv.MemoryBudget == 0 {
		c.srv.MemoryBudget = serve.DefaultMemoryBudget()
	}
	if os.Getenv("GOMEMLIMIT") == "" && c.srv.MemoryBudget > 0 {
		// Let the collector return decoded images' memory before the
		// heap outgrows the decoding budget by much.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(serve.MemoryLimit(c.srv.MemoryBudget)))
	}
	err = serveModels(ctx, c, stdout, stderr, hup)
	switch {
	case errors.Is(err, serve.ErrDrainTimeout):
		fmt.Fprintf(stderr, "serve: %s\n", strings.TrimPrefix(err.Error(), "serve: "))
		return exitDrain
	case err != nil:
		// The server's own errors already name it.
		msg := strings.TrimPrefix(err.Error(), "serve: ")
		fmt.Fprintf(stderr, "serve: %s\n", msg)
		return exitError
	}
	return exitOK
}

func serveModels(ctx context.Context, c *config, stdout, stderr io.Writer, hup <-chan os.Signal) error {
	if c.loadtest > 0 {
		c.srv.DrainGrace = -1 // no load balancer watches the loopback instance
	}
	c.srv.Log = log.New(stderr, "", log.LstdFlags)
	if c.modelDir != "" {
		entries, err := os.ReadDir(c.modelDir)
		if err != nil {
			return err
		}
		n := len(c.models)
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".safetensors"); ok && e.Type().IsRegular() {
				c.models = append(c.models, serve.Source{Name: name, Path: filepath.Join(c.modelDir, e.Name())})
			}
		}
		if len(c.models) == n {
			return fmt.Errorf("-model-dir %s: no .safetensors file", c.modelDir)
		}
	}
	for i := range c.models {
		src := &c.models[i]
		src.Spec = c.spec
		if c.dense {
			src.Options = []infer.Option{infer.Dense()}
		}
		if src.Path == "" {
			m, err := pretrained.Open(src.Name, src.Options...)
			if err != nil {
				return err
			}
			src.Model = m
			how := ""
			if c.defaultModel {
				how = "no -model given: "
			}
			fmt.Fprintf(stderr, "serve: %sserving the shipped model %s (nn/pretrained; -model NAME picks another of %s, -model FILE a file)\n",
				how, src.Name, strings.Join(pretrained.Names(), ", "))
		}
	}
	srv, err := serve.NewModels(c.srv, c.models...)
	if err != nil {
		return err
	}
	stopReload := make(chan struct{})
	defer close(stopReload)
	go func() {
		for {
			select {
			case <-hup:
				srv.ReloadChanged() // logged and counted by the server
			case <-stopReload:
				return
			}
		}
	}()
	addr := c.addr
	if c.loadtest > 0 {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return err
	}
	for _, st := range srv.Models() {
		fmt.Fprintf(stderr, "serve: model %q version %s\n", st.Name, st.Version)
	}
	fmt.Fprintf(stderr, "serve: listening on http://%s\n", ln.Addr())
	if c.loadtest == 0 {
		var admin net.Listener
		if c.adminAddr != "" {
			if admin, err = net.Listen("tcp", c.adminAddr); err != nil {
				ln.Close()
				srv.Close()
				return err
			}
			fmt.Fprintf(stderr, "serve: admin endpoints (/metrics, /v2/repository/...) on http://%s only\n", admin.Addr())
		}
		if err := srv.ServeWithAdmin(ctx, ln, admin); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "serve: shut down")
		return nil
	}

	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	cpu0, _ := procstat.CPUTime()
	res, lerr := loadTest(ctx, c, "http://"+ln.Addr().String())
	cpu, _ := procstat.CPUTime()
	cpu -= cpu0
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
	lc := serve.LoadConfig{URL: url + "/classify?k=1&model=" + c.models[0].Name, Concurrency: c.concurrency, Duration: c.loadtest}
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
