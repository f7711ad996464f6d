// Command ptb trains the word-level LSTM language model of the ProxGen
// paper on the Penn Treebank and reports perplexities.
//
// Usage:
//
//	ptb -data DIR [flags]
//
// DIR holds the PTB files ptb.train.txt, ptb.valid.txt and ptb.test.txt in
// the format of Mikolov's RNNLM toolkit. The model is the paper's: word
// embeddings of 300, one LSTM layer of 300 units, dropout, and a linear
// decoder over the vocabulary (PyTorch word_language_model's RNNModel). It
// trains with truncated backpropagation through time (windows of 35 steps
// over 20 parallel streams, the state carried over and detached), gradient
// clipping to norm 0.25, and the step size divided by 1.2 after every epoch
// whose validation loss does not improve, as the paper does.
//
// Without ptb.train.txt (only ptb.valid.txt and ptb.test.txt are available
// here) the program trains on ptb.valid.txt and uses ptb.test.txt both to
// steer the step size and to report perplexity; it says so in its output.
// The vocabulary is then the training file's, so test words it lacks count
// as <unk>, and perplexities are not comparable with the paper's.
//
// Optimizers: adam and sgd (baselines), proxgen (the paper's ProxGen with
// the Adam preconditioner; with the default regularizer bin-l0 on the LSTM
// weights this is revised ProxQuant ℓ0) and proxquant (the original
// ProxQuant: binary ℓ1 prox in the Euclidean metric, weights clipped to
// [−1, 1]).
//
// Each epoch prints one line of metrics (a JSON line with -json) and, with
// -metrics FILE, appends it to FILE; the run ends with a summary line whose
// "test_ppl" is the test perplexity after the last epoch. Progress goes to
// standard error. Bad flags exit with status 2, failures (missing or
// malformed data, divergence) with status 1.
//
// Examples:
//
//	go run ./cmd/ptb -data /work/shared/data/ptb -epochs 3
//	go run ./cmd/ptb -data DIR -optimizer proxgen -reg bin-l0 -lambda 1e-4 -weights fp.safetensors
//	go run ./cmd/ptb -data DIR -epochs 1 -json -metrics run.jsonl -save lm.safetensors
//
// docs/ptb.md describes the flags and a real run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/proxgen/proxgen/autograd/parallel"
	"github.com/proxgen/proxgen/optim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses of run.
const (
	exitOK          = 0
	exitError       = 1 // the run failed: data, files, divergence
	exitUsage       = 2 // bad flags
	exitInterrupted = 130
)

// errUsage marks errors in the flags.
var errUsage = errors.New("usage")

// usageError is a flag problem, reported with exit status 2.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// config holds the settings of a run.
type config struct {
	Data, Train, Valid, Test string

	Emb, Hidden, Layers int
	Dropout             float64

	Optimizer  string
	LR         float64
	Momentum   float64
	WD         float64
	Reg        string
	RegOn      string
	Lambda     float64
	Homotopy   bool
	HardQuant  int
	Clip       float64
	LRDecay    float64
	Schedule   string
	Beta1      float64
	Beta2      float64
	Eps        float64
	Epochs     int
	Batch      int
	EvalBatch  int
	BPTT       int
	Seed       uint64
	Threads    int
	LogEvery   int
	JSON       bool
	Metrics    string
	Save       string
	Weights    string
	MaxWindows int

	lrDecaySet bool // -lr-decay was given explicitly
}

// optimizers lists the values of -optimizer.
var optimizers = []string{"adam", "sgd", "proxgen", "proxquant"}

