package cifarrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/prune"
	"github.com/proxgen/proxgen/nn/train"
)

// runState is the program's part of the checkpoint (train.State.JSON).
type runState struct {
	// Config holds every setting of the run.
	Config *config `json:"config"`
	// Frozen records that the binarised weights were hard-quantised.
	Frozen bool `json:"frozen"`
	// BinScales are the binarised tensors' scales s with -bin-scale mean
	// for a W-shaped regularizer (experiment.Method.BinaryScales), set at
	// the start of each epoch; absent in checkpoints written before them.
	BinScales []float64 `json:"bin_scales,omitempty"`
	// Correct counts the correctly classified training images of the
	// current epoch.
	Correct int `json:"correct"`
	// RNG is the state of the method's random stream (ℓ0 gates).
	RNG []byte `json:"rng,omitempty"`
	// Pruned lists the filters -prune-filters or -prune-flops zeroed, by
	// layer (prune.Mask.Filters).
	Pruned map[string][]int `json:"pruned,omitempty"`
	// BestEpoch is the epoch (from 1) with the best test accuracy so far,
	// BestAcc that accuracy; the weights the network computed with then
	// are the state tensors under bestState. 0 before the first
	// evaluation (and in checkpoints written before best.safetensors).
	BestEpoch int     `json:"best_epoch,omitempty"`
	BestAcc   float64 `json:"best_acc,omitempty"`
	// RecalPruned is the number of batches of the batch-norm
	// recalibration after pruning, reported with the first epoch.
	RecalPruned int `json:"recal_pruned,omitempty"`
}

// BestFile is the model file of the epoch with the best test accuracy.
const BestFile = "best.safetensors"

// bestState prefixes the state tensors of the best model.
const bestState = "best/"

// trainer trains one model with one method on CIFAR-10: the step and
// evaluation functions of a train.Loop.
type trainer struct {
	cfg   *config
	model nn.Module
	// evalNet computes model's evaluation-mode outputs in evaluate when
	// not nil (-eval-only: infer.Prepare's sparse layers).
	evalNet nn.Module
	meth    *experiment.Method
	// scalesRestored is set when a resumed run's checkpoint held the
	// binary scales of the epoch it stopped in.
	scalesRestored bool
	train, test    *cifar10.Split
	perEpoch       int
	prog           *train.Progress
	stdout         io.Writer
	// trainCtx and evalCtx are the contexts of training steps and of
	// evaluation (NoGrad); each has an arena reset before every batch.
	trainCtx, evalCtx *autograd.Context

	loader  *cifar10.Loader // of the current epoch
	correct int             // correctly classified images of the epoch
	frozen  bool
	lambda  float64 // per-step λ of the current epoch
	lr      float64 // step size of the current epoch's first update
	// mask holds the filters pruned before training at zero.
	mask *prune.Mask
	// best is the model of bestEpoch (from 1; 0: none yet), whose test
	// accuracy is bestAcc.
	best      experiment.BestModel
	bestEpoch int
	bestAcc   float64
	// recalPruned is the number of batches of the recalibration after
	// pruning (0: none).
	recalPruned int
	// gmp is the gradual magnitude pruner of -gmp (nil: none).
	gmp *experiment.GMP
}

// gmpState prefixes the masks of -gmp in the run state.
const gmpState = "gmp/"

// loop returns the train.Loop of the run.
func (t *trainer) loop() *train.Loop {
	return &train.Loop{
		Dir: t.cfg.Out, Epochs: t.cfg.Epochs, StepsPerEpoch: t.perEpoch, SaveEvery: t.cfg.SaveEvery,
		Model: t.model, Aux: t.meth.Aux(), Optimizer: t.meth.Opt, Progress: t.prog,
		BeginEpoch: t.beginEpoch, Step: t.step, Update: t.update, EndEpoch: t.endEpoch,
		Status: func(s train.EpochStats) string {
			return fmt.Sprintf("acc %5.2f%%", 100*float64(t.correct)/float64(max(s.Samples, 1)))
		},
		SaveState: t.saveState, LoadState: t.loadState,
		Outputs: t.outputs(), Metadata: modelMetadata(t.cfg),
	}
}

