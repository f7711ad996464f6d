package main

// The infer subcommand measures inference throughput: forward passes of a
// CIFAR model in evaluation mode without a graph, on a fixed batch of
// random images, after nn.PrepareInference chose the sparse or dense path
// of every convolution and linear layer.
//
//	go run ./cmd/bench infer -model resnet20 -weights model.safetensors -batch 64 -threads 1 -json
//	go run ./cmd/bench infer -model vgg16 -zeros 0.9 -batch 1 -json     # random weights, 90 % zeros
//	go run ./cmd/bench infer -model resnet20 -zeros 0.9 -dense -json    # the same on the dense path

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// inferModels lists the models the infer subcommand accepts.
var inferModels = []string{"resnet20", "resnet32", "resnet44", "resnet56", "vgg16", "resnet18", "resnet34"}

// inferConfig holds the flags of the infer subcommand.
type inferConfig struct {
	model    string
	weights  string
	width    float64
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
	fs.StringVar(&c.model, "model", "resnet20", "model: "+strings.Join(inferModels, ", "))
	fs.StringVar(&c.weights, "weights", "", "model file (safetensors, dense or compressed, or compacted by cmd/cifar -compact) to load; empty: random dense weights")
	fs.Float64Var(&c.width, "width", 1, "channel width multiplier (for quick tests)")
	fs.IntVar(&c.batch, "batch", 64, "images per forward pass")
	fs.IntVar(&c.threads, "threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
	fs.BoolVar(&c.dense, "dense", false, "force the dense path for every layer")
	fs.Float64Var(&c.zeros, "zeros", 0, "set this fraction of every conv and linear weight to exact zeros, chosen at random (after -weights)")
	fs.Float64Var(&c.minZeros, "min-zeros", 0, fmt.Sprintf("zero fraction from which a layer runs sparse (0: nn.DefaultMinZeros = %g)", nn.DefaultMinZeros))
	fs.IntVar(&c.warmup, "warmup", 2, "untimed warm-up passes")
	fs.IntVar(&c.steps, "steps", 10, "timed passes (at least)")
	fs.DurationVar(&c.minTime, "min-time", 0, "keep timing passes until this much time has passed")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed for weights, zeros and images")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON line")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if !slices.Contains(inferModels, c.model) {
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
	opts := []models.Option{models.WithWidth(c.width)}
	var f *safetensors.File
	if c.weights != "" {
		// A compacted network (nn/prune) has its per-layer widths in the
		// file's metadata.
		if f, err = safetensors.ReadFile(c.weights); err != nil {
			return err
		}
		spec, err := infer.SpecFromMetadata(f.Metadata)
		if err != nil {
			return fmt.Errorf("%s: %v", c.weights, err)
		}
		if spec.Widths != nil {
			opts = append(opts, models.WithWidths(spec.Widths))
		}
	}
	m, err := models.New(c.model, cnnLabels, rng, opts...)
	if err != nil {
		return err
	}
	if f != nil {
		if err := checkpoint.LoadStateDict(f, m, checkpoint.LoadOptions{}); err != nil {
			return fmt.Errorf("checkpoint: loading %s: %w", c.weights, err)
		}
	}
	if c.zeros > 0 {
		for _, p := range m.Params() {
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
	m.SetTraining(false)
	rep := nn.PrepareInferenceWith(m, nn.InferenceOptions{MinZeros: c.minZeros, Dense: c.dense})
	x := autograd.RandN(rng, c.batch, 3, cnnImage, cnnImage).In(&autograd.Context{NoGrad: true})
	forward := func() { m.Forward(x) }
	for range c.warmup {
		forward()
	}
	lt := timeLoop(c.steps, c.minTime, forward)
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
	res := &inferResult{
		Impl:         "go",
		Model:        c.model,
		Weights:      c.weights,
		Threads:      parallel.Workers(),
		Batch:        c.batch,
		Dense:        c.dense,
		ImgPerS:      math.Round(float64(c.batch)*float64(lt.n)/lt.elapsed.Seconds()*100) / 100,
		MsPerBatch:   ms(lt.elapsed / time.Duration(lt.n)),
		MsMin:        ms(lt.fastest),
		Steps:        lt.n,
		Warmup:       c.warmup,
		KernelMix:    map[string]string{},
		SparseLayers: len(rep.SparseLayers()),
		Layers:       len(rep.Layers),
		MinZeros:     rep.MinZeros,
		ZeroRatio:    math.Round(rep.ZeroRatio()*1e6) / 1e6,
		Params:       nn.NumParams(m),
		GEMMKernel:   blas.Kernel(),
		GoVersion:    runtime.Version(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
	}
	if lt.cpuOK {
		res.CPUMs = ms(lt.cpu / time.Duration(lt.n))
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
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, rep.String())
	return err
}
