// Package ptbrun is the ptb program as a library: Main trains the word-level
// LSTM language model of the ProxGen paper on the Penn Treebank from the
// command-line flags of cmd/ptb, which is Main with a signal handler, and
// CheckArgs validates such flags without running anything (for sweeps).
// The flags and the run folder are documented in cmd/ptb and docs/ptb.md.
package ptbrun

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// usageError is a flag problem, reported with exit status cli.ExitUsage.
func usageError(format string, args ...any) error { return cli.Usagef(format, args...) }

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
	Out        string
	SaveEvery  int
	Progress   string
	Resume     bool `json:"-"`

	// explicit records the flags given on the command line.
	explicit map[string]bool
}

// optimizers lists the values of -optimizer.
var optimizers = []string{"adam", "sgd", "proxgen", "proxquant"}

// defaultConfig returns the settings of a run without flags.
func defaultConfig() *config {
	return &config{
		Emb: 300, Hidden: 300, Layers: 1, Dropout: 0.5, Optimizer: "adam", RegOn: "lstm", Lambda: 1e-4,
		Clip: 0.25, LRDecay: 1.2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Epochs: 80, Batch: 20, EvalBatch: 10,
		BPTT: 35, Seed: 1, LogEvery: 50, Progress: "auto",
	}
}

// mutableOnResume lists the flags a resumed run may change; any other
// flag given with -resume must equal the stored setting.
var mutableOnResume = []string{"data", "train", "valid", "test", "epochs", "threads", "log-every", "json", "metrics", "save", "out", "save-every", "progress", "resume"}

