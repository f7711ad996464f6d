package main

// The infer subcommand measures inference throughput: nn/infer's
// Model.Probabilities (the path of cmd/serve) on a fixed batch of random
// preprocessed images, after infer.New chose the sparse or dense path of
// every convolution and linear layer. With -weights, the network is the
// one the file's metadata describes, as infer.Load builds it; -model,
// -width and -shortcut given explicitly override the metadata.
//
//	go run ./cmd/bench infer -weights model.safetensors -batch 64 -threads 1 -json
//	go run ./cmd/bench infer -model vgg16 -zeros 0.9 -batch 1 -json     # random weights, 90 % zeros
//	go run ./cmd/bench infer -model resnet20 -zeros 0.9 -dense -json    # the same on the dense path

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// inferModels lists the models the infer subcommand accepts.
var inferModels = []string{"resnet8", "resnet20", "resnet32", "resnet44", "resnet56", "vgg16", "resnet18", "resnet34"}

// inferConfig holds the flags of the infer subcommand.
type inferConfig struct {
	model    string
	weights  string
	width    float64
	shortcut string
	explicit map[string]bool // flags given on the command line
	batch    int
	threads  int
	dense    bool
	zeros    float64
	minZeros float64
	warmup   int
	steps    int
	minTime  time.Duration
	seed     uint64
	json     bool
}

// inferResult is the JSON object the infer subcommand prints.
type inferResult struct {
	Impl       string  `json:"impl"`
	Model      string  `json:"model"`
	Weights    string  `json:"weights,omitempty"`
	Threads    int     `json:"threads"`
	Batch      int     `json:"batch"`
	Dense      bool    `json:"dense"`
	ImgPerS    float64 `json:"img_per_s"`
	MsPerBatch float64 `json:"ms_per_batch"`
	MsMin      float64 `json:"ms_per_batch_min"`
	CPUMs      float64 `json:"cpu_ms_per_batch,omitempty"`
	Steps      int     `json:"steps"`
	Warmup     int     `json:"warmup"`
	// KernelMix maps every convolution and linear layer to the path it
	// ran: "sparse" or "dense".
	KernelMix    map[string]string `json:"kernel_mix"`
	SparseLayers int               `json:"sparse_layers"`
	Layers       int               `json:"layers"`
	MinZeros     float64           `json:"min_zeros"`
	ZeroRatio    float64           `json:"weights_zero_ratio"`
	Params       int               `json:"params"`
	GEMMKernel   string            `json:"gemm_kernel"`
	GoVersion    string            `json:"go_version"`
	GOMAXPROCS   int               `json:"gomaxprocs"`
}

// parseInferFlags parses the arguments of the infer subcommand. Usage and
// flag errors go to stderr.
func parseInferFlags(args []string, stderr io.Writer) (*inferConfig, error) {
	c := &inferConfig{}
	fs := cli.NewFlagSet("bench infer", "bench infer [flags]", "inference images per second of a model on random images", stderr)
	fs.StringVar(&c.model, "model", "resnet20", "model: "+strings.Join(inferModels, ", ")+" (with -weights: default the file's metadata)")
	fs.StringVar(&c.weights, "weights", "", "model file (safetensors, dense or compressed, or compacted by cmd/cifar -compact) to load, its network described by its metadata as for infer.Load; empty: random dense weights")
	fs.Float64Var(&c.width, "width", 1, "channel width multiplier (with -weights: default the file's metadata)")
	fs.StringVar(&c.shortcut, "shortcut", "A", "shortcut of resnet20..56, A or B (with -weights: default the file's metadata)")
	fs.IntVar(&c.batch, "batch", 64, "images per forward pass")
	fs.IntVar(&c.threads, "threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
	fs.BoolVar(&c.dense, "dense", false, "force the dense path for every layer")
	fs.Float64Var(&c.zeros, "zeros", 0, "set this fraction of every conv and linear weight to exact zeros, chosen at random (after -weights)")
	fs.Float64Var(&c.minZeros, "min-zeros", 0, "zero fraction from which a layer runs sparse (0: chosen by measured cost when the model is loaded, see infer.New)")
	fs.IntVar(&c.warmup, "warmup", 2, "untimed warm-up passes")
	fs.IntVar(&c.steps, "steps", 10, "timed passes (at least)")
	fs.DurationVar(&c.minTime, "min-time", 0, "keep timing passes until this much time has passed")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed for the zeros and the images")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON line")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	c.explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.explicit[f.Name] = true })
	if c.explicit["model"] && !slices.Contains(inferModels, c.model) {
		return nil, cli.Usagef("unknown model %q (known: %s)", c.model, strings.Join(inferModels, ", "))
	}
	if c.batch < 1 || c.steps < 1 {
		return nil, cli.Usagef("-batch and -steps must be at least 1, got %d and %d", c.batch, c.steps)
	}
	if err := checkLoopFlags(c.threads, c.warmup, c.minTime, c.width); err != nil {
		return nil, err
	}
	if !(c.zeros >= 0 && c.zeros <= 1) {
		return nil, cli.Usagef("-zeros must be in [0, 1], got %g", c.zeros)
	}
	if !(c.minZeros >= 0) {
		return nil, cli.Usagef("-min-zeros must not be negative, got %g", c.minZeros)
	}
	return c, nil
}