// parseConfig parses the command line. Usage and flag errors go to stderr.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("ptb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ptb -data DIR [flags]\n\nTrains the PTB LSTM language model of the ProxGen paper; see docs/ptb.md.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Data, "data", "", "folder with ptb.train.txt (optional), ptb.valid.txt and ptb.test.txt")
	fs.StringVar(&c.Train, "train", "", "training file (default DIR/ptb.train.txt, or DIR/ptb.valid.txt when that is missing)")
	fs.StringVar(&c.Valid, "valid", "", "validation file (default DIR/ptb.valid.txt unless it is the training file; none: the test file steers the step size)")
	fs.StringVar(&c.Test, "test", "", "test file (default DIR/ptb.test.txt)")
	fs.IntVar(&c.Emb, "emb", 300, "word-embedding size")
	fs.IntVar(&c.Hidden, "hidden", 300, "LSTM units per layer")
	fs.IntVar(&c.Layers, "layers", 1, "LSTM layers")
	fs.Float64Var(&c.Dropout, "dropout", 0.5, "dropout probability after the embedding, between LSTM layers and before the decoder")
	fs.StringVar(&c.Optimizer, "optimizer", "adam", "optimizer: "+strings.Join(optimizers, ", "))
	fs.Float64Var(&c.LR, "lr", 0, "initial step size (0: 20 for sgd, 1e-3 otherwise)")
	fs.Float64Var(&c.Momentum, "momentum", 0, "sgd: heavy-ball momentum")
	fs.Float64Var(&c.WD, "wd", 0, "weight decay (coupled for adam and sgd, decoupled for proxgen and proxquant)")
	fs.StringVar(&c.Reg, "reg", "", "regularizer of proxgen/proxquant: l0, l1/2, l2/3, l1, lq:Q, or bin-<any of those> (default bin-l0 for proxgen, bin-l1 for proxquant)")
	fs.StringVar(&c.RegOn, "reg-on", "lstm", "tensors the regularizer acts on: lstm (the LSTM weight matrices) or weights (also the embedding and decoder weights)")
	fs.Float64Var(&c.Lambda, "lambda", 1e-4, "regularization strength λ per step")
	fs.BoolVar(&c.Homotopy, "homotopy", false, "use λ·epoch in epoch 0, 1, 2, … (ProxQuant's homotopy)")
	fs.IntVar(&c.HardQuant, "hard-quant-epoch", 0, "binary regularizers: set the regularized weights to sign(w) and freeze them after this epoch (0: never)")
	fs.Float64Var(&c.Clip, "clip", 0.25, "clip the gradient norm of all parameters to this value (0: no clipping)")
	fs.Float64Var(&c.LRDecay, "lr-decay", 1.2, "divide the step size by this after an epoch whose validation loss did not improve (1: never)")
	fs.StringVar(&c.Schedule, "schedule", "", "step-size schedule instead of -lr-decay's plateau rule: "+optim.ScheduleSyntax+" (epochs count passes over the training data; plateau observes the validation loss)")
	fs.Float64Var(&c.Beta1, "beta1", 0.9, "Adam/ProxGen first-moment decay")
	fs.Float64Var(&c.Beta2, "beta2", 0.999, "Adam/ProxGen second-moment decay")
	fs.Float64Var(&c.Eps, "eps", 1e-8, "Adam/ProxGen δ")
	fs.IntVar(&c.Epochs, "epochs", 80, "training epochs")
	fs.IntVar(&c.Batch, "batch", 20, "parallel training streams")
	fs.IntVar(&c.EvalBatch, "eval-batch", 10, "parallel evaluation streams")
	fs.IntVar(&c.BPTT, "bptt", 35, "truncated backpropagation length")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed of the initial weights and the dropout masks")
	fs.IntVar(&c.Threads, "threads", 0, "worker threads (0: all CPUs); results do not depend on it")
	fs.IntVar(&c.LogEvery, "log-every", 50, "print training progress to stderr every this many windows (0: never)")
	fs.BoolVar(&c.JSON, "json", false, "print the per-epoch metrics and the summary as JSON lines")
	fs.StringVar(&c.Metrics, "metrics", "", "also write the per-epoch metrics as JSON lines to `file`")
	fs.StringVar(&c.Save, "save", "", "save the model with the best validation loss to `file` (safetensors, PyTorch state_dict names)")
	fs.StringVar(&c.Weights, "weights", "", "initialise the model from `file` (for example a full-precision model before ProxQuant)")
	fs.IntVar(&c.MaxWindows, "max-windows", 0, "train on at most this many windows per epoch (0: all), for quick runs")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { c.lrDecaySet = c.lrDecaySet || f.Name == "lr-decay" })
	return c, c.check()
}

