package main

import (
	"io"
	"strings"
	"time"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
)

// runGemm runs the gemm subcommand with the given arguments (without the
// subcommand name), printing the result to stdout and usage to stderr.
func runGemm(args []string, stdout, stderr io.Writer) error {
	var c benchrun.GemmConfig
	fs := cli.NewFlagSet("bench gemm", "bench gemm [flags]", "times C = op(A)·op(B) for random row-major float32 matrices: the best and the median wall time of -reps repetitions, and the least process CPU time of one, which a busy machine disturbs less", stderr)
	fs.IntVar(&c.M, "m", 1024, "rows of op(A) and C")
	fs.IntVar(&c.N, "n", 1024, "columns of op(B) and C")
	fs.IntVar(&c.K, "k", 1024, "columns of op(A), rows of op(B)")
	fs.BoolVar(&c.TransA, "transa", false, "store A transposed (k×m)")
	fs.BoolVar(&c.TransB, "transb", false, "store B transposed (n×k)")
	threads := fs.Int("threads", 1, "worker goroutines (internal/parallel)")
	kernel := fs.String("kernel", "", "micro-kernel: "+strings.Join(blas.Kernels(), ", ")+" on this machine (default: the fastest, or $PROXGEN_GEMM)")
	fs.IntVar(&c.Reps, "reps", 10, "timed repetitions")
	fs.IntVar(&c.Warmup, "warmup", 2, "untimed repetitions before timing (at least)")
	fs.DurationVar(&c.WarmupTime, "warmup-time", 200*time.Millisecond, "keep warming up until this much time has passed, so the CPU clock settles")
	asJSON := fs.Bool("json", false, "print the result as a JSON object on the last line")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *threads < 1 {
		return cli.Usagef("-threads must be at least 1, got %d", *threads)
	}
	if err := c.Check(); err != nil {
		return &cli.UsageError{Err: err}
	}
	eng := blas.Default()
	if *kernel != "" {
		var err error
		if eng, err = blas.NewEngine(*kernel); err != nil {
			return &cli.UsageError{Err: err}
		}
	}
	defer parallel.SetWorkers(parallel.SetWorkers(*threads))
	r, err := benchrun.Gemm(eng, c)
	if err != nil {
		return err
	}
	return report(stdout, *asJSON, r)
}