// runInfer runs the infer subcommand with the given arguments (without
// the subcommand name), printing the result to stdout.
func runInfer(args []string, stdout, stderr io.Writer) error {
	c, err := parseInferFlags(args, stderr)
	if err != nil {
		return err
	}
	defer setThreads(c.threads)()
	rng := rand.New(rand.NewPCG(c.seed, 0x70726f7867656e)) // "proxgen"
	m, params, err := inferModel(c, rng)
	if err != nil {
		return err
	}
	rep := m.Sparsity()
	x := make([]float32, c.batch*infer.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	probs := make([]float32, c.batch*m.NumClasses())
	forward := func() { m.Probabilities(probs, x) }
	for range c.warmup {
		forward()
	}
	lt := benchrun.TimeLoop(c.steps, c.minTime, forward)
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
	res := &inferResult{
		Impl:         "go",
		Model:        m.Spec().Model,
		Weights:      c.weights,
		Threads:      parallel.Workers(),
		Batch:        c.batch,
		Dense:        c.dense,
		ImgPerS:      math.Round(float64(c.batch)*float64(lt.N)/lt.Elapsed.Seconds()*100) / 100,
		MsPerBatch:   ms(lt.Elapsed / time.Duration(lt.N)),
		MsMin:        ms(lt.Fastest),
		Steps:        lt.N,
		Warmup:       c.warmup,
		KernelMix:    map[string]string{},
		SparseLayers: len(rep.SparseLayers()),
		Layers:       len(rep.Layers),
		MinZeros:     rep.MinZeros,
		ZeroRatio:    math.Round(rep.ZeroRatio()*1e6) / 1e6,
		Params:       params,
		GEMMKernel:   blas.Kernel(),
		GoVersion:    runtime.Version(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
	}
	if lt.CPUOK {
		res.CPUMs = ms(lt.CPU / time.Duration(lt.N))
	}
	for _, l := range rep.Layers {
		res.KernelMix[l.Name] = "dense"
		if l.Sparse {
			res.KernelMix[l.Name] = "sparse"
		}
	}
	if c.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s\n", res.Model)
	fmt.Fprintf(tw, "images/s\t%.1f\n", res.ImgPerS)
	fmt.Fprintf(tw, "ms/batch\t%.2f (min %.2f)\n", res.MsPerBatch, res.MsMin)
	if res.CPUMs > 0 {
		fmt.Fprintf(tw, "CPU ms/batch\t%.2f (all threads)\n", res.CPUMs)
	}
	fmt.Fprintf(tw, "batch\t%d\n", res.Batch)
	fmt.Fprintf(tw, "threads\t%d (GOMAXPROCS %d)\n", res.Threads, res.GOMAXPROCS)
	fmt.Fprintf(tw, "timed passes\t%d after %d warm-up\n", res.Steps, res.Warmup)
	fmt.Fprintf(tw, "weights zero ratio\t%.4f\n", res.ZeroRatio)
	fmt.Fprintf(tw, "served\t%s\n", m)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, rep.String())
	return err
}

// inferModel returns the model the flags of c describe: with -weights, the
// network of the file's metadata (explicit -model, -width and -shortcut
// win) with its weights, otherwise the initial weights of Spec.Build; then
// -zeros applied (drawn from rng), and prepared as infer.New prepares
// every model. It also returns the number of parameters.
func inferModel(c *inferConfig, rng *rand.Rand) (*infer.Model, int, error) {
	var spec models.Spec
	for _, f := range []struct {
		name string
		set  func()
	}{
		{"model", func() { spec.Model = c.model }},
		{"width", func() { spec.Width = c.width }},
		{"shortcut", func() { spec.Shortcut = c.shortcut }},
	} {
		if c.explicit[f.name] || c.weights == "" {
			f.set()
		}
	}
	var f *safetensors.File
	if c.weights != "" {
		var err error
		if f, err = safetensors.ReadFile(c.weights); err != nil {
			return nil, 0, err
		}
		meta, err := models.SpecFromMetadata(f.Metadata)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", c.weights, err)
		}
		if spec = spec.Merge(meta); spec.Model == "" {
			spec.Model = c.model // a file without metadata: the default
		}
	}
	if !slices.Contains(inferModels, spec.Model) {
		return nil, 0, fmt.Errorf("unknown model %q (known: %s)", spec.Model, strings.Join(inferModels, ", "))
	}
	net, err := spec.Build()
	if err != nil {
		return nil, 0, err
	}
	if f != nil {
		if err := checkpoint.LoadWeights(f, net); err != nil {
			return nil, 0, fmt.Errorf("checkpoint: loading %s: %w", c.weights, err)
		}
	}
	if c.zeros > 0 {
		for _, p := range net.Params() {
			if p.T.Rank() < 2 {
				continue
			}
			for i := range p.T.Data {
				if rng.Float64() < c.zeros {
					p.T.Data[i] = 0
				}
			}
		}
	}
	opts := []infer.Option{infer.MinZeros(c.minZeros)}
	if c.dense {
		opts = append(opts, infer.Dense())
	}
	m, err := infer.New(net, spec, opts...)
	return m, nn.NumParams(net), err
}
