package benchrun

// Inference throughput: nn/infer's Model.Probabilities (the path of
// cmd/serve) on a fixed batch of random preprocessed images, after
// infer.New chose the sparse or dense path of every convolution and
// linear layer.

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// inferModels lists the models Infer accepts.
var inferModels = []string{"resnet8", "resnet20", "resnet32", "resnet44", "resnet56", "vgg16", "resnet18", "resnet34"}

// InferModels returns the names of the models Infer accepts.
func InferModels() []string { return slices.Clone(inferModels) }

// DefaultInferModel is the model Infer runs when neither the
// configuration nor the model file names one.
const DefaultInferModel = "resnet20"

// InferConfig describes an inference benchmark.
type InferConfig struct {
	// Spec is the network. Without Weights it is built as Spec.Build
	// builds it; with Weights, its non-zero fields override the file's
	// metadata (Spec.Merge).
	Spec models.Spec
	// Weights names a model file (safetensors, dense or compressed, or
	// compacted) to load; empty: the initial weights of Spec.Build.
	Weights string
	Batch   int     // images per forward pass, at least 1
	Dense   bool    // force the dense path for every layer (infer.Dense)
	Zeros   float64 // fraction in [0, 1] of every conv and linear weight set to zero at random, after loading
	// MinZeros is the zero fraction from which a layer runs sparse
	// (infer.MinZeros; 0: chosen by measured cost when the model is
	// prepared).
	MinZeros float64
	Seed     uint64 // seed of the zeros and the images
	Loop
}

// DefaultInferConfig returns the configuration of bench infer without
// flags: DefaultInferModel at full width with option-A shortcuts and
// random dense weights, batches of 64 images, the sparse layers chosen by
// measured cost, seed 1, 2 warm-up and 10 timed passes.
func DefaultInferConfig() InferConfig {
	return InferConfig{
		Spec:  models.Spec{Model: DefaultInferModel, Width: 1, Shortcut: "A"},
		Batch: 64, Seed: 1, Loop: defaultLoop,
	}
}

// InferResult is what Infer measured; its JSON keys are those of
// bench infer -json.
type InferResult struct {
	Impl       string  `json:"impl"` // "go"
	Model      string  `json:"model"`
	Weights    string  `json:"weights,omitempty"`
	Threads    int     `json:"threads"` // parallel.Workers
	Batch      int     `json:"batch"`
	Dense      bool    `json:"dense"`
	ImgPerS    float64 `json:"img_per_s"`
	MsPerBatch float64 `json:"ms_per_batch"`
	MsMin      float64 `json:"ms_per_batch_min"`
	CPUMs      float64 `json:"cpu_ms_per_batch,omitempty"`
	Steps      int     `json:"steps"` // timed passes
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

	// Served describes the prepared model (infer.Model's String) and
	// Sparsity its layers' zeros and paths.
	Served   string       `json:"-"`
	Sparsity infer.Report `json:"-"`
}

// Check reports a configuration that Infer cannot run: a model other
// than InferModels (an empty one is taken from the file or
// DefaultInferModel), a negative or infinite width, a batch below 1,
// zeros outside [0, 1], negative min zeros, or a loop of no timed steps
// or a negative warm-up or time. The error names the setting by the name
// of bench infer's flag for it.
func (c *InferConfig) Check() error {
	switch {
	case c.Spec.Model != "" && !slices.Contains(inferModels, c.Spec.Model):
		return fmt.Errorf("unknown model %q (known: %s)", c.Spec.Model, strings.Join(inferModels, ", "))
	case !(c.Spec.Width >= 0) || math.IsInf(c.Spec.Width, 0):
		return fmt.Errorf("width must not be negative, got %g", c.Spec.Width)
	case c.Batch < 1:
		return fmt.Errorf("batch must be at least 1, got %d", c.Batch)
	case !(c.Zeros >= 0 && c.Zeros <= 1):
		return fmt.Errorf("zeros must be in [0, 1], got %g", c.Zeros)
	case !(c.MinZeros >= 0):
		return fmt.Errorf("min-zeros must not be negative, got %g", c.MinZeros)
	}
	return c.Loop.check()
}

