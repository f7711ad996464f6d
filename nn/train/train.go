// Package train runs the training loop of a model and keeps its run
// folder: an epoch/step loop around the caller's step function, progress
// on a terminal or as lines, JSONL metrics, one crash-consistent
// checkpoint that resumes the run exactly, prompt interruption on a
// cancelled context, and a divergence guard that never saves a non-finite
// number.
//
// # The run folder
//
// A Loop with a Dir keeps in it:
//
//	train_state.safetensors       the checkpoint (CheckpointName)
//	train_state.prev.safetensors  the checkpoint before it (PrevCheckpointName)
//	metrics.jsonl                 one JSON line per finished epoch (MetricsName)
//	...                           the caller's Outputs (model file, plots, summary)
//
// The checkpoint is a single safetensors file that holds everything the
// run needs to continue: the model's state dict under "model/", the
// caller's auxiliary tensors under "aux/", the optimizer state under
// "optim/" and "optim_int/", the caller's tensors (State.Tensors) under
// "state/", and in its metadata the position (epoch and step), the
// accumulators of the current epoch, the loss the divergence bound is
// relative to, the metrics of every finished epoch, the caller's JSON
// (State.JSON: its configuration, random-number state, counters) and the
// generation number with the names of the derived files it was written
// with. PyTorch code that wants the model keeps the keys that start with
// "model/" and strips that prefix.
//
// Every save writes the derived files first (metrics.jsonl and the
// Outputs, each through a temporary file, fsync and rename) and the
// checkpoint last, through a temporary file, fsync, a hard link of the old
// checkpoint to train_state.prev.safetensors, a rename and an fsync of the
// folder. So the checkpoint on disk is always either the old one or the
// new one as a whole, and its generation is at most that of the derived
// files. A resumed run rewrites every derived file from the checkpoint
// before it continues, so derived files that a crash left older or newer
// than the checkpoint, or missing, are rebuilt; a resumed run that is
// already complete only rebuilds them and reports so. Run removes the
// temporary files of its own file names ("."+name+".tmp-*") that an
// interrupted write left behind.
//
// # Interruption
//
// When ctx is cancelled, Run finishes the current step (the step function
// should not watch ctx), saves a checkpoint and returns ErrInterrupted;
// an EndEpoch function should stop its evaluation when ctx is cancelled
// and return ctx.Err(), and Run then saves the checkpoint as it was before
// the evaluation, which a resumed run repeats. Programs map ErrInterrupted
// to their exit status (130 after SIGINT by convention).
//
// # Divergence guard
//
// Run checks the loss of every step before the update: a NaN or infinite
// loss, or one above MaxLossRatio (DefaultMaxLossRatio, 1e4) times the
// loss of the run's first step, stops the run with a *DivergedError. After
// the update it checks that every model tensor and auxiliary tensor is
// finite (one pass over the values per step). Before a checkpoint is
// written, every tensor it would hold (model, optimizer state, caller
// tensors) is checked too, so no checkpoint ever holds a non-finite
// number, and the error names the checkpoint that holds the last good
// state; that file loads and resumes.
//
// # Metrics
//
// Each EndEpoch record is encoded with MarshalJSON: as encoding/json does,
// except that NaN and ±Inf become null, so metrics of a diverging run or
// an overflowing perplexity never fail to encode.
//
// A Loop holds all its state in values the caller owns; several loops may
// run at once in one process.
package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/proxgen/proxgen/internal/atomicfile"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim"
)

// File names in a run folder.
const (
	CheckpointName     = "train_state.safetensors"
	PrevCheckpointName = "train_state.prev.safetensors"
	MetricsName        = "metrics.jsonl"
)

// DefaultMaxLossRatio is the default divergence bound: a step loss above
// this multiple of the run's first step loss stops the run.
const DefaultMaxLossRatio = 1e4

// ErrInterrupted is returned by Run when ctx was cancelled and the
// checkpoint was saved.
var ErrInterrupted = errors.New("train: interrupted")