// beginEpoch sets the epoch's hyperparameters and starts its loader after
// the start batches already done.
func (t *trainer) beginEpoch(ctx context.Context, epoch, start int) error {
	c := t.cfg
	if start > 0 && t.scalesRestored {
		t.meth.ResumeEpoch(epoch) // the scales of the epoch's start, from the checkpoint
	} else {
		t.meth.SetEpoch(epoch)
	}
	t.lambda = t.meth.LambdaAt(epoch)
	t.lr = t.meth.LRAt(epoch * t.perEpoch)
	t.model.SetTraining(true)
	if c.pruning() && t.mask == nil {
		if err := t.prune(); err != nil {
			return err
		}
		// The pruned filters' channels changed the statistics of the
		// layers after them.
		n, err := t.recalibrate(ctx, epoch)
		if err != nil {
			return err
		}
		t.recalPruned = n
		t.model.SetTraining(true)
	}
	t.closeLoader()
	t.loader = cifar10.NewLoader(t.train, cifar10.LoaderConfig{
		BatchSize: c.Batch, Shuffle: true, Augment: !c.NoAugment, DropLast: true,
		Seed: c.Seed, Epoch: epoch, StartBatch: start,
	})
	return nil
}

func (t *trainer) closeLoader() {
	if t.loader != nil {
		t.loader.Close()
		t.loader = nil
	}
}

// step runs forward and backward on the next batch.
func (t *trainer) step(epoch, step int) (float64, int, error) {
	b, ok := t.loader.Next()
	if !ok {
		return 0, 0, fmt.Errorf("epoch %d ended after %d of %d batches", epoch+1, step, t.perEpoch)
	}
	t.meth.Opt.ZeroGrad()
	t.trainCtx.Arena.Reset()
	extra := t.meth.GraphTerms(t.trainCtx)
	x := autograd.FromSlice(b.X, b.N, cifar10.Channels, cifar10.Height, cifar10.Width).In(t.trainCtx)
	logits := t.model.Forward(x)
	l := autograd.CrossEntropy(logits, b.Y)
	total := l
	if extra != nil {
		total = autograd.Add(l, extra)
	}
	total.Backward()
	t.correct += countCorrect(logits, b.Y)
	loss := float64(l.Item())
	t.loader.Recycle(b)
	return loss, b.N, nil
}

// update applies the optimizer after step.
func (t *trainer) update() error {
	t.meth.EndStep()
	t.meth.Opt.Step()
	if t.mask != nil {
		t.mask.Apply()
	}
	if t.gmp != nil {
		t.gmp.Step(t.meth.Opt.Steps())
	}
	return nil
}

// prune zeroes the filters -prune-filters, -prune-flops or -prune-multiple select, once,
// before the first step of a new run (a resumed run restores the mask).
func (t *trainer) prune() error {
	c := t.cfg
	mask, err := prune.Filters(t.model, prune.Options{Fraction: c.PruneFilters, KeepFLOPs: c.PruneFLOPs, Multiple: c.PruneMultiple, Residual: c.PruneResidual})
	if err != nil {
		return fmt.Errorf("pruning: %w", err)
	}
	t.mask = mask
	r, err := t.remaining()
	if err != nil {
		return err
	}
	t.prog.Logf("pruned %d filters: %d of %d channels, %.1f%% of the parameters and %.1f%% of the FLOPs left",
		mask.Len(), r.Channels, r.ChannelsTotal, 100*r.ParamsRatio(), 100*r.FLOPsRatio())
	return nil
}