// check validates the settings and fills in defaults that depend on other
// flags.
func (c *config) check() error {
	if c.Data == "" && (c.Train == "" || c.Test == "") {
		return usageError("-data is required (a folder with ptb.valid.txt and ptb.test.txt), or give -train and -test")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"emb", c.Emb}, {"hidden", c.Hidden}, {"layers", c.Layers}, {"epochs", c.Epochs}, {"batch", c.Batch}, {"eval-batch", c.EvalBatch}, {"bptt", c.BPTT}} {
		if f.v < 1 {
			return usageError("-%s = %d, want a positive number", f.name, f.v)
		}
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return usageError("-dropout = %v, want 0 <= p < 1", c.Dropout)
	}
	known := false
	for _, o := range optimizers {
		known = known || o == c.Optimizer
	}
	if !known {
		return usageError("-optimizer %q is unknown (want one of %s)", c.Optimizer, strings.Join(optimizers, ", "))
	}
	if c.LR == 0 {
		c.LR = 1e-3
		if c.Optimizer == "sgd" {
			c.LR = 20
		}
	}
	if !(c.LR > 0) {
		return usageError("-lr = %v, want a positive step size", c.LR)
	}
	if !(c.Momentum >= 0 && c.Momentum < 1) {
		return usageError("-momentum = %v, want 0 <= m < 1", c.Momentum)
	}
	if !(c.WD >= 0) {
		return usageError("-wd = %v, want >= 0", c.WD)
	}
	if !(c.Clip >= 0) {
		return usageError("-clip = %v, want >= 0 (0 disables clipping)", c.Clip)
	}
	if !(c.LRDecay >= 1) {
		return usageError("-lr-decay = %v, want >= 1 (1 keeps the step size)", c.LRDecay)
	}
	if c.Schedule != "" {
		if c.lrDecaySet {
			return usageError("-schedule and -lr-decay exclude each other (use -schedule plateau:FACTOR)")
		}
		sp, err := optim.ParseSchedule(c.Schedule)
		if err == nil {
			err = sp.Check(c.Epochs)
		}
		if err != nil {
			return usageError("-schedule: %v", err)
		}
	}
	if !(c.Lambda >= 0) {
		return usageError("-lambda = %v, want >= 0", c.Lambda)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1 && c.Beta2 >= 0 && c.Beta2 < 1) || !(c.Eps > 0) {
		return usageError("-beta1 = %v, -beta2 = %v, -eps = %v: want betas in [0, 1) and eps > 0", c.Beta1, c.Beta2, c.Eps)
	}
	if c.Threads < 0 || c.LogEvery < 0 || c.MaxWindows < 0 || c.HardQuant < 0 {
		return usageError("-threads, -log-every, -max-windows and -hard-quant-epoch must not be negative")
	}
	if c.RegOn != "lstm" && c.RegOn != "weights" {
		return usageError("-reg-on %q is unknown (want lstm or weights)", c.RegOn)
	}
	switch c.Optimizer {
	case "proxgen", "proxquant":
		if c.Reg == "" {
			c.Reg = "bin-l0"
			if c.Optimizer == "proxquant" {
				c.Reg = "bin-l1"
			}
		}
		if _, err := optim.ParseRegularizer(c.Reg); err != nil {
			return usageError("-reg: %v", err)
		}
	default:
		if c.Reg != "" && c.Reg != "none" {
			return usageError("-reg %s needs -optimizer proxgen or proxquant (-optimizer %s trains without a regularizer)", c.Reg, c.Optimizer)
		}
		if c.HardQuant > 0 || c.Homotopy {
			return usageError("-hard-quant-epoch and -homotopy need -optimizer proxgen or proxquant")
		}
		c.Reg = "none"
	}
	if c.HardQuant > 0 && !strings.HasPrefix(c.Reg, "bin-") {
		return usageError("-hard-quant-epoch needs a binary regularizer (-reg bin-...), not %s", c.Reg)
	}
	if c.Momentum != 0 && c.Optimizer != "sgd" {
		return usageError("-momentum applies to -optimizer sgd only")
	}
	return nil
}

// run is the whole program: it parses args, trains, and returns the exit
// status. Errors are printed to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		if !errors.Is(err, errUsage) {
			// The flag package has printed its own message and the usage.
			return exitUsage
		}
		fmt.Fprintf(stderr, "ptb: %v\n", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return exitUsage
	}
	if c.Threads == 0 {
		c.Threads = runtime.NumCPU()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.Threads))
	defer parallel.SetWorkers(parallel.SetWorkers(c.Threads))

	err = train(ctx, c, stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(stderr, "ptb: interrupted")
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "ptb: %v\n", err)
		return exitError
	}
}