// DivergedError reports that training diverged. The run folder still
// holds the last good checkpoint (Checkpoint; empty without a folder).
type DivergedError struct {
	Epoch, Step int    // 1-based position of the failing step
	What        string // what was not finite or too large
	Checkpoint  string
}

func (e *DivergedError) Error() string {
	where := "no checkpoint is kept (no run folder)"
	if e.Checkpoint != "" {
		where = "the last good checkpoint is in " + e.Checkpoint
	}
	return fmt.Sprintf("training diverged: %s at epoch %d step %d (%s)", e.What, e.Epoch, e.Step, where)
}

// Resumable is the part of an optimizer a checkpoint needs: its state
// out and back in (every optim.Optimizer implements it).
type Resumable interface {
	State() *optim.State
	LoadState(*optim.State) error
}

// State is the caller's part of a checkpoint.
type State struct {
	// JSON is stored as is (it must be valid JSON): the caller's
	// configuration, counters and random-number states.
	JSON json.RawMessage
	// Tensors are named float32 vectors (a carried recurrent state, a copy
	// of the best weights). They must be finite.
	Tensors map[string][]float32
}

// EpochStats are the accumulated figures of the epoch's training steps.
type EpochStats struct {
	Epoch   int     // counted from 0
	Steps   int     // steps of the epoch
	LossSum float64 // sum of loss × samples over the steps
	Samples int     // samples of the steps
	Seconds float64 // time spent in the steps, over all sessions
}

// MeanLoss returns the sample-weighted mean step loss.
func (s EpochStats) MeanLoss() float64 {
	if s.Samples == 0 {
		return math.NaN()
	}
	return s.LossSum / float64(s.Samples)
}

// Info describes the run to an Output.
type Info struct {
	Generation int               // generation of the checkpoint written with the output
	Epoch      int               // finished epochs
	Step       int               // steps done in the next epoch
	Complete   bool              // all epochs are done
	History    []json.RawMessage // the metrics records of the finished epochs
}

// Output is a file derived from the run's state, rewritten at every save
// and on resume.
type Output struct {
	// Name is the file name; a relative name is inside Dir.
	Name string
	// Final marks a file written only when the run is complete (a
	// summary); Run removes it when the run is not complete.
	Final bool
	// Data returns the file content; nil (with a nil error) means there
	// is no such file yet, and Run removes an old one.
	Data func(*Info) ([]byte, error)
}

// Loop describes a training run. Fields marked optional may be left zero.
type Loop struct {
	// Dir is the run folder; empty keeps no checkpoint and no files.
	Dir string
	// Epochs is the number of epochs of the run; StepsPerEpoch the steps
	// of each.
	Epochs, StepsPerEpoch int
	// SaveEvery (optional) also saves a checkpoint every SaveEvery steps
	// inside an epoch; epoch ends are always saved.
	SaveEvery int
	// MaxLossRatio (optional) is the divergence bound relative to the
	// first step's loss; 0 means DefaultMaxLossRatio, a negative value
	// disables the bound (not the finiteness checks).
	MaxLossRatio float64

	// Model is the network whose state dict is saved.
	Model nn.Module
	// Aux (optional) are further tensors of the run saved with the model
	// (for example ℓ0 gates), checked for finiteness like the model.
	Aux []nn.Param
	// Optimizer is saved and restored with the checkpoint.
	Optimizer Resumable
	// Progress (optional) reports the steps.
	Progress *Progress

	// BeginEpoch (optional) is called before the steps of epoch (from 0),
	// with start steps already done (a resumed epoch; start may equal
	// StepsPerEpoch when only the epoch's evaluation is left).
	BeginEpoch func(ctx context.Context, epoch, start int) error
	// Step computes the loss of step step (from 0) of epoch and its
	// gradients, without changing the parameters, and returns the loss and
	// the number of samples it covered.
	Step func(epoch, step int) (loss float64, samples int, err error)
	// Update applies the optimizer to the gradients of the last Step.
	Update func() error
	// Status (optional) returns extra text for the progress line, given
	// the epoch's figures so far.
	Status func(EpochStats) string
	// EndEpoch is called after the last step of epoch (from 0) and returns
	// the epoch's metrics record (encoded with MarshalJSON). It evaluates
	// the model and may update state (a schedule on a validation loss);
	// when ctx is cancelled it should return ctx.Err() promptly, leaving
	// the state as it was or changed in a way that repeating EndEpoch
	// after a resume gives the same result.
	EndEpoch func(ctx context.Context, epoch int, stats EpochStats) (record any, err error)
	// SaveState (optional) returns the caller's state for a checkpoint;
	// LoadState restores it on resume.
	SaveState func() (State, error)
	LoadState func(State) error
	// Outputs (optional) are the derived files besides metrics.jsonl.
	Outputs []Output

	// Metadata (optional) are further strings stored in the checkpoint's
	// metadata (for example what network it holds, for tools that read
	// only the model); the keys "format", "run" and "generation" are
	// Run's.
	Metadata map[string]string

	// Resume (optional) is the checkpoint to continue from (see
	// ReadCheckpoint). Without it, Run refuses a Dir that holds one.
	Resume *Checkpoint
}