// remaining returns what is left of the network the model computes with
// after removing its removable channels.
func (t *trainer) remaining() (prune.Count, error) {
	t.meth.UseEffective()
	defer t.meth.Restore()
	return prune.CountModel(t.model, cifar10.Height, cifar10.Width)
}

// endEpoch hard-quantises when due, evaluates, prints and returns the
// epoch's metrics.
func (t *trainer) endEpoch(ctx context.Context, epoch int, s train.EpochStats) (any, error) {
	c := t.cfg
	t.closeLoader()
	var recal int // batches of a recalibration after this epoch
	var err error
	if c.HardQuantEpoch > 0 && epoch+1 == c.HardQuantEpoch {
		// Repeating this after an interrupted evaluation changes nothing.
		t.meth.HardQuantize()
		t.frozen = true
		t.prog.Logf("epoch %d: binarised weights set to s·sign(w) (s = 1, or the tensor's scale with -bin-scale mean) and frozen", epoch+1)
		// The running statistics were estimated with the real-valued
		// weights: re-estimate them with the binary ones.
		if recal, err = t.recalibrate(ctx, epoch); err != nil {
			return nil, err
		}
	}
	if g := t.gmp; g != nil && max(g.End, 1) > epoch*t.perEpoch && max(g.End, 1) <= (epoch+1)*t.perEpoch {
		// The last pruning step of -gmp was in this epoch (update 1 for
		// -gmp-end 0).
		if recal, err = t.recalibrate(ctx, epoch); err != nil {
			return nil, err
		}
		n, total := g.Pruned()
		t.prog.Logf("epoch %d: gradual pruning done, %d of %d weights pruned", epoch+1, n, total)
	}
	evalStart := time.Now()
	testLoss, testAcc, err := t.evaluate(ctx, t.test)
	if err != nil {
		return nil, err
	}
	ws := t.stats()
	rem, err := t.remaining()
	if err != nil {
		return nil, err
	}
	rec := EpochRecord{
		Epoch:        epoch + 1,
		Step:         t.meth.Opt.Steps(),
		Loss:         s.MeanLoss(),
		Penalty:      t.meth.Penalty(),
		TrainAcc:     float64(t.correct) / float64(s.Samples),
		TestLoss:     testLoss,
		TestAcc:      testAcc,
		Zero:         ws.Zero,
		Small:        ws.Small,
		Below1e2:     ws.Below1e2,
		Filters:      ws.Filters,
		FiltersTotal: ws.FiltersTotal,
		Blocks:       ws.Blocks,
		BlocksTotal:  ws.BlocksTotal,
		LR:           t.lr,
		Lambda:       t.lambda,
		Seconds:      round3(s.Seconds),
		EvalSeconds:  round3(time.Since(evalStart).Seconds()),
		Layers:       ws.Layers,
		FLOPsRatio:   rem.FLOPsRatio(),
		ParamsRatio:  rem.ParamsRatio(),
		Remaining:    &rem,
		Recalibrated: recal,
	}
	if t.recalPruned > 0 && epoch == 0 {
		rec.Recalibrated = t.recalPruned
	}
	rec.Objective = rec.Loss + rec.Penalty
	if s.Seconds > 0 {
		rec.ImgPerS = math.Round(float64(s.Samples) / s.Seconds)
	}
	if c.binary() {
		v := ws.PM1
		rec.Binary = &v
	}
	if p := t.meth.Plateau(); p != nil {
		p.Observe(testLoss)
	}
	if t.bestEpoch == 0 || testAcc > t.bestAcc {
		t.meth.UseEffective()
		t.best.Keep(t.model)
		t.meth.Restore()
		t.bestEpoch, t.bestAcc = epoch+1, testAcc
	}
	t.correct = 0
	t.printEpoch(&rec)
	return &rec, nil
}

