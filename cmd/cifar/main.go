// Command cifar trains and evaluates CIFAR-10 classifiers with ProxGen and
// the baselines of the ProxGen paper.
//
// Usage:
//
//	cifar [flags]
//
// With no flags it trains ResNet-20 with ProxGen (Adam preconditioner,
// ℓ1/2 regularizer, λ = 0.1/N, step size 1e-3, batch 128) for 30 epochs on
// the CIFAR-10 data in the download cache, downloading them if needed, and
// writes its run folder (runs/resnet20-proxgen-l12-s1):
//
//	train_state.safetensors  model, optimizer and run state; -resume reads it
//	train_state.prev.safetensors  the checkpoint before it
//	model.safetensors        the model alone, loadable by PyTorch (strict)
//	metrics.jsonl            one JSON line of metrics per epoch
//	curves.svg               loss, accuracy, sparsity and step-size curves
//	summary.json             the final summary (at the end of the run)
//
// The run folder is kept by package nn/train: the checkpoint is one file,
// written atomically after the others at each epoch end, and -resume
// rebuilds the other files from it and continues bit-identically, also
// after kill -9 or a full disk; Ctrl-C saves the current step before
// exiting. Progress goes to
// standard error (a bar on a terminal, plain lines otherwise), one line per
// epoch and the summary to standard output (JSON lines with -json).
//
// Examples:
//
//	go run ./cmd/cifar -data /tmp/cifar10 -model resnet20 -epochs 1
//	go run ./cmd/cifar -data /tmp/cifar10 -train-subset 2048 -epochs 2
//	go run ./cmd/cifar -model vgg16 -optimizer proxgenw -reg l0 -lambda 0.5 -epochs 300
//	go run ./cmd/cifar -optimizer proxquant -weights fp.safetensors -epochs 300
//	go run ./cmd/cifar -out runs/x -resume
//	go run ./cmd/cifar -eval-only -weights runs/x/model.safetensors
//
// Run "cifar -h" for all flags; docs/cifar.md explains them, the λ
// scaling and the checkpoint layout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/prune"
	"github.com/proxgen/proxgen/nn/train"
)

// gcPercent is the garbage collector's target (GOGC) unless the environment
// sets GOGC. The step arena and the data set are almost all of the live
// heap and a step allocates only a few MB besides, so collecting at 20 %
// growth instead of Go's default 100 % keeps the heap from doubling between
// collections (a ResNet-20 epoch at 1 thread reached 1.05 GB of heap with
// 0.53 GB live) for one collection every few dozen steps, each costing well
// under a millisecond of CPU (the buffers hold no pointers).
const gcPercent = 20

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errInterrupted reports that an evaluation stopped on a signal.
var errInterrupted = errors.New("interrupted")

// usageError is an error of the flags found after parsing (exit status
// exitUsage).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Exit statuses of run.
const (
	exitOK          = 0
	exitError       = 1 // the run failed (data, files, divergence)
	exitUsage       = 2 // bad flags
	exitInterrupted = 130
)

// run is the whole program: it parses args, trains or evaluates, and
// returns the exit status. Errors are printed to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "cifar: %v\n", err)
		return exitUsage
	}
	if c.Resume {
		ck, stored, err := readStoredRun(c.Out)
		if err != nil {
			fmt.Fprintf(stderr, "cifar: %v\n", err)
			if errors.Is(err, os.ErrNotExist) {
				return exitUsage // -out names no run
			}
			return exitError
		}
		if c, err = mergeResume(stored, c); err != nil {
			fmt.Fprintf(stderr, "cifar: %v\n", err)
			return exitUsage
		}
		// The stored settings pass the checks of the flags again: a
		// damaged or edited file must not reach the model and the loaders.
		if err := c.resolve(); err != nil {
			fmt.Fprintf(stderr, "cifar: -resume: %s: stored configuration: %v\n", ck.Path, err)
			return exitError
		}
		c.resumed = ck
	}
	threads := c.Threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	defer parallel.SetWorkers(parallel.SetWorkers(threads))

	switch {
	case c.Compact != "":
		err = compactOnly(c, stdout)
	case c.EvalOnly:
		err = evalOnly(ctx, c, stdout, stderr)
	default:
		err = trainRun(ctx, c, stdout, stderr)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errInterrupted), errors.Is(err, train.ErrInterrupted):
		return exitInterrupted
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "cifar: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "cifar: %v\n", err)
		return exitError
	}
}