// Result describes the end of a Run.
type Result struct {
	Epoch    int               // finished epochs
	Complete bool              // all Epochs are done
	Already  bool              // the resumed checkpoint was already complete
	Resumed  bool              // the run continued a checkpoint
	History  []json.RawMessage // metrics records of all finished epochs
	Steps    int               // steps run in this session
	Seconds  float64           // training time of all epochs, over all sessions
}

// position is the library's part of the checkpoint metadata.
type position struct {
	Generation  int               `json:"generation"`
	Outputs     []string          `json:"outputs"`
	Epoch       int               `json:"epoch"`
	Step        int               `json:"step"`
	LossSum     float64           `json:"loss_sum"`
	Samples     int               `json:"samples"`
	Seconds     float64           `json:"seconds"`
	PastSeconds float64           `json:"past_seconds"` // training seconds of the finished epochs
	InitialLoss float64           `json:"initial_loss"` // first step's loss; 0 before it
	History     []json.RawMessage `json:"history"`
	User        json.RawMessage   `json:"user,omitempty"`
}

// runner is one execution of a Loop.
type runner struct {
	l       *Loop
	pos     position
	faults  *faults
	tensors []nn.Param // model state and aux, checked after each update
}

func (l *Loop) check() error {
	switch {
	case l.Epochs < 1:
		return fmt.Errorf("train: Epochs = %d, want at least 1", l.Epochs)
	case l.StepsPerEpoch < 1:
		return fmt.Errorf("train: StepsPerEpoch = %d, want at least 1", l.StepsPerEpoch)
	case l.SaveEvery < 0:
		return fmt.Errorf("train: SaveEvery = %d, want >= 0", l.SaveEvery)
	case l.Model == nil || l.Optimizer == nil || l.Step == nil || l.Update == nil || l.EndEpoch == nil:
		return errors.New("train: Model, Optimizer, Step, Update and EndEpoch are required")
	case (l.SaveState == nil) != (l.LoadState == nil):
		return errors.New("train: SaveState and LoadState go together")
	}
	return nil
}

// path returns the path of a file of the run folder.
func (l *Loop) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(l.Dir, name)
}

// CheckpointPath returns the path of the checkpoint of the run folder.
func (l *Loop) CheckpointPath() string { return filepath.Join(l.Dir, CheckpointName) }

