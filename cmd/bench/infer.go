package main

// The infer subcommand measures inference throughput (benchrun.Infer):
// nn/infer's Model.Probabilities (the path of cmd/serve) on a fixed batch
// of random preprocessed images, after infer.New chose the sparse or
// dense path of every convolution and linear layer. With -weights, the
// network is the one the file's metadata describes, as infer.Load builds
// it; -model, -width and -shortcut given explicitly override the metadata.
//
//	go run ./cmd/bench infer -weights model.safetensors -batch 64 -threads 1 -json
//	go run ./cmd/bench infer -model vgg16 -zeros 0.9 -batch 1 -json     # random weights, 90 % zeros
//	go run ./cmd/bench infer -model resnet20 -zeros 0.9 -dense -json    # the same on the dense path

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
)

// inferFlags holds the flags of the infer subcommand.
type inferFlags struct {
	benchrun.InferConfig
	model, shortcut string
	width           float64
	threads         int
	json            bool
}

// parseInferFlags parses the arguments of the infer subcommand. Usage and
// flag errors go to stderr.
func parseInferFlags(args []string, stderr io.Writer) (*inferFlags, error) {
	f := &inferFlags{}
	c := &f.InferConfig
	models := benchrun.InferModels()
	fs := cli.NewFlagSet("bench infer", "bench infer [flags]", "inference images per second of a model on random images", stderr)
	fs.StringVar(&f.model, "model", benchrun.DefaultInferModel, "model: "+strings.Join(models, ", ")+" (with -weights: default the file's metadata)")
	fs.StringVar(&c.Weights, "weights", "", "model file (safetensors, dense or compressed, or compacted by cmd/cifar -compact) to load, its network described by its metadata as for infer.Load; empty: random dense weights")
	fs.Float64Var(&f.width, "width", 1, "channel width multiplier (with -weights: default the file's metadata)")
	fs.StringVar(&f.shortcut, "shortcut", "A", "shortcut of resnet20..56, A or B (with -weights: default the file's metadata)")
	fs.IntVar(&c.Batch, "batch", 64, "images per forward pass")
	fs.IntVar(&f.threads, "threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
	fs.BoolVar(&c.Dense, "dense", false, "force the dense path for every layer")
	fs.Float64Var(&c.Zeros, "zeros", 0, "set this fraction of every conv and linear weight to exact zeros, chosen at random (after -weights)")
	fs.Float64Var(&c.MinZeros, "min-zeros", 0, "zero fraction from which a layer runs sparse (0: chosen by measured cost when the model is loaded, see infer.New)")
	fs.IntVar(&c.Warmup, "warmup", 2, "untimed warm-up passes")
	fs.IntVar(&c.Steps, "steps", 10, "timed passes (at least)")
	fs.DurationVar(&c.MinTime, "min-time", 0, "keep timing passes until this much time has passed")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed for the zeros and the images")
	fs.BoolVar(&f.json, "json", false, "print the result as one JSON line")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if explicit["model"] && !slices.Contains(models, f.model) {
		return nil, cli.Usagef("unknown model %q (known: %s)", f.model, strings.Join(models, ", "))
	}
	if c.Batch < 1 || c.Steps < 1 {
		return nil, cli.Usagef("-batch and -steps must be at least 1, got %d and %d", c.Batch, c.Steps)
	}
	if err := checkLoopFlags(f.threads, c.Warmup, c.MinTime, f.width); err != nil {
		return nil, err
	}
	if !(c.Zeros >= 0 && c.Zeros <= 1) {
		return nil, cli.Usagef("-zeros must be in [0, 1], got %g", c.Zeros)
	}
	if !(c.MinZeros >= 0) {
		return nil, cli.Usagef("-min-zeros must not be negative, got %g", c.MinZeros)
	}
	// Without -weights the flags describe the network; with it, only the
	// flags given override the file's metadata.
	set := func(name string) bool { return explicit[name] || c.Weights == "" }
	if set("model") {
		c.Spec.Model = f.model
	}
	if set("width") {
		c.Spec.Width = f.width
	}
	if set("shortcut") {
		c.Spec.Shortcut = f.shortcut
	}
	return f, nil
}

// runInfer runs the infer subcommand with the given arguments (without
// the subcommand name), printing the result to stdout.
func runInfer(args []string, stdout, stderr io.Writer) error {
	f, err := parseInferFlags(args, stderr)
	if err != nil {
		return err
	}
	defer setThreads(f.threads)()
	res, m, err := benchrun.Infer(f.InferConfig)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(stdout, res)
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
	_, err = fmt.Fprint(stdout, m.Sparsity().String())
	return err
}