// loadData returns the training and test splits of c, downloading the
// data set when it is missing and allowed.
func loadData(ctx context.Context, c *config, stderr io.Writer) (*cifar10.Dataset, error) {
	dir := c.Data
	if dir == "" {
		d, err := cifar10.DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no -data folder and no cache folder: %w", err)
		}
		dir = d
	}
	if _, err := cifar10.ResolveDir(dir); err != nil {
		if c.NoDownload || partial(dir) {
			return nil, fmt.Errorf("-data: %w", err)
		}
		fmt.Fprintf(stderr, "CIFAR-10 not found in %s; downloading %s\n", dir, cifar10.URL)
		if _, err := cifar10.Download(ctx, dir, stderr); err != nil {
			return nil, fmt.Errorf("downloading CIFAR-10: %w", err)
		}
	}
	ds, err := cifar10.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	if c.TrainSubset > 0 {
		ds.Train = ds.Train.Subset(c.TrainSubset)
	}
	if c.TestSubset > 0 {
		ds.Test = ds.Test.Subset(c.TestSubset)
	}
	return ds, nil
}

// partial reports whether dir holds some of the data set's files, so that
// a failed ResolveDir means broken data rather than missing data (which
// would be downloaded).
func partial(dir string) bool {
	for _, d := range []string{dir, filepath.Join(dir, cifar10.FolderName)} {
		for _, f := range append([]string{cifar10.TestFile}, cifar10.TrainFiles...) {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				return true
			}
		}
	}
	return false
}

// newModel builds the network of c with its initial weights drawn from
// the seed.
func newModel(c *config) (nn.Module, error) {
	opts := []models.Option{models.WithWidth(c.Width)}
	if c.Shortcut == "B" {
		opts = append(opts, models.WithShortcut(models.ShortcutB))
	}
	if c.Widths != nil {
		opts = append(opts, models.WithWidths(c.Widths))
	}
	return models.New(c.Model, cifar10.NumClasses, rand.New(rand.NewPCG(c.Seed, 0x6d6f64656c)), opts...)
}

// trainRun runs (or resumes) the training described by c.
func trainRun(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	if !c.Resume && c.Weights != "" {
		if err := compactedWeights(c); err != nil {
			return err
		}
	}
	if !c.Resume {
		if _, err := os.Lstat(filepath.Join(c.Out, train.CheckpointName)); err == nil {
			return fmt.Errorf("%s already holds a run (%s); continue it with -resume or choose another -out", c.Out, train.CheckpointName)
		}
	}
	ds, err := loadData(ctx, c, stderr)
	if err != nil {
		return err
	}
	perEpoch := cifar10.NumBatches(ds.Train.Len(), c.Batch, true)
	if perEpoch == 0 {
		return fmt.Errorf("the training set has %d images, fewer than one batch of %d", ds.Train.Len(), c.Batch)
	}
	model, err := newModel(c)
	if err != nil {
		return err
	}
	if c.Weights != "" && !c.Resume {
		if _, err := loadWeights(c.Weights, model); err != nil {
			return err
		}
	}
	meth, err := newMethod(c, model, ds.Train.Len(), perEpoch)
	if err != nil {
		return err
	}
	t := &trainer{
		cfg: c, model: model, meth: meth, train: ds.Train, test: ds.Test, perEpoch: perEpoch,
		prog: train.NewProgress(stderr, c.Progress, c.LogEvery, "img"), stdout: stdout,
		trainCtx: &autograd.Context{Arena: autograd.NewArena()},
		evalCtx:  &autograd.Context{Arena: autograd.NewArena(), NoGrad: true},
	}
	defer t.closeLoader()
	l := t.loop()
	if c.Resume {
		l.Resume = c.resumed
		if c.resumed.Epoch() < c.Epochs {
			t.prog.Logf("resuming %s at epoch %d, step %d", c.Out, c.resumed.Epoch()+1, c.resumed.Step())
		}
	} else {
		t.prog.Logf("training %s (%d parameters) with %s, -reg %s, per-step λ %.3g, lr %g on %d images (%d batches of %d per epoch), %d threads; run folder %s",
			c.Model, nn.NumParams(model), c.Optimizer, c.Reg, meth.lambda, c.LR, ds.Train.Len(), perEpoch, c.Batch, parallel.Workers(), c.Out)
	}
	res, err := l.Run(ctx)
	if errors.Is(err, train.ErrInterrupted) {
		t.prog.Logf("continue with: cifar -out %s -resume", c.Out)
	}
	if err != nil {
		return err
	}
	if res.Already {
		t.prog.Logf("the run in %s is complete (%d epochs); its files were re-created from the checkpoint", c.Out, res.Epoch)
	}
	h, err := decodeHistory(res.History)
	if err != nil {
		return err
	}
	s := t.makeSummary(h)
	if c.JSON {
		line, _ := train.MarshalJSON(s)
		fmt.Fprintf(stdout, "%s\n", line)
		return nil
	}
	var files []string
	for _, f := range []string{checkpoint.ModelFileName, train.CheckpointName, train.MetricsName, curvesFile, summaryFile} {
		files = append(files, filepath.Join(c.Out, f))
	}
	printSummary(stdout, s, files)
	return nil
}

