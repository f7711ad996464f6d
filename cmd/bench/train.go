package main

// The train subcommand measures training throughput (benchrun.Train):
// full training steps (forward, cross-entropy, backward, Adam step) of one
// of the paper's models on a fixed batch of random data, after a few
// warm-up steps.
//
//	go run ./cmd/bench train -model resnet20 -batch 128 -threads 2 -json
//
// scripts/bench_torch.py runs the same models in PyTorch and prints the
// same JSON keys; scripts/bench_train.sh runs both side by side.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
)

// trainFlags holds the flags of the train subcommand.
type trainFlags struct {
	benchrun.TrainConfig
	precision string // -precision, parsed into Precision
	threads   int
	json      bool
}

// parseTrainFlags parses the arguments of the train subcommand. Usage and
// flag errors go to stderr.
func parseTrainFlags(args []string, stderr io.Writer) (*trainFlags, error) {
	f := &trainFlags{TrainConfig: benchrun.DefaultTrainConfig()}
	c := &f.TrainConfig
	models := benchrun.TrainModels()
	fs := cli.NewFlagSet("bench train", "bench train [flags]", "training steps per second of a model on random data", stderr)
	fs.StringVar(&c.Model, "model", c.Model, "model: "+strings.Join(models, ", "))
	fs.IntVar(&c.Batch, "batch", 0, fmt.Sprintf("batch size (0: %d images; %d columns for lstm)", benchrun.DefaultBatch(""), benchrun.DefaultBatch("lstm")))
	fs.IntVar(&c.BPTT, "bptt", c.BPTT, "lstm: time steps per batch")
	fs.IntVar(&c.Vocab, "vocab", c.Vocab, "lstm: vocabulary size")
	fs.IntVar(&c.Emb, "emb", c.Emb, "lstm: embedding size")
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "lstm: hidden size")
	fs.Float64Var(&c.Width, "width", c.Width, "CNNs: channel width multiplier (for quick tests)")
	fs.IntVar(&f.threads, "threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "untimed warm-up steps")
	fs.IntVar(&c.Steps, "steps", c.Steps, "timed steps (at least)")
	fs.DurationVar(&c.MinTime, "min-time", c.MinTime, "keep timing steps until this much time has passed")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed for weights and data")
	fs.Float64Var(&c.LR, "lr", c.LR, "Adam learning rate")
	fs.StringVar(&f.precision, "precision", c.Precision.String(), "arithmetic of the convolution and linear products: fp32, or bf16 (bfloat16 operands, float32 accumulation; on CPUs with AVX512_BF16, fp32 elsewhere)")
	fs.BoolVar(&c.Arena, "arena", c.Arena, "recycle op buffers between steps with autograd.Arena")
	fs.BoolVar(&f.json, "json", false, "print the result as one JSON line")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the timed steps to `file`")
	fs.BoolVar(&c.OpProfile, "op-profile", false, "also print where the timed steps spend their time: each op's forward and backward time (autograd.Profile) and the optimizer's")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write an allocation profile (alloc_space: the timed steps minus what was allocated before) to `file`")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if !slices.Contains(models, c.Model) {
		return nil, cli.Usagef("bench train: unknown model %q (known: %s)", c.Model, strings.Join(models, ", "))
	}
	if c.Batch == 0 {
		c.Batch = benchrun.DefaultBatch(c.Model)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"batch", c.Batch}, {"bptt", c.BPTT}, {"vocab", c.Vocab}, {"emb", c.Emb}, {"hidden", c.Hidden}, {"steps", c.Steps}} {
		if f.v < 1 {
			return nil, cli.Usagef("bench train: -%s must be at least 1, got %d", f.name, f.v)
		}
	}
	if err := checkLoopFlags(f.threads, c.Warmup, c.MinTime, c.Width); err != nil {
		return nil, cli.Usagef("bench train: %w", err)
	}
	if !(c.LR > 0) {
		return nil, cli.Usagef("bench train: -lr must be positive, got %g", c.LR)
	}
	prec, err := autograd.ParsePrecision(f.precision)
	if err != nil {
		return nil, cli.Usagef("bench train: -precision: %w", err)
	}
	c.Precision = prec
	return f, nil
}

// runTrain runs the train subcommand with the given arguments (without the
// subcommand name), printing the result to stdout.
func runTrain(args []string, stdout, stderr io.Writer) error {
	f, err := parseTrainFlags(args, stderr)
	if err != nil {
		return err
	}
	defer setThreads(f.threads)()
	res, err := benchrun.Train(f.TrainConfig)
	if err != nil {
		return err
	}
	if f.json {
		err = writeJSON(stdout, res)
	} else {
		err = writeTrainTable(stdout, res)
	}
	if err == nil && res.Profile != nil {
		err = res.Profile.WriteTable(stdout)
	}
	return err
}

// writeTrainTable prints res as a readable table.
func writeTrainTable(w io.Writer, r *benchrun.TrainResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s\n", r.Model)
	if r.TokPerS != nil {
		fmt.Fprintf(tw, "tokens/s\t%.1f\n", *r.TokPerS)
		fmt.Fprintf(tw, "batch\t%d columns × %d steps\n", r.Batch, r.BPTT)
	} else {
		fmt.Fprintf(tw, "images/s\t%.1f\n", *r.ImgPerS)
		fmt.Fprintf(tw, "batch\t%d\n", r.Batch)
	}
	fmt.Fprintf(tw, "ms/step\t%.1f (min %.1f)\n", r.MsPerStep, r.MsMin)
	if r.CPUMs > 0 {
		fmt.Fprintf(tw, "CPU ms/step\t%.1f (all threads)\n", r.CPUMs)
	}
	fmt.Fprintf(tw, "timed steps\t%d in %.2f s after %d warm-up\n", r.Steps, r.Seconds, r.Warmup)
	fmt.Fprintf(tw, "threads\t%d (GOMAXPROCS %d)\n", r.Threads, r.GOMAXPROCS)
	fmt.Fprintf(tw, "GEMM kernel\t%s\n", r.Kernel)
	fmt.Fprintf(tw, "precision\t%s\n", r.Precision)
	fmt.Fprintf(tw, "parameters\t%d\n", r.Params)
	fmt.Fprintf(tw, "arena\t%v\n", r.Arena)
	fmt.Fprintf(tw, "allocated/step\t%.1f MB, %.2f GCs\n", r.AllocMB, r.GCPerStep)
	if r.PeakRSSMB > 0 {
		fmt.Fprintf(tw, "peak RSS\t%.1f MB (process high-water mark)\n", r.PeakRSSMB)
	}
	fmt.Fprintf(tw, "last loss\t%.4f\n", r.Loss)
	return tw.Flush()
}