// Run trains from the start or from l.Resume to the last epoch. It
// returns ErrInterrupted after saving when ctx is cancelled, a
// *DivergedError when the guard stops the run, and other errors for
// failed steps, evaluations and writes; a checkpoint saved before an
// error stays intact.
func (l *Loop) Run(ctx context.Context) (*Result, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	f, err := parseFaults(os.Getenv(FaultEnv))
	if err != nil {
		return nil, err
	}
	r := &runner{l: l, faults: f, tensors: append(nn.StateDict(l.Model), l.Aux...)}
	if l.Dir != "" {
		if err := os.MkdirAll(l.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the run folder: %w", err)
		}
		names := []string{CheckpointName, PrevCheckpointName, MetricsName}
		for _, o := range l.Outputs {
			if !filepath.IsAbs(o.Name) && filepath.Dir(o.Name) == "." {
				names = append(names, o.Name)
			}
		}
		if err := atomicfile.RemoveStale(l.Dir, names); err != nil {
			return nil, err
		}
	}
	res := &Result{}
	if l.Resume != nil {
		if err := r.restore(l.Resume); err != nil {
			return nil, err
		}
		res.Resumed = true
		if r.pos.Epoch >= l.Epochs {
			// A finished run: rebuild the derived files only.
			if err := r.writeOutputs(r.pos.Generation); err != nil {
				return nil, err
			}
			res.Already = true
			return r.result(res), nil
		}
	} else if l.Dir != "" {
		if _, err := os.Lstat(l.CheckpointPath()); err == nil {
			return nil, fmt.Errorf("%s already holds a run (%s)", l.Dir, CheckpointName)
		}
		// Generation 0: the initial state, so a good checkpoint exists
		// from the start.
		if err := r.save(); err != nil {
			return nil, err
		}
	}
	if l.Dir != "" && l.Resume != nil {
		if err := r.removeFinal(); err != nil {
			return nil, err
		}
		if err := r.writeOutputs(r.pos.Generation); err != nil {
			return nil, err
		}
	}
	for r.pos.Epoch < l.Epochs {
		n, err := r.epoch(ctx)
		res.Steps += n
		if err != nil {
			return r.result(res), err
		}
		if ctx.Err() != nil && r.pos.Epoch < l.Epochs {
			l.Progress.Logf("interrupted after epoch %d; checkpoint saved in %s", r.pos.Epoch, r.where())
			return r.result(res), ErrInterrupted
		}
	}
	return r.result(res), nil
}

func (r *runner) where() string {
	if r.l.Dir == "" {
		return "no folder (none kept)"
	}
	return r.l.Dir
}

func (r *runner) result(res *Result) *Result {
	res.Epoch = r.pos.Epoch
	res.Complete = r.pos.Epoch >= r.l.Epochs
	res.History = r.pos.History
	res.Seconds = r.pos.PastSeconds
	return res
}

// epoch runs (the rest of) epoch r.pos.Epoch, evaluates and saves. It
// returns the number of steps it ran.
func (r *runner) epoch(ctx context.Context) (int, error) {
	l, p := r.l, &r.pos
	epoch := p.Epoch
	if l.BeginEpoch != nil {
		if err := l.BeginEpoch(ctx, epoch, p.Step); err != nil {
			return 0, err
		}
	}
	l.Progress.Begin(epoch+1, l.Epochs, l.StepsPerEpoch, p.Step, (l.Epochs-epoch-1)*l.StepsPerEpoch)
	start := time.Now()
	secondsBefore := p.Seconds
	samples, steps := 0, 0
	for p.Step < l.StepsPerEpoch {
		loss, n, err := l.Step(epoch, p.Step)
		if err != nil {
			l.Progress.Interrupt()
			return steps, err
		}
		if err := r.checkLoss(loss); err != nil {
			l.Progress.Interrupt()
			return steps, err
		}
		if err := l.Update(); err != nil {
			l.Progress.Interrupt()
			return steps, err
		}
		if err := r.checkTensors(); err != nil {
			l.Progress.Interrupt()
			return steps, err
		}
		if p.InitialLoss == 0 {
			p.InitialLoss = loss
		}
		p.Step++
		steps++
		p.LossSum += loss * float64(n)
		p.Samples += n
		samples += n
		p.Seconds = secondsBefore + time.Since(start).Seconds()
		if l.Progress != nil && l.Progress.mode != ProgressNone {
			status := ""
			if l.Status != nil {
				status = l.Status(EpochStats{Epoch: epoch, Steps: p.Step, LossSum: p.LossSum, Samples: p.Samples, Seconds: p.Seconds})
			}
			l.Progress.Update(p.Step, p.LossSum/float64(max(p.Samples, 1)), status, samples)
		}
		if p.Step == l.StepsPerEpoch {
			break
		}
		interrupted := ctx.Err() != nil
		if interrupted || (l.SaveEvery > 0 && p.Step%l.SaveEvery == 0) {
			if err := r.save(); err != nil {
				return steps, err
			}
			if interrupted {
				l.Progress.Logf("interrupted in epoch %d after step %d/%d; checkpoint saved in %s", epoch+1, p.Step, l.StepsPerEpoch, r.where())
				return steps, ErrInterrupted
			}
		}
	}
	if ctx.Err() != nil {
		if err := r.save(); err != nil {
			return steps, err
		}
		l.Progress.Logf("interrupted at the end of epoch %d before its evaluation; checkpoint saved in %s", epoch+1, r.where())
		return steps, ErrInterrupted
	}
	stats := EpochStats{Epoch: epoch, Steps: l.StepsPerEpoch, LossSum: p.LossSum, Samples: p.Samples, Seconds: p.Seconds}
	l.Progress.BeginEval()
	rec, err := l.EndEpoch(ctx, epoch, stats)
	l.Progress.EndEval()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			if err := r.save(); err != nil {
				return steps, err
			}
			l.Progress.Logf("interrupted during the evaluation of epoch %d; checkpoint saved in %s (the evaluation is repeated on resume)", epoch+1, r.where())
			return steps, ErrInterrupted
		}
		return steps, err
	}
	line, err := MarshalJSON(rec)
	if err != nil {
		return steps, fmt.Errorf("encoding the metrics of epoch %d: %w", epoch+1, err)
	}
	p.History = append(p.History, line)
	p.PastSeconds += p.Seconds
	p.Epoch++
	p.Step, p.LossSum, p.Samples, p.Seconds = 0, 0, 0, 0
	return steps, r.save()
}