// newFlagSet binds the flags to c, with c's values as defaults.
func newFlagSet(c *config, stderr io.Writer) *flag.FlagSet {
	fs := cli.NewFlagSet("ptb", "ptb -data DIR [flags]", "trains the PTB LSTM language model of the ProxGen paper (docs/ptb.md)", stderr)
	fs.StringVar(&c.Data, "data", c.Data, "folder with ptb.train.txt (optional), ptb.valid.txt and ptb.test.txt")
	fs.StringVar(&c.Train, "train", c.Train, "training file (default DIR/ptb.train.txt, or DIR/ptb.valid.txt when that is missing)")
	fs.StringVar(&c.Valid, "valid", c.Valid, "validation file (default DIR/ptb.valid.txt unless it is the training file; none: the test file steers the step size)")
	fs.StringVar(&c.Test, "test", c.Test, "test file (default DIR/ptb.test.txt)")
	fs.IntVar(&c.Emb, "emb", c.Emb, "word-embedding size (at most 4096)")
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "LSTM units per layer (at most "+strconv.Itoa(models.MaxLMSize)+")")
	fs.IntVar(&c.Layers, "layers", c.Layers, "LSTM layers (at most "+strconv.Itoa(models.MaxLMLayers)+")")
	fs.Float64Var(&c.Dropout, "dropout", c.Dropout, "dropout probability after the embedding, between LSTM layers and before the decoder")
	fs.StringVar(&c.Optimizer, "optimizer", c.Optimizer, "optimizer: "+strings.Join(optimizers, ", "))
	fs.Float64Var(&c.LR, "lr", c.LR, "initial step size (0: 20 for sgd, 1e-3 otherwise)")
	fs.Float64Var(&c.Momentum, "momentum", c.Momentum, "sgd: heavy-ball momentum")
	fs.Float64Var(&c.WD, "wd", c.WD, "weight decay (coupled for adam and sgd, decoupled for proxgen and proxquant)")
	fs.StringVar(&c.Reg, "reg", c.Reg, "regularizer of proxgen/proxquant: l0, l1/2, l2/3, l1, lq:Q, or bin-<any of those> (default bin-l0 for proxgen, bin-l1 for proxquant)")
	fs.StringVar(&c.RegOn, "reg-on", c.RegOn, "tensors the regularizer acts on: lstm (the LSTM weight matrices) or weights (also the embedding and decoder weights)")
	fs.Float64Var(&c.Lambda, "lambda", c.Lambda, "regularization strength λ per step")
	fs.BoolVar(&c.Homotopy, "homotopy", c.Homotopy, "use λ·epoch in epoch 0, 1, 2, … (ProxQuant's homotopy)")
	fs.IntVar(&c.HardQuant, "hard-quant-epoch", c.HardQuant, "binary regularizers: set the regularized weights to sign(w) and freeze them after this epoch (0: never)")
	fs.Float64Var(&c.Clip, "clip", c.Clip, "clip the gradient norm of all parameters to this value (0: no clipping)")
	fs.Float64Var(&c.LRDecay, "lr-decay", c.LRDecay, "divide the step size by this after an epoch whose validation loss did not improve (1: never)")
	fs.StringVar(&c.Schedule, "schedule", c.Schedule, "step-size schedule instead of -lr-decay's plateau rule: "+schedule.Syntax+" (epochs count passes over the training data; plateau observes the validation loss)")
	fs.Float64Var(&c.Beta1, "beta1", c.Beta1, "Adam/ProxGen first-moment decay")
	fs.Float64Var(&c.Beta2, "beta2", c.Beta2, "Adam/ProxGen second-moment decay")
	fs.Float64Var(&c.Eps, "eps", c.Eps, "Adam/ProxGen δ")
	fs.IntVar(&c.Epochs, "epochs", c.Epochs, "training epochs")
	fs.IntVar(&c.Batch, "batch", c.Batch, "parallel training streams")
	fs.IntVar(&c.EvalBatch, "eval-batch", c.EvalBatch, "parallel evaluation streams")
	fs.IntVar(&c.BPTT, "bptt", c.BPTT, "truncated backpropagation length (at most "+strconv.Itoa(models.MaxBPTT)+", and times the batch at most "+strconv.Itoa(models.MaxStepTokens)+")")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed of the initial weights and the dropout masks")
	fs.IntVar(&c.Threads, "threads", c.Threads, "worker threads (0: all CPUs, at most 1024); results do not depend on it")
	fs.IntVar(&c.LogEvery, "log-every", c.LogEvery, "progress lines on stderr every this many windows (0: no progress)")
	fs.StringVar(&c.Progress, "progress", c.Progress, "progress on stderr: bar, lines, none, or auto (bar on a terminal, lines otherwise)")
	fs.BoolVar(&c.JSON, "json", c.JSON, "print the per-epoch metrics and the summary as JSON lines")
	fs.StringVar(&c.Metrics, "metrics", c.Metrics, "also write the per-epoch metrics as JSON lines to `file` (the run folder has them in metrics.jsonl)")
	fs.StringVar(&c.Save, "save", c.Save, "also write the model with the best validation loss to `file` (the run folder has it in model.safetensors)")
	fs.StringVar(&c.Weights, "weights", c.Weights, "initialise the model from `file` (for example a full-precision model before ProxQuant)")
	fs.IntVar(&c.MaxWindows, "max-windows", c.MaxWindows, "train on at most this many windows per epoch (0: all), for quick runs")
	fs.StringVar(&c.Out, "out", c.Out, "run folder: checkpoint, metrics.jsonl, model.safetensors, summary.json (default runs/ptb-<optimizer>-s<seed>)")
	fs.IntVar(&c.SaveEvery, "save-every", c.SaveEvery, "also checkpoint every N windows inside an epoch (0: at epoch ends only)")
	fs.BoolVar(&c.Resume, "resume", c.Resume, "continue the run saved in -out exactly where it stopped")
	return fs
}

// parseConfig parses the command line. Usage and flag errors go to stderr.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	c := defaultConfig()
	explicit, err := experiment.ParseFlags(newFlagSet(c, stderr), args)
	if err != nil {
		return nil, err
	}
	c.explicit = explicit
	if c.Resume {
		if c.Out == "" {
			return nil, usageError("-resume needs -out, the run folder")
		}
		return c, nil // checked after merging with the stored settings
	}
	return c, c.check()
}

