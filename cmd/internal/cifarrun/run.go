// Package cifarrun is the cifar program as a library: Main trains or
// evaluates a CIFAR-10 classifier with ProxGen or one of the paper's
// baselines from the command-line flags of cmd/cifar, which is Main with
// a signal handler, and CheckArgs validates such flags without running
// anything (for sweeps). The run folder, its files and the flags are
// documented in cmd/cifar and docs/cifar.md.
package cifarrun

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/prune"
	"github.com/proxgen/proxgen/nn/train"
)

// errInterrupted reports that an evaluation stopped on a signal.
var errInterrupted = fmt.Errorf("evaluation %w", train.ErrInterrupted)

// Main is the whole cifar program: it parses args (the flags of the
// command cifar), trains or evaluates, and returns the exit status
// (cli.ExitOK, ExitError, ExitUsage or ExitInterrupted). Errors
// are printed to stderr. It sets the process's thread count (-threads)
// while it runs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program.Main(ctx, args, stdout, stderr)
}

// program is cifar on the training programs' skeleton.
var program = experiment.Program[*config]{
	Name:  "cifar",
	Parse: parseConfig,
	ResumeDir: func(c *config) string {
		if c.Resume {
			return c.Out
		}
		return ""
	},
	ReadStored:  readStoredRun,
	CheckStored: func(stored *config) error { chk := *stored; return chk.resolve() },
	Merge:       mergeResume,
	Check:       (*config).resolve,
	Resumed: func(ck *train.Checkpoint, stored, merged *config, stderr io.Writer) {
		if msg := resumeChanges(stored, merged); msg != "" {
			fmt.Fprintf(stderr, "cifar: -resume: %s, as a fresh %d-epoch run would use, from epoch %d on\n", msg, merged.Epochs, ck.Epoch()+1)
		}
		merged.resumed = ck
	},
	Threads: func(c *config) int { return c.Threads },
	Run: func(ctx context.Context, c *config, _ *train.Checkpoint, _ int, stdout, stderr io.Writer) error {
		switch {
		case c.Compact != "":
			return compactOnly(c, stdout)
		case c.EvalOnly:
			return evalOnly(ctx, c, stdout, stderr)
		}
		return trainRun(ctx, c, stdout, stderr)
	},
}

