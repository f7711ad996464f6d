// Command bench runs proxgen's benchmarks.
//
// Usage:
//
//	bench <command> [flags]
//
// The commands are:
//
//	gemm    time single-precision matrix multiplication (blas.Sgemm)
//	train   time training steps of a model on random data
//	infer   time inference (sparse or dense) of a model on random images
//
// Run "bench <command> -h" for a command's flags. Each command prints a
// readable table, or with -json a JSON object as the last line of standard
// output for scripts to parse. Bad flags and an unknown command print an
// error to standard error and exit with status 2, other failures with 1.
// The measurements are cmd/internal/benchrun's.
//
// Examples:
//
//	go run ./cmd/bench gemm -m 1024 -n 1024 -k 1024 -threads 1 -json
//	go run ./cmd/bench train -model resnet20 -batch 128 -threads 2 -json
//	go run ./cmd/bench infer -model resnet20 -weights model.safetensors -batch 64 -threads 1 -json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/internal/cli"
)

// command is one subcommand of bench.
type command struct {
	name    string
	summary string
	// run parses args (the arguments after the command name), does the
	// work and prints results to stdout; usage and flag errors go to
	// stderr. It returns flag.ErrHelp after printing usage for -h.
	run func(args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each one's run function lives in the
// file named after it.
var commands = []command{
	{"gemm", "time blas.Sgemm, C = op(A)·op(B), and report GFLOP/s", runGemm},
	{"train", "time training steps of a model on random data", runTrain},
	{"infer", "time inference of a model, sparse layers where weights are sparse", runInfer},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "bench: benchmarks of the engine: GEMM, training and inference throughput (docs/benchmarks.md)")
	fmt.Fprintln(w, "\nusage: bench <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'bench <command> -h' for the flags of a command.")
}

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "bench: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	cmd := commands[i]
	err := cmd.run(args[1:], stdout, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		msg := err.Error()
		if prefix := "bench " + cmd.name + ": "; !strings.HasPrefix(msg, prefix) {
			msg = prefix + msg
		}
		fmt.Fprintln(stderr, msg)
	}
	// Bad flags exit 2, other failures 1.
	return cli.ExitCode(err)
}

// report prints res to w as one line of JSON if asJSON is set, else as
// its table.
func report(w io.Writer, asJSON bool, res interface{ WriteTable(io.Writer) error }) error {
	if !asJSON {
		return res.WriteTable(w)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// threadsFlag defines the -threads flag of the train and infer commands.
func threadsFlag(fs *flag.FlagSet) *int {
	return fs.Int("threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
}

// loopFlags defines the flags of l, its values the defaults, whose steps
// the help calls noun.
func loopFlags(fs *flag.FlagSet, l *benchrun.Loop, noun string) {
	fs.IntVar(&l.Warmup, "warmup", l.Warmup, "untimed warm-up "+noun)
	fs.IntVar(&l.Steps, "steps", l.Steps, "timed "+noun+" (at least)")
	fs.DurationVar(&l.MinTime, "min-time", l.MinTime, "keep timing "+noun+" until this much time has passed")
}

// checkConfig returns a usage error if threads is negative or c's Check
// fails.
func checkConfig(threads int, c interface{ Check() error }) error {
	if threads < 0 {
		return cli.Usagef("-threads must not be negative, got %d", threads)
	}
	if err := c.Check(); err != nil {
		return &cli.UsageError{Err: err}
	}
	return nil
}

// setThreads sets GOMAXPROCS and the worker-pool size to n when n > 0 and
// returns the function that restores both.
func setThreads(n int) (restore func()) {
	if n <= 0 {
		return func() {}
	}
	_, restore = compute.SetThreads(n)
	return restore
}