// saveState returns the program's part of a checkpoint.
func (t *trainer) saveState() (train.State, error) {
	rng, err := t.meth.RNGState()
	if err != nil {
		return train.State{}, fmt.Errorf("saving the random state: %w", err)
	}
	st := &runState{Config: t.cfg, Frozen: t.frozen, BinScales: t.meth.BinaryScales(), Correct: t.correct, RNG: rng, BestEpoch: t.bestEpoch, BestAcc: t.bestAcc, RecalPruned: t.recalPruned}
	if t.mask != nil {
		st.Pruned = t.mask.Filters()
	}
	b, err := json.Marshal(st)
	s := train.State{JSON: b}
	if t.best.Has() || t.gmp != nil {
		s.Tensors = map[string][]float32{}
	}
	if t.best.Has() {
		t.best.AddTo(s.Tensors, bestState)
	}
	if t.gmp != nil {
		for name, m := range t.gmp.Masks() {
			s.Tensors[gmpState+name] = m
		}
	}
	return s, err
}

// loadState restores what saveState saved; the configuration was read
// before (readStoredRun).
func (t *trainer) loadState(s train.State) error {
	var st runState
	if err := json.Unmarshal(s.JSON, &st); err != nil {
		return fmt.Errorf("bad run state: %w", err)
	}
	if st.Correct < 0 || st.BestEpoch < 0 || st.RecalPruned < 0 || !(st.BestAcc >= 0 && st.BestAcc <= 1) {
		return fmt.Errorf("bad run state: %d correct images, best epoch %d, best accuracy %v", st.Correct, st.BestEpoch, st.BestAcc)
	}
	var best experiment.BestModel
	if st.BestEpoch > 0 {
		if err := best.LoadFrom(s.Tensors, bestState, t.model); err != nil {
			return err
		}
	}
	t.best, t.bestEpoch, t.bestAcc = best, st.BestEpoch, st.BestAcc
	if err := t.meth.SetRNGState(st.RNG); err != nil {
		return err
	}
	if st.BinScales != nil {
		if err := t.meth.SetBinaryScales(st.BinScales); err != nil {
			return fmt.Errorf("bad run state: %w", err)
		}
		t.scalesRestored = true
	}
	t.frozen, t.correct, t.recalPruned = st.Frozen, st.Correct, st.RecalPruned
	if t.cfg.pruning() {
		mask, err := prune.NewMask(t.model, st.Pruned)
		if err != nil {
			return fmt.Errorf("bad run state: %w", err)
		}
		t.mask = mask
	}
	if t.frozen {
		t.meth.Freeze()
	}
	if t.gmp != nil {
		masks := map[string][]float32{}
		for name, m := range s.Tensors {
			if n, ok := strings.CutPrefix(name, gmpState); ok {
				masks[n] = m
			}
		}
		if err := t.gmp.SetMasks(masks); err != nil {
			return fmt.Errorf("bad run state: %v", err)
		}
	}
	return nil
}

// recalibrate re-estimates the batch-norm running statistics of the
// network, with the weights it computes with, over the first
// -recalibrate batches of epoch's training batches (shuffled and
// augmented as that epoch's, so the same batches after a resume), and
// returns the number of batches used. It leaves the model in evaluation
// mode. It stops with ctx.Err() when ctx is cancelled; running it again
// gives the same statistics (they are reset first).
func (t *trainer) recalibrate(ctx context.Context, epoch int) (int, error) {
	c := t.cfg
	if c.Recalibrate == 0 {
		return 0, nil
	}
	start := time.Now()
	n, err := recalibrateOn(ctx, t.model, t.meth, t.train, c, epoch)
	if err != nil {
		return 0, err
	}
	t.prog.Logf("batch-norm statistics re-estimated over %s (%.1f s)", cli.Count(n, "training batch"), time.Since(start).Seconds())
	return n, nil
}