// evalResult is the output of -eval-only.
type evalResult struct {
	Weights  string      `json:"weights"`
	Model    string      `json:"model"`
	Params   int         `json:"params"`
	Images   int         `json:"images"`
	TestLoss float64     `json:"test_loss"`
	TestAcc  float64     `json:"test_acc"`
	Seconds  float64     `json:"seconds"`
	Weight   weightStats `json:"weights_stats"`
	// SparseLayers and Layers count the convolution and linear layers
	// that ran sparse and all of them (nn.PrepareInference).
	SparseLayers int `json:"sparse_layers"`
	Layers       int `json:"layers"`
	// Remaining is what is left once the removable channels are removed.
	Remaining prune.Count `json:"remaining"`
}

// evalOnly evaluates the weights file of c on the test set.
func evalOnly(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	if err := weightsModel(c, c.Weights); err != nil {
		return err
	}
	if err := c.resolve(); err != nil {
		return err
	}
	model, err := newModel(c)
	if err != nil {
		return err
	}
	if _, err := loadWeights(c.Weights, model); err != nil {
		return err
	}
	// As nn/infer does: layers with mostly exact zeros run sparse.
	sparse := nn.PrepareInferenceWith(model, nn.InferenceOptions{Dense: c.Dense})
	ds, err := loadData(ctx, c, stderr)
	if err != nil {
		return err
	}
	meth, err := newMethod(c, model, max(ds.Train.Len(), 1), 1)
	if err != nil {
		return err
	}
	// The file holds the weights the network computes with: no gate
	// transformation applies.
	meth.hc = nil
	t := &trainer{cfg: c, model: model, meth: meth, evalCtx: &autograd.Context{Arena: autograd.NewArena(), NoGrad: true}}
	start := time.Now()
	loss, acc, err := t.evaluate(ctx, ds.Test)
	if err != nil {
		return errInterrupted
	}
	r := evalResult{Weights: c.Weights, Model: c.Model, Params: nn.NumParams(model), Images: ds.Test.Len(),
		TestLoss: loss, TestAcc: acc, Seconds: round3(time.Since(start).Seconds()), Weight: t.stats(),
		SparseLayers: len(sparse.SparseLayers()), Layers: len(sparse.Layers)}
	if r.Remaining, err = t.remaining(); err != nil {
		return err
	}
	if c.JSON {
		line, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", line)
		return nil
	}
	fmt.Fprintf(stdout, "%s (%s, %d parameters) on %d test images: accuracy %.2f%%, loss %.4f (%.1f s)\n",
		c.Weights, c.Model, r.Params, r.Images, 100*acc, loss, r.Seconds)
	fmt.Fprintf(stdout, "weights: %.2f%% exactly zero, %.2f%% below 1e-3, %.2f%% below 1e-2, %.2f%% at ±1\n",
		100*r.Weight.Zero, 100*r.Weight.Small, 100*r.Weight.Below1e2, 100*r.Weight.PM1)
	fmt.Fprintf(stdout, "compacted: %d of %d channels, %.2f%% of the parameters, %.2f%% of the FLOPs\n",
		r.Remaining.Channels, r.Remaining.ChannelsTotal, 100*r.Remaining.ParamsRatio(), 100*r.Remaining.FLOPsRatio())
	fmt.Fprintf(stdout, "sparse path: %d of %d layers\n", r.SparseLayers, r.Layers)
	return nil
}

// compactOnly writes -weights without its removable channels to -compact.
func compactOnly(c *config, stdout io.Writer) error {
	if err := weightsModel(c, c.Weights); err != nil {
		return err
	}
	if err := c.resolve(); err != nil {
		return err
	}
	res, err := prune.CompactFile(c.Compact, c.Weights, infer.Spec{Model: c.Model, Width: c.Width, Shortcut: c.Shortcut})
	if err != nil {
		return fmt.Errorf("-compact: %w", err)
	}
	r := res.Count
	if c.JSON {
		line, _ := json.Marshal(struct {
			Weights string      `json:"weights"`
			Out     string      `json:"out"`
			Count   prune.Count `json:"remaining"`
		}{c.Weights, c.Compact, r})
		fmt.Fprintf(stdout, "%s\n", line)
		return nil
	}
	fmt.Fprintf(stdout, "%s: %d of %d channels, %d of %d parameters (%.2f%%), %d of %d FLOPs (%.2f%%) left; compacted network written to %s\n",
		c.Weights, r.Channels, r.ChannelsTotal, r.Params, r.ParamsTotal, 100*r.ParamsRatio(), r.FLOPs, r.FLOPsTotal, 100*r.FLOPsRatio(), c.Compact)
	return nil
}