// Infer prepares the model c describes (inferModel), runs c.Warmup
// forward passes of Model.Probabilities on a fixed batch of random
// preprocessed images, then times passes as TimeLoop does. It returns the
// result, computing with the thread count and GEMM engine the program
// set, or an error for a configuration Check rejects or a model file that
// cannot be loaded.
func Infer(c InferConfig) (*InferResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, seedStream))
	m, params, err := inferModel(&c, rng)
	if err != nil {
		return nil, err
	}
	rep := m.Sparsity()
	x := make([]float32, c.Batch*infer.InputSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	probs := make([]float32, c.Batch*m.NumClasses())
	forward := func() { m.Probabilities(probs, x) }
	c.warmUp(forward)
	lt := TimeLoop(c.Steps, c.MinTime, forward)
	msBatch, cpuMs := lt.perStep()
	res := &InferResult{
		Impl:         "go",
		Model:        m.Spec().Model,
		Weights:      c.Weights,
		Threads:      parallel.Workers(),
		Batch:        c.Batch,
		Dense:        c.Dense,
		ImgPerS:      math.Round(float64(c.Batch)*float64(lt.N)/lt.Elapsed.Seconds()*100) / 100,
		MsPerBatch:   msBatch,
		MsMin:        millis(lt.Fastest),
		CPUMs:        cpuMs,
		Steps:        lt.N,
		Warmup:       c.Warmup,
		KernelMix:    map[string]string{},
		SparseLayers: len(rep.SparseLayers()),
		Layers:       len(rep.Layers),
		MinZeros:     rep.MinZeros,
		ZeroRatio:    math.Round(rep.ZeroRatio()*1e6) / 1e6,
		Params:       params,
		GEMMKernel:   blas.Kernel(),
		GoVersion:    runtime.Version(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
		Served:       m.String(),
		Sparsity:     rep,
	}
	for _, l := range rep.Layers {
		res.KernelMix[l.Name] = "dense"
		if l.Sparse {
			res.KernelMix[l.Name] = "sparse"
		}
	}
	return res, nil
}

// WriteTable prints r as a readable table, then the layers and the path
// each runs (infer.Report), as bench infer does without -json.
func (r *InferResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s\n", r.Model)
	fmt.Fprintf(tw, "images/s\t%.1f\n", r.ImgPerS)
	fmt.Fprintf(tw, "ms/batch\t%.2f (min %.2f)\n", r.MsPerBatch, r.MsMin)
	if r.CPUMs > 0 {
		fmt.Fprintf(tw, "CPU ms/batch\t%.2f (all threads)\n", r.CPUMs)
	}
	fmt.Fprintf(tw, "batch\t%d\n", r.Batch)
	fmt.Fprintf(tw, "threads\t%d (GOMAXPROCS %d)\n", r.Threads, r.GOMAXPROCS)
	fmt.Fprintf(tw, "timed passes\t%d after %d warm-up\n", r.Steps, r.Warmup)
	fmt.Fprintf(tw, "weights zero ratio\t%.4f\n", r.ZeroRatio)
	fmt.Fprintf(tw, "served\t%s\n", r.Served)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, r.Sparsity.String())
	return err
}

// inferModel returns the model c describes: with c.Weights, the network
// of the file's metadata (c.Spec's non-zero fields win, DefaultInferModel
// where neither names one) with its weights, otherwise the initial
// weights of c.Spec.Build; then c.Zeros applied (drawn from rng), and
// prepared as infer.New prepares every model. It also returns the number
// of parameters.
func inferModel(c *InferConfig, rng *rand.Rand) (*infer.Model, int, error) {
	spec := c.Spec
	var f *safetensors.File
	if c.Weights != "" {
		var err error
		if f, err = safetensors.ReadFile(c.Weights); err != nil {
			return nil, 0, err
		}
		meta, err := models.SpecFromMetadata(f.Metadata)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", c.Weights, err)
		}
		spec = spec.Merge(meta)
	}
	if spec.Model == "" {
		spec.Model = DefaultInferModel
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
			return nil, 0, fmt.Errorf("checkpoint: loading %s: %w", c.Weights, err)
		}
	}
	if c.Zeros > 0 {
		for _, p := range net.Params() {
			if p.T.Rank() < 2 {
				continue
			}
			for i := range p.T.Data {
				if rng.Float64() < c.Zeros {
					p.T.Data[i] = 0
				}
			}
		}
	}
	opts := []infer.Option{infer.MinZeros(c.MinZeros)}
	if c.Dense {
		opts = append(opts, infer.Dense())
	}
	m, err := infer.New(net, spec, opts...)
	return m, nn.NumParams(net), err
}
