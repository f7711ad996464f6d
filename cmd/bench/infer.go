package main

import (
	"flag"
	"io"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/models"
)

// runInfer runs the infer subcommand (benchrun.Infer) with the given
// arguments (without the subcommand name), printing the result to stdout.
// With -weights, the network is the one the file's metadata describes, as
// infer.Load builds it; -model, -width and -shortcut given explicitly
// override the metadata.
func runInfer(args []string, stdout, stderr io.Writer) error {
	c := benchrun.DefaultInferConfig()
	fs := cli.NewFlagSet("bench infer", "bench infer [flags]", "inference images per second of a model on random images", stderr)
	model := fs.String("model", c.Spec.Model, "model: "+strings.Join(benchrun.InferModels(), ", ")+" (with -weights: default the file's metadata)")
	fs.StringVar(&c.Weights, "weights", "", "model file (safetensors, dense or compressed, or compacted by cmd/cifar -compact) to load, its network described by its metadata as for infer.Load; empty: random dense weights")
	width := fs.Float64("width", c.Spec.Width, "channel width multiplier (with -weights: default the file's metadata)")
	shortcut := fs.String("shortcut", c.Spec.Shortcut, "shortcut of resnet20..56, A or B (with -weights: default the file's metadata)")
	fs.IntVar(&c.Batch, "batch", c.Batch, "images per forward pass")
	threads := threadsFlag(fs)
	fs.BoolVar(&c.Dense, "dense", false, "force the dense path for every layer")
	fs.Float64Var(&c.Zeros, "zeros", 0, "set this fraction of every conv and linear weight to exact zeros, chosen at random (after -weights)")
	fs.Float64Var(&c.MinZeros, "min-zeros", 0, "zero fraction from which a layer runs sparse (0: chosen by measured cost when the model is loaded, see infer.New)")
	loopFlags(fs, &c.Loop, "passes")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed for the zeros and the images")
	asJSON := fs.Bool("json", false, "print the result as one JSON line")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if !(*width > 0) { // Spec.Width 0 would mean the default
		return cli.Usagef("-width must be positive, got %g", *width)
	}
	// Without -weights the flags describe the network; with it, the flags
	// given override the file's metadata.
	c.Spec = models.Spec{Model: *model, Width: *width, Shortcut: *shortcut}
	if c.Weights != "" {
		c.Spec = models.Spec{}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "model":
				c.Spec.Model = *model
			case "width":
				c.Spec.Width = *width
			case "shortcut":
				c.Spec.Shortcut = *shortcut
			}
		})
	}
	if err := checkConfig(*threads, &c); err != nil {
		return err
	}
	defer setThreads(*threads)()
	res, err := benchrun.Infer(c)
	if err != nil {
		return err
	}
	return report(stdout, *asJSON, res)
}