// loadData returns the training and test splits of c, downloading the
// data set when it is missing and allowed (cifar10.Open).
func loadData(ctx context.Context, c *config, stderr io.Writer) (*cifar10.Dataset, error) {
	ds, err := cifar10.Open(ctx, cifar10.OpenOptions{
		Dir: c.Data, Download: c.Download, NoDownload: c.NoDownload,
		LoadOptions: cifar10.LoadOptions{AllowSubset: c.AllowSubset},
		Fetch:       cifar10.DownloadOptions{Progress: stderr},
	})
	switch {
	case errors.Is(err, cifar10.ErrNoFolder):
		return nil, fmt.Errorf("-data: %w; -download downloads into it", err)
	case errors.Is(err, cifar10.ErrRecordCount):
		return nil, fmt.Errorf("-data: %w; -allow-subset accepts such files", err)
	case err != nil:
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

// spec returns the description of the network of c (the normalisation
// and class names left to their defaults).
func (c *config) spec() models.Spec {
	return models.Spec{Model: c.Model, Width: c.Width, Shortcut: c.Shortcut, Widths: c.Widths, NumClasses: cifar10.NumClasses}
}

// newModel builds the network of c with its initial weights drawn from
// the seed.
func newModel(c *config) (nn.Module, error) {
	return c.spec().New(rand.New(rand.NewPCG(c.Seed, 0x6d6f64656c)))
}

// trainRun runs (or resumes) the training described by c.
func trainRun(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	if !c.Resume && c.Weights != "" {
		if err := compactedWeights(c); err != nil {
			return err
		}
		// A warm start: the file is recorded by its contents as well.
		b, err := os.ReadFile(c.Weights)
		if err != nil {
			return fmt.Errorf("-weights: %w", err)
		}
		c.WeightsSHA256 = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	if !c.Resume {
		lock, err := experiment.LockNewRun(c.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
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
	var gmp *experiment.GMP
	if c.GMP > 0 {
		gmp = experiment.NewGMP(meth.Weights, c.GMP, c.GMPBegin*perEpoch, c.GMPEnd*perEpoch, c.GMPEvery)
	}
	prec, err := c.precision()
	if err != nil {
		return err
	}
	t := &trainer{
		cfg: c, model: model, meth: meth, train: ds.Train, test: ds.Test, perEpoch: perEpoch, gmp: gmp,
		prog: train.NewProgress(stderr, c.Progress, c.LogEvery, "img"), stdout: stdout,
		trainCtx: &autograd.Context{Arena: autograd.NewArena(), Precision: prec},
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
		t.prog.Logf("training %s (%s) with %s, -reg %s, per-step λ %.3g%s, lr %g on %s (%s of %d per epoch), %s%s; run folder %s",
			c.Model, cli.Count(nn.NumParams(model), "parameter"), c.Optimizer, c.Reg, perStepLambda(c, ds.Train.Len()), regNote(c), c.LR, cli.Count(ds.Train.Len(), "image"),
			cli.Count(perEpoch, "batch"), c.Batch, cli.Count(parallel.Workers(), "thread"), precisionNote(prec), c.Out)
	}
	res, err := l.Run(ctx)
	if errors.Is(err, train.ErrInterrupted) {
		t.prog.Logf("continue with: cifar -out %s -resume", c.Out)
	}
	if err != nil {
		return err
	}
	if res.Already {
		t.prog.Logf("the run in %s is complete (%s); its files were re-created from the checkpoint", c.Out, cli.Count(res.Epoch, "epoch"))
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
	for _, f := range []string{checkpoint.ModelFileName, BestFile, train.CheckpointName, train.MetricsName, CurvesFile, SummaryFile} {
		files = append(files, filepath.Join(c.Out, f))
	}
	printSummary(stdout, s, files)
	return nil
}

// EvalResult is the output of -eval-only.
type EvalResult struct {
	Weights  string                 `json:"weights"`
	Model    string                 `json:"model"`
	Params   int                    `json:"params"`
	Images   int                    `json:"images"`
	TestLoss float64                `json:"test_loss"`
	TestAcc  float64                `json:"test_acc"`
	Seconds  float64                `json:"seconds"`
	Weight   experiment.WeightStats `json:"weights_stats"`
	// SparseLayers and Layers count the convolution and linear layers
	// that run sparse when the weights are served (infer.New, the path of
	// cmd/serve and cmd/bench infer) and all of them.
	SparseLayers int `json:"sparse_layers"`
	Layers       int `json:"layers"`
	// Served describes how nn/infer runs the weights (infer.Model.String:
	// the layers that run sparse and each convolution's algorithm at
	// batch 1 and 64, as measured at load on this CPU).
	Served string `json:"served"`
	// Remaining is what is left once the removable channels are removed.
	Remaining prune.Count `json:"remaining"`
	// Recalibrated is the number of training batches over which the
	// batch-norm statistics were re-estimated before the evaluation
	// (-recalibrate); 0: the file's statistics.
	Recalibrated int `json:"recalibrated,omitempty"`
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
	meth.Gates = nil
	recal := 0
	if c.Recalibrate > 0 {
		if ds.Train.Len() < 2 {
			return fmt.Errorf("-recalibrate %d: the training set has %d images, too few for batch statistics", c.Recalibrate, ds.Train.Len())
		}
		if recal, err = recalibrateOn(ctx, model, meth, ds.Train, c, 0); err != nil {
			return errInterrupted
		}
	}
	// Layers with mostly exact zeros run sparse (infer.EagerMinZeros).
	var prep []infer.Option
	if c.Dense {
		prep = append(prep, infer.Dense())
	}
	evalNet, _ := infer.Prepare(model, prep...)
	t := &trainer{cfg: c, model: model, evalNet: evalNet, meth: meth, evalCtx: &autograd.Context{Arena: autograd.NewArena(), NoGrad: true}}
	start := time.Now()
	loss, acc, err := t.evaluate(ctx, ds.Test)
	if err != nil {
		return errInterrupted
	}
	r := EvalResult{Weights: c.Weights, Model: c.Model, Params: nn.NumParams(model), Images: ds.Test.Len(),
		TestLoss: loss, TestAcc: acc, Seconds: round3(time.Since(start).Seconds()), Weight: t.stats(),
		Recalibrated: recal}
	if r.Remaining, err = t.remaining(); err != nil {
		return err
	}
	// What a server loading these weights runs: New takes the network
	// over, so this comes last.
	served, err := infer.New(model, c.spec(), prep...)
	if err != nil {
		return fmt.Errorf("preparing the network for serving: %w", err)
	}
	rep := served.Sparsity()
	r.SparseLayers, r.Layers, r.Served = len(rep.SparseLayers()), len(rep.Layers), served.String()
	if c.JSON {
		line, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", line)
		return nil
	}
	fmt.Fprintf(stdout, "%s (%s, %d parameters) on %d test images: accuracy %.2f%%, loss %.4f (%.1f s)\n",
		c.Weights, c.Model, r.Params, r.Images, 100*acc, loss, r.Seconds)
	fmt.Fprintf(stdout, "weights: %.2f%% exactly zero, %.2f%% below 1e-3, %.2f%% below 1e-2, %.2f%% binary (±s, one s per tensor)\n",
		100*r.Weight.Zero, 100*r.Weight.Small, 100*r.Weight.Below1e2, 100*r.Weight.PM1)
	fmt.Fprintf(stdout, "compacted: %d of %d channels, %.2f%% of the parameters, %.2f%% of the FLOPs\n",
		r.Remaining.Channels, r.Remaining.ChannelsTotal, 100*r.Remaining.ParamsRatio(), 100*r.Remaining.FLOPsRatio())
	fmt.Fprintf(stdout, "served (nn/infer on this CPU): %s\n", r.Served)
	if recal > 0 {
		fmt.Fprintf(stdout, "batch norm: statistics re-estimated over %s before the evaluation\n", cli.Count(recal, "training batch"))
	}
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
	res, err := prune.CompactFile(c.Compact, c.Weights, models.Spec{Model: c.Model, Width: c.Width, Shortcut: c.Shortcut})
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

// precisionNote describes the arithmetic of the training products for
// the start-up line: nothing for fp32.
func precisionNote(p autograd.Precision) string {
	switch {
	case p == autograd.FP32:
		return ""
	case blas.BF16Native():
		return ", bf16 products"
	}
	return ", -precision bf16 computed in fp32 (the CPU lacks AVX512_BF16)"
}