// recalibrateOn re-estimates the batch-norm statistics of model (with the
// weights meth computes with) over the first c.Recalibrate batches of
// epoch's shuffled, augmented training batches of split
// (nn.RecalibrateBatchNorm) and returns the number of batches used.
func recalibrateOn(ctx context.Context, model nn.Module, meth *experiment.Method, split *cifar10.Split, c *config, epoch int) (int, error) {
	meth.UseEffective()
	defer meth.Restore()
	l := cifar10.NewLoader(split, cifar10.LoaderConfig{
		BatchSize: min(c.Batch, split.Len()), Shuffle: true, Augment: !c.NoAugment, DropLast: true, Seed: c.Seed, Epoch: epoch,
	})
	defer l.Close()
	batches := func(yield func(*autograd.Tensor) bool) {
		for b, ok := l.Next(); ok && ctx.Err() == nil; b, ok = l.Next() {
			more := yield(autograd.FromSlice(b.X, b.N, cifar10.Channels, cifar10.Height, cifar10.Width))
			l.Recycle(b)
			if !more {
				return
			}
		}
	}
	n := nn.RecalibrateBatchNorm(model, batches, c.Recalibrate)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return n, nil
}

// countCorrect returns how many rows of logits (N, classes) have their
// largest value at the label (the first maximum on ties, as argmax).
func countCorrect(logits *autograd.Tensor, labels []int) int {
	n, k := logits.Dim(0), logits.Dim(1)
	correct := 0
	for i := range n {
		row := logits.Data[i*k : (i+1)*k]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best == labels[i] {
			correct++
		}
	}
	return correct
}

// evaluate returns the mean cross-entropy and the accuracy of the model in
// evaluation mode on split. It stops with ctx.Err() when ctx is cancelled.
func (t *trainer) evaluate(ctx context.Context, split *cifar10.Split) (loss, acc float64, err error) {
	t.model.SetTraining(false)
	defer t.model.SetTraining(true)
	t.meth.UseEffective()
	defer t.meth.Restore()
	// A batch larger than the split is the whole split: the loader's
	// buffers never exceed the data.
	l := cifar10.NewLoader(split, cifar10.LoaderConfig{BatchSize: max(1, min(t.cfg.EvalBatch, split.Len()))})
	defer l.Close()
	// Training and evaluation never run at the same time: each phase hands
	// its arena's buffers to the other instead of both being held.
	t.releaseArena(t.trainCtx)
	defer t.releaseArena(t.evalCtx)
	var sum float64
	correct, done := 0, 0
	for b, ok := l.Next(); ok; b, ok = l.Next() {
		// The network sees at most a training batch at a time: the
		// evaluation arena holds every activation of the forward pass, so
		// its size grows with the images per pass, not with -eval-batch.
		for lo := 0; lo < b.N; lo += t.cfg.Batch {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			hi := min(lo+t.cfg.Batch, b.N)
			t.evalCtx.Arena.Reset()
			x := autograd.FromSlice(b.X[lo*cifar10.ImageSize:hi*cifar10.ImageSize], hi-lo,
				cifar10.Channels, cifar10.Height, cifar10.Width).In(t.evalCtx)
			net := t.model
			if t.evalNet != nil {
				net = t.evalNet
			}
			logits := net.Forward(x)
			sum += float64(autograd.CrossEntropySum(logits, b.Y[lo:hi]).Item())
			correct += countCorrect(logits, b.Y[lo:hi])
		}
		l.Recycle(b)
		done++
		t.prog.EvalUpdate(done, l.NumBatches())
	}
	n := float64(split.Len())
	return sum / n, float64(correct) / n, nil
}

// releaseArena drops the buffers of the arena of ops (which may be nil)
// and collects them, so that the next phase reuses their memory.
func (t *trainer) releaseArena(ops *autograd.Context) {
	if ops == nil || ops.Arena == nil || ops.Arena.Bytes() == 0 {
		return
	}
	ops.Arena = autograd.NewArena()
	runtime.GC()
}

