package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
)

// runTrain runs the train subcommand (benchrun.Train) with the given
// arguments (without the subcommand name), printing the result, and with
// -op-profile the op profile, to stdout. scripts/bench_torch.py prints
// the same JSON keys for PyTorch.
func runTrain(args []string, stdout, stderr io.Writer) error {
	c := benchrun.DefaultTrainConfig()
	fs := cli.NewFlagSet("bench train", "bench train [flags]", "training steps per second of a model on random data", stderr)
	fs.StringVar(&c.Model, "model", c.Model, "model: "+strings.Join(benchrun.TrainModels(), ", "))
	fs.IntVar(&c.Batch, "batch", 0, fmt.Sprintf("batch size (0: %d images; %d columns for lstm)", benchrun.DefaultBatch(""), benchrun.DefaultBatch("lstm")))
	fs.IntVar(&c.BPTT, "bptt", c.BPTT, "lstm: time steps per batch")
	fs.IntVar(&c.Vocab, "vocab", c.Vocab, "lstm: vocabulary size")
	fs.IntVar(&c.Emb, "emb", c.Emb, "lstm: embedding size")
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "lstm: hidden size")
	fs.Float64Var(&c.Width, "width", c.Width, "CNNs: channel width multiplier (for quick tests)")
	threads := threadsFlag(fs)
	loopFlags(fs, &c.Loop, "steps")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed for weights and data")
	fs.Float64Var(&c.LR, "lr", c.LR, "Adam learning rate")
	precision := fs.String("precision", c.Precision.String(), "arithmetic of the convolution and linear products: fp32, or bf16 (bfloat16 operands, float32 accumulation; on CPUs with AVX512_BF16, fp32 elsewhere)")
	fs.BoolVar(&c.Arena, "arena", c.Arena, "recycle op buffers between steps with autograd.Arena")
	asJSON := fs.Bool("json", false, "print the result as one JSON line")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the timed steps to `file`")
	fs.BoolVar(&c.OpProfile, "op-profile", false, "also print where the timed steps spend their time: each op's forward and backward time (autograd.Profile) and the optimizer's")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write an allocation profile (alloc_space: the timed steps minus what was allocated before) to `file`")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if c.Precision, err = autograd.ParsePrecision(*precision); err != nil {
		return cli.Usagef("-precision: %w", err)
	}
	if err := checkConfig(*threads, &c); err != nil {
		return err
	}
	defer setThreads(*threads)()
	res, err := benchrun.Train(c)
	if err != nil {
		return err
	}
	if err := report(stdout, *asJSON, res); err != nil || res.Profile == nil {
		return err
	}
	return res.Profile.WriteTable(stdout)
}