// checkLoss applies the divergence guard to a step's loss.
func (r *runner) checkLoss(loss float64) error {
	bad := ""
	switch ratio := r.l.MaxLossRatio; {
	case math.IsNaN(loss) || math.IsInf(loss, 0):
		bad = fmt.Sprintf("loss %v", loss)
	case ratio == 0:
		ratio = DefaultMaxLossRatio
		fallthrough
	case ratio > 0:
		if r.pos.InitialLoss > 0 && loss > ratio*r.pos.InitialLoss {
			bad = fmt.Sprintf("loss %.4g is above %g times the first step's loss %.4g", loss, ratio, r.pos.InitialLoss)
		}
	}
	if bad == "" {
		return nil
	}
	return r.diverged(bad)
}

func (r *runner) diverged(what string) error {
	e := &DivergedError{Epoch: r.pos.Epoch + 1, Step: r.pos.Step + 1, What: what}
	if r.l.Dir != "" {
		e.Checkpoint = r.l.CheckpointPath()
	}
	return e
}

// checkTensors reports a non-finite value in the model or the auxiliary
// tensors after an update.
func (r *runner) checkTensors() error {
	for _, p := range r.tensors {
		if i := nonFinite(p.T.Data); i >= 0 {
			return r.diverged(fmt.Sprintf("tensor %q holds %v after the update", p.Name, p.T.Data[i]))
		}
	}
	return nil
}

// nonFinite returns the index of the first NaN or infinite value of v, or
// -1. The scan is one subtraction per element: x-x is 0 for finite x and
// NaN otherwise.
func nonFinite(v []float32) int {
	var acc float32
	const block = 1024
	for lo := 0; lo < len(v); lo += block {
		hi := min(lo+block, len(v))
		for _, x := range v[lo:hi] {
			acc += x - x
		}
		if acc != 0 || acc != acc {
			for i, x := range v[lo:hi] {
				if x-x != 0 || x != x {
					return lo + i
				}
			}
		}
	}
	return -1
}

// removeFinal removes the Final outputs of a run that is not complete.
func (r *runner) removeFinal() error {
	for _, o := range r.l.Outputs {
		if o.Final && r.l.Dir != "" {
			if err := os.Remove(r.l.path(o.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