// stats returns the statistics of the weights the network computes with.
func (t *trainer) stats() experiment.WeightStats {
	t.meth.UseEffective()
	defer t.meth.Restore()
	s := experiment.ComputeWeightStatsAt(t.meth.Weights, t.meth.BinaryScale)
	if !t.cfg.binary() {
		for i := range s.Layers {
			s.Layers[i].PM1 = 0
		}
	}
	return s
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// printEpoch writes the epoch's metrics to stdout: the JSON line with
// -json, a readable line otherwise.
func (t *trainer) printEpoch(r *EpochRecord) {
	t.prog.Interrupt()
	if t.cfg.JSON {
		line, _ := train.MarshalJSON(r)
		fmt.Fprintf(t.stdout, "%s\n", line)
		return
	}
	bin := ""
	if r.Binary != nil {
		bin = fmt.Sprintf("%s %.2f%%", t.cfg.binaryLevels(), 100**r.Binary)
	}
	// One line on a wide terminal, more lines (indented) on a narrow one.
	fmt.Fprintln(t.stdout, train.WrapFields(train.TerminalWidth(t.stdout), "  ", []string{
		fmt.Sprintf("epoch %d/%d", r.Epoch, t.cfg.Epochs), fmt.Sprintf("loss %.4f", r.Loss), fmt.Sprintf("obj %.4f", r.Objective),
		fmt.Sprintf("train %.2f%%", 100*r.TrainAcc), fmt.Sprintf("test %.2f%% (loss %.4f)", 100*r.TestAcc, r.TestLoss),
		fmt.Sprintf("zeros %.2f%%", 100*r.Zero), fmt.Sprintf("|w|<1e-3 %.2f%%", 100*r.Small), bin,
		fmt.Sprintf("lr %.3g", r.LR), fmt.Sprintf("λ %.3g", r.Lambda), fmt.Sprintf("%.1f s", r.Seconds), fmt.Sprintf("%.0f img/s", r.ImgPerS),
	}))
}

// Summary describes a finished run.
type Summary struct {
	Model     string  `json:"model"`
	Optimizer string  `json:"optimizer"`
	Reg       string  `json:"reg"`
	Epochs    int     `json:"epochs"`
	Params    int     `json:"params"`
	TestAcc   float64 `json:"test_acc"`
	BestAcc   float64 `json:"best_test_acc"`
	BestEpoch int     `json:"best_epoch"`
	TestLoss  float64 `json:"test_loss"`
	Zero      float64 `json:"zero_ratio"`
	Small     float64 `json:"small_ratio"`
	Below1e2  float64 `json:"below_1e2_ratio"`
	// Filters of FiltersTotal output filters hold a non-zero weight.
	Filters      int `json:"filters"`
	FiltersTotal int `json:"filters_total"`
	// Blocks of BlocksTotal blocks of 16 output channels at one input
	// position (prox.ByBlock) hold a non-zero weight.
	Blocks      int      `json:"blocks"`
	BlocksTotal int      `json:"blocks_total"`
	Binary      *float64 `json:"binary_ratio,omitempty"`
	// FLOPsRatio and ParamsRatio are the fractions of the dense network's
	// FLOPs and parameters that remain once the removable channels are
	// removed; Remaining has the counts, in total and per layer.
	FLOPsRatio  float64      `json:"flops_ratio"`
	ParamsRatio float64      `json:"params_ratio"`
	Remaining   *prune.Count `json:"remaining,omitempty"`
	// RecalibratedEpochs lists the epochs (from 1) in which the
	// batch-norm statistics were re-estimated (EpochRecord.Recalibrated).
	RecalibratedEpochs []int `json:"recalibrated_epochs,omitempty"`
	// Init is the file the run started from (-weights, a warm start) and
	// InitSHA256 the SHA-256 of its bytes; empty for a run from scratch.
	Init       string  `json:"init,omitempty"`
	InitSHA256 string  `json:"init_sha256,omitempty"`
	Seconds    float64 `json:"train_seconds"`
	Out        string  `json:"out"`
	Config     *config `json:"config"`
}

// makeSummary summarises the history h of the run.
func (t *trainer) makeSummary(h []EpochRecord) Summary {
	s := Summary{Model: t.cfg.Model, Optimizer: t.cfg.Optimizer, Reg: t.cfg.Reg, Epochs: len(h),
		Params: nn.NumParams(t.model), Out: t.cfg.Out, Config: t.cfg, Init: t.cfg.Weights, InitSHA256: t.cfg.WeightsSHA256}
	for _, r := range h {
		s.Seconds += r.Seconds
		if r.Recalibrated > 0 {
			s.RecalibratedEpochs = append(s.RecalibratedEpochs, r.Epoch)
		}
		if r.TestAcc > s.BestAcc || s.BestEpoch == 0 {
			s.BestAcc, s.BestEpoch = r.TestAcc, r.Epoch
		}
	}
	if len(h) > 0 {
		last := h[len(h)-1]
		s.TestAcc, s.TestLoss = last.TestAcc, last.TestLoss
		s.Zero, s.Small, s.Below1e2, s.Binary = last.Zero, last.Small, last.Below1e2, last.Binary
		s.Filters, s.FiltersTotal = last.Filters, last.FiltersTotal
		s.Blocks, s.BlocksTotal = last.Blocks, last.BlocksTotal
		s.FLOPsRatio, s.ParamsRatio, s.Remaining = last.FLOPsRatio, last.ParamsRatio, last.Remaining
	}
	s.Seconds = round3(s.Seconds)
	return s
}

// printSummary writes the run's summary in readable form, its lines
// wrapped to the terminal's width.
func printSummary(out io.Writer, s Summary, files []string) {
	var w strings.Builder
	defer func() { fmt.Fprint(out, train.WrapText(train.TerminalWidth(out), strings.Repeat(" ", 18), w.String())) }()
	fmt.Fprintf(&w, "\n%s trained with %s (%s) for %s, %s, %s of training\n",
		s.Model, s.Optimizer, s.Reg, cli.Count(s.Epochs, "epoch"), cli.Count(s.Params, "parameter"), train.FormatDuration(s.Seconds))
	fmt.Fprintf(&w, "  test accuracy   %.2f%% (best %.2f%% at epoch %d, in best.safetensors), test loss %.4f\n", 100*s.TestAcc, 100*s.BestAcc, s.BestEpoch, s.TestLoss)
	fmt.Fprintf(&w, "  weights         %.2f%% exactly zero, %.2f%% below 1e-3, %.2f%% below 1e-2\n", 100*s.Zero, 100*s.Small, 100*s.Below1e2)
	fmt.Fprintf(&w, "  filters         %d of %d output filters non-zero\n", s.Filters, s.FiltersTotal)
	if r := s.Remaining; r != nil {
		fmt.Fprintf(&w, "  compacted       %d of %d channels, %d of %d parameters (%.2f%%), %d of %d FLOPs (%.2f%%)\n",
			r.Channels, r.ChannelsTotal, r.Params, r.ParamsTotal, 100*s.ParamsRatio, r.FLOPs, r.FLOPsTotal, 100*s.FLOPsRatio)
	}
	if s.Binary != nil {
		fmt.Fprintf(&w, "  binarised       %.2f%% at exactly ±s (s = 1, or per tensor with -bin-scale mean)\n", 100**s.Binary)
	}
	if s.Init != "" {
		fmt.Fprintf(&w, "  started from    %s (sha256 %s)\n", s.Init, s.InitSHA256)
	}
	if len(s.RecalibratedEpochs) > 0 {
		fmt.Fprintf(&w, "  batch norm      statistics re-estimated in epochs %v\n", s.RecalibratedEpochs)
	}
	if len(files) > 0 {
		fmt.Fprintf(&w, "  files           %s\n", files[0])
		for _, f := range files[1:] {
			fmt.Fprintf(&w, "                  %s\n", f)
		}
	}
}
