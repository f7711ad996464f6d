package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim"
)

// errInterrupted reports that training stopped on a signal after saving a
// checkpoint.
var errInterrupted = errors.New("interrupted")

// runState is the progress of a run, stored in the training-state file
// next to the model and optimizer state.
type runState struct {
	// Epoch is the number of completed epochs; Batch the number of
	// batches done in the epoch after them (non-zero only in a checkpoint
	// written inside an epoch).
	Epoch int `json:"epoch"`
	Batch int `json:"batch"`
	// Frozen records that the binarised weights were hard-quantised.
	Frozen bool `json:"frozen"`
	// LossSum, Correct, Seen and Seconds accumulate the current epoch.
	LossSum float64 `json:"loss_sum"`
	Correct int     `json:"correct"`
	Seen    int     `json:"seen"`
	Seconds float64 `json:"seconds"`
	// History holds the metrics of the completed epochs.
	History []epochRecord `json:"history"`
	// RNG is the state of the method's random stream (ℓ0 gates).
	RNG []byte `json:"rng,omitempty"`
}

// trainer trains one model with one method on CIFAR-10.
type trainer struct {
	cfg         *config
	model       nn.Module
	meth        *method
	train, test *cifar10.Split
	perEpoch    int
	state       runState
	prog        *progress
	stdout      io.Writer
	// trainCtx and evalCtx are the contexts of training steps and of
	// evaluation (NoGrad); each has an arena reset before every batch.
	trainCtx, evalCtx *autograd.Context
	// save writes a checkpoint of the current state; nil disables saving
	// (evaluation only).
	save func() error
}

// stepResult is the outcome of one training step.
type stepResult struct {
	loss    float64
	correct int
}