// mergeResume returns the stored settings with the flags of this
// invocation in mutableOnResume applied; any other flag given must equal
// the stored value.
func mergeResume(stored, now *config) (*config, error) {
	merged := *stored
	merged.explicit, merged.Resume = now.explicit, true
	if err := experiment.MergeFlags(newFlagSet(stored, io.Discard), newFlagSet(now, io.Discard), newFlagSet(&merged, io.Discard), now.explicit, mutableOnResume); err != nil {
		return nil, usageError("%v", err)
	}
	return &merged, nil
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
	if c.Emb > models.MaxLMSize || c.Hidden > models.MaxLMSize || c.Layers > models.MaxLMLayers {
		return usageError("-emb %d, -hidden %d, -layers %d: at most %d, %d and %d (memory grows with their product and the vocabulary)", c.Emb, c.Hidden, c.Layers, models.MaxLMSize, models.MaxLMSize, models.MaxLMLayers)
	}
	if c.Batch > models.MaxBatch || c.EvalBatch > models.MaxBatch {
		return usageError("-batch %d, -eval-batch %d: at most %d", c.Batch, c.EvalBatch, models.MaxBatch)
	}
	if c.BPTT > models.MaxBPTT || c.BPTT*max(c.Batch, c.EvalBatch) > models.MaxStepTokens {
		return usageError("-bptt %d: at most %d, and -bptt times the larger of -batch %d and -eval-batch %d at most %d tokens (memory grows with them)", c.BPTT, models.MaxBPTT, c.Batch, c.EvalBatch, models.MaxStepTokens)
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
		if c.explicit["lr-decay"] {
			return usageError("-schedule and -lr-decay exclude each other (use -schedule plateau:FACTOR)")
		}
		sp, err := schedule.Parse(c.Schedule)
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
	if c.Threads < 0 || c.LogEvery < 0 || c.MaxWindows < 0 || c.HardQuant < 0 || c.SaveEvery < 0 {
		return usageError("-threads, -log-every, -max-windows, -hard-quant-epoch and -save-every must not be negative")
	}
	if c.Threads > 1024 {
		return usageError("-threads %d: at most 1024", c.Threads)
	}
	if !slices.Contains([]string{"auto", "bar", "lines", "none"}, c.Progress) {
		return usageError("-progress %q: want bar, lines, none or auto", c.Progress)
	}
	if c.Out == "" {
		c.Out = fmt.Sprintf("runs/ptb-%s-s%d", c.Optimizer, c.Seed)
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
		if _, err := prox.Parse(c.Reg); err != nil {
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

// Main is the whole ptb program: it parses args (the flags of the
// command ptb), trains, and returns the exit status (cli.ExitOK,
// ExitError, ExitUsage or ExitInterrupted). Errors are printed to stderr.
// It sets the process's thread count (-threads) while it runs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program.Main(ctx, args, stdout, stderr)
}

// program is ptb on the training programs' skeleton.
var program = experiment.Program[*config]{
	Name:  "ptb",
	Parse: parseConfig,
	ResumeDir: func(c *config) string {
		if c.Resume {
			return c.Out
		}
		return ""
	},
	ReadStored:  readStoredRun,
	CheckStored: func(stored *config) error { chk := *stored; return chk.check() },
	Merge:       mergeResume,
	Check:       (*config).check,
	Threads:     func(c *config) int { return c.Threads },
	Run:         trainRun,
	ResumeHint:  func(c *config) string { return "ptb -out " + c.Out + " -resume" },
}

// CheckArgs parses and checks args as Main does before it reads or writes
// anything (unknown flags, malformed values, values out of range and
// flags that exclude each other are errors) and returns the number of
// epochs the run trains.
func CheckArgs(args []string) (epochs int, err error) {
	c, err := parseConfig(args, io.Discard)
	if err != nil {
		return 0, err
	}
	return c.Epochs, nil
}