// step runs forward, backward and the optimizer update on one batch.
func (t *trainer) step(b cifar10.Batch) stepResult {
	var r stepResult
	t.meth.opt.ZeroGrad()
	t.trainCtx.Arena.Reset()
	extra := t.meth.graphTerms(t.trainCtx)
	x := autograd.FromSlice(b.X, b.N, cifar10.Channels, cifar10.Height, cifar10.Width).In(t.trainCtx)
	logits := t.model.Forward(x)
	loss := autograd.CrossEntropy(logits, b.Y)
	total := loss
	if extra != nil {
		total = autograd.Add(loss, extra)
	}
	total.Backward()
	r.loss = float64(loss.Item())
	r.correct = countCorrect(logits, b.Y)
	t.meth.endStep()
	t.meth.opt.Step()
	return r
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
// evaluation mode on split.
func (t *trainer) evaluate(split *cifar10.Split) (loss, acc float64) {
	t.model.SetTraining(false)
	defer t.model.SetTraining(true)
	t.meth.useEffective()
	defer t.meth.restore()
	l := cifar10.NewLoader(split, cifar10.LoaderConfig{BatchSize: t.cfg.EvalBatch})
	defer l.Close()
	var sum float64
	correct := 0
	for b, ok := l.Next(); ok; b, ok = l.Next() {
		t.evalCtx.Arena.Reset()
		x := autograd.FromSlice(b.X, b.N, cifar10.Channels, cifar10.Height, cifar10.Width).In(t.evalCtx)
		logits := t.model.Forward(x)
		sum += float64(autograd.CrossEntropySum(logits, b.Y).Item())
		correct += countCorrect(logits, b.Y)
	}
	n := float64(split.Len())
	return sum / n, float64(correct) / n
}

// stats returns the statistics of the weights the network computes with.
func (t *trainer) stats() weightStats {
	t.meth.useEffective()
	defer t.meth.restore()
	s := computeWeightStats(t.meth.weights)
	if !t.cfg.binary() {
		for i := range s.Layers {
			s.Layers[i].PM1 = 0
		}
	}
	return s
}

// runEpochs trains from the current state to the last epoch, checkpointing
// at every epoch end (and every -save-every batches), and stops early,
// after checkpointing, when ctx is cancelled.
func (t *trainer) runEpochs(ctx context.Context) error {
	for t.state.Epoch < t.cfg.Epochs {
		if err := t.trainEpoch(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil && t.state.Epoch < t.cfg.Epochs {
			t.prog.logf("interrupted after epoch %d; checkpoint saved in %s (continue with -resume)", t.state.Epoch, t.cfg.Out)
			return errInterrupted
		}
	}
	return nil
}

// trainEpoch trains (the rest of) epoch t.state.Epoch, evaluates and
// checkpoints.
func (t *trainer) trainEpoch(ctx context.Context) error {
	c, st := t.cfg, &t.state
	epoch := st.Epoch
	t.meth.setEpoch(epoch)
	lambda := t.meth.lambdaAt(epoch)
	lr := t.meth.lr()
	t.model.SetTraining(true)
	l := cifar10.NewLoader(t.train, cifar10.LoaderConfig{
		BatchSize: c.Batch, Shuffle: true, Augment: !c.NoAugment, DropLast: true,
		Seed: c.Seed, Epoch: epoch, StartBatch: st.Batch,
	})
	defer l.Close()
	remaining := (c.Epochs - epoch - 1) * t.perEpoch
	t.prog.begin(epoch+1, c.Epochs, t.perEpoch, st.Batch, remaining)
	start := time.Now()
	sessionImages := 0
	secondsBefore := st.Seconds
	for b, ok := l.Next(); ok; b, ok = l.Next() {
		r := t.step(b)
		if math.IsNaN(r.loss) || math.IsInf(r.loss, 0) {
			t.prog.interrupt()
			return fmt.Errorf("training diverged: loss %v at epoch %d batch %d (the last good checkpoint is in %s)", r.loss, epoch+1, st.Batch+1, c.Out)
		}
		st.Batch++
		st.LossSum += r.loss * float64(b.N)
		st.Correct += r.correct
		st.Seen += b.N
		sessionImages += b.N
		st.Seconds = secondsBefore + time.Since(start).Seconds()
		t.prog.update(st.Batch, st.LossSum/float64(st.Seen), float64(st.Correct)/float64(st.Seen), sessionImages)
		if st.Batch == t.perEpoch {
			break
		}
		interrupted := ctx.Err() != nil
		if interrupted || (c.SaveEvery > 0 && st.Batch%c.SaveEvery == 0) {
			if err := t.checkpoint(); err != nil {
				return err
			}
			if interrupted {
				t.prog.logf("interrupted in epoch %d after batch %d/%d; checkpoint saved in %s (continue with -resume)", epoch+1, st.Batch, t.perEpoch, c.Out)
				return errInterrupted
			}
		}
	}
	l.Close()
	if st.Batch != t.perEpoch {
		return fmt.Errorf("epoch %d ended after %d of %d batches", epoch+1, st.Batch, t.perEpoch)
	}
	trainSeconds := st.Seconds

	if c.HardQuantEpoch > 0 && epoch+1 == c.HardQuantEpoch {
		t.meth.hardQuantize()
		st.Frozen = true
		t.prog.logf("epoch %d: binarised weights set to sign(w) and frozen", epoch+1)
	}
	evalStart := time.Now()
	testLoss, testAcc := t.evaluate(t.test)
	ws := t.stats()
	rec := epochRecord{
		Epoch:       epoch + 1,
		Step:        t.meth.opt.Steps(),
		Loss:        st.LossSum / float64(st.Seen),
		Penalty:     t.meth.penalty(),
		TrainAcc:    float64(st.Correct) / float64(st.Seen),
		TestLoss:    testLoss,
		TestAcc:     testAcc,
		Zero:        ws.Zero,
		Small:       ws.Small,
		Below1e2:    ws.Below1e2,
		LR:          lr,
		Lambda:      lambda,
		Seconds:     round3(trainSeconds),
		EvalSeconds: round3(time.Since(evalStart).Seconds()),
		Layers:      ws.Layers,
	}
	rec.Objective = rec.Loss + rec.Penalty
	if trainSeconds > 0 {
		rec.ImgPerS = math.Round(float64(st.Seen) / trainSeconds)
	}
	if c.binary() {
		v := ws.PM1
		rec.Binary = &v
	}
	if p, ok := t.meth.sched.(*optim.ReduceOnPlateau); ok {
		p.Observe(testLoss)
	}
	st.History = append(st.History, rec)
	st.Epoch++
	st.Batch, st.LossSum, st.Correct, st.Seen, st.Seconds = 0, 0, 0, 0, 0
	t.printEpoch(&rec)
	return t.checkpoint()
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// printEpoch writes the epoch's metrics to stdout: the JSON line with
// -json, a readable line otherwise.
func (t *trainer) printEpoch(r *epochRecord) {
	t.prog.interrupt()
	if t.cfg.JSON {
		_ = writeJSONL(t.stdout, []epochRecord{*r})
		return
	}
	bin := ""
	if r.Binary != nil {
		bin = fmt.Sprintf(" ±1 %.2f%%", 100**r.Binary)
	}
	fmt.Fprintf(t.stdout, "epoch %d/%d loss %.4f obj %.4f train %.2f%% test %.2f%% (loss %.4f) zeros %.2f%% |w|<1e-3 %.2f%%%s lr %.3g λ %.3g %.1f s %.0f img/s\n",
		r.Epoch, t.cfg.Epochs, r.Loss, r.Objective, 100*r.TrainAcc, 100*r.TestAcc, r.TestLoss,
		100*r.Zero, 100*r.Small, bin, r.LR, r.Lambda, r.Seconds, r.ImgPerS)
}

// checkpoint saves the current state if saving is enabled.
func (t *trainer) checkpoint() error {
	if t.save == nil {
		return nil
	}
	return t.save()
}

// summary describes a finished run.
type summary struct {
	Model     string   `json:"model"`
	Optimizer string   `json:"optimizer"`
	Reg       string   `json:"reg"`
	Epochs    int      `json:"epochs"`
	Params    int      `json:"params"`
	TestAcc   float64  `json:"test_acc"`
	BestAcc   float64  `json:"best_test_acc"`
	BestEpoch int      `json:"best_epoch"`
	TestLoss  float64  `json:"test_loss"`
	Zero      float64  `json:"zero_ratio"`
	Small     float64  `json:"small_ratio"`
	Below1e2  float64  `json:"below_1e2_ratio"`
	Binary    *float64 `json:"binary_ratio,omitempty"`
	Seconds   float64  `json:"train_seconds"`
	Out       string   `json:"out"`
	Config    *config  `json:"config"`
}

// makeSummary summarises the history of the run.
func (t *trainer) makeSummary() summary {
	h := t.state.History
	s := summary{Model: t.cfg.Model, Optimizer: t.cfg.Optimizer, Reg: t.cfg.Reg, Epochs: len(h),
		Params: nn.NumParams(t.model), Out: t.cfg.Out, Config: t.cfg}
	for _, r := range h {
		s.Seconds += r.Seconds
		if r.TestAcc > s.BestAcc || s.BestEpoch == 0 {
			s.BestAcc, s.BestEpoch = r.TestAcc, r.Epoch
		}
	}
	if len(h) > 0 {
		last := h[len(h)-1]
		s.TestAcc, s.TestLoss = last.TestAcc, last.TestLoss
		s.Zero, s.Small, s.Below1e2, s.Binary = last.Zero, last.Small, last.Below1e2, last.Binary
	}
	s.Seconds = round3(s.Seconds)
	return s
}

// printSummary writes the run's summary in readable form.
func printSummary(w io.Writer, s summary, files []string) {
	fmt.Fprintf(w, "\n%s trained with %s (%s) for %d epochs, %d parameters, %s of training\n",
		s.Model, s.Optimizer, s.Reg, s.Epochs, s.Params, formatDuration(s.Seconds))
	fmt.Fprintf(w, "  test accuracy   %.2f%% (best %.2f%% at epoch %d), test loss %.4f\n", 100*s.TestAcc, 100*s.BestAcc, s.BestEpoch, s.TestLoss)
	fmt.Fprintf(w, "  weights         %.2f%% exactly zero, %.2f%% below 1e-3, %.2f%% below 1e-2\n", 100*s.Zero, 100*s.Small, 100*s.Below1e2)
	if s.Binary != nil {
		fmt.Fprintf(w, "  binarised       %.2f%% at exactly ±1\n", 100**s.Binary)
	}
	if len(files) > 0 {
		fmt.Fprintf(w, "  files           %s\n", files[0])
		for _, f := range files[1:] {
			fmt.Fprintf(w, "                  %s\n", f)
		}
	}
}
