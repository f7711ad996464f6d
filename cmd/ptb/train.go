package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/datasets/ptb"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
)

// errInterrupted is returned when the context is cancelled (Ctrl-C).
var errInterrupted = errors.New("interrupted")

// noTrainNote is the notice printed when ptb.valid.txt stands in for the
// missing training split.
const noTrainNote = "ptb.train.txt is not available: training on ptb.valid.txt; ptb.test.txt steers the step size and gives the perplexities, which are therefore not comparable with the paper's"

// corpus is the data of a run.
type corpus struct {
	TrainPath, ValidPath, TestPath string
	// Note explains a non-standard split (training on ptb.valid.txt).
	Note string
	*ptb.Corpus
	// TestOOV counts the test tokens outside the vocabulary (read as
	// <unk>), not counting literal <unk> tokens.
	TestOOV int
}

// loadCorpus finds and reads the files of c.
func loadCorpus(c *config) (*corpus, error) {
	join := func(name string) string { return filepath.Join(c.Data, name) }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if c.Data != "" {
		st, err := os.Stat(c.Data)
		if err != nil {
			return nil, fmt.Errorf("-data: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("-data %s is not a folder", c.Data)
		}
	}
	d := &corpus{TrainPath: c.Train, ValidPath: c.Valid, TestPath: c.Test}
	if d.TestPath == "" {
		d.TestPath = join("ptb.test.txt")
		if !exists(d.TestPath) {
			return nil, fmt.Errorf("-data %s has no ptb.test.txt", c.Data)
		}
	}
	if d.TrainPath == "" {
		switch {
		case exists(join("ptb.train.txt")):
			d.TrainPath = join("ptb.train.txt")
		case exists(join("ptb.valid.txt")):
			d.TrainPath = join("ptb.valid.txt")
			d.Note = noTrainNote
		default:
			return nil, fmt.Errorf("-data %s has neither ptb.train.txt nor ptb.valid.txt to train on", c.Data)
		}
	}
	if d.ValidPath == "" && c.Data != "" && exists(join("ptb.valid.txt")) && !sameFile(d.TrainPath, join("ptb.valid.txt")) {
		d.ValidPath = join("ptb.valid.txt")
	}
	if d.ValidPath == "" && d.Note == "" {
		d.Note = "no validation file: the test file steers the step size"
	}
	var err error
	if d.Corpus, err = ptb.LoadCorpus(d.TrainPath, d.ValidPath, d.TestPath); err != nil {
		return nil, err
	}
	if d.TestOOV, err = countOOV(d.TestPath, d.Vocab); err != nil {
		return nil, err
	}
	return d, nil
}

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// countOOV counts the words of the text file at path that v lacks
// (literal <unk> tokens excluded).
func countOOV(path string, v *ptb.Vocab) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		for _, w := range strings.Fields(sc.Text()) {
			if _, ok := v.ID(w); !ok && w != ptb.Unk {
				n++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// method is the optimizer of a run with its step-size schedule and the
// regularized (or binarised) weights.
type method struct {
	opt     *optim.ProxGen
	plateau *optim.ReduceOnPlateau // nil when the step size is constant
	params  []*autograd.Tensor
	// reg is the group of regularized weights; nil without regularizer.
	reg      *optim.Group
	lambda   float64
	homotopy bool
}

// regularized reports whether the parameter name/t belongs to the set
// that -reg-on selects.
func regularized(c *config, name string, t *autograd.Tensor) bool {
	if c.RegOn == "lstm" {
		return strings.HasPrefix(name, "rnn.weight_")
	}
	return optim.IsWeight(t)
}

// newMethod builds the optimizer of c over the parameters of m.
func newMethod(c *config, m *models.LanguageModel) (*method, error) {
	reg, err := optim.ParseRegularizer(c.Reg)
	if err != nil {
		return nil, err
	}
	me := &method{lambda: c.Lambda, homotopy: c.Homotopy}
	var names []string
	for _, p := range m.Params() {
		names = append(names, p.Name)
		me.params = append(me.params, p.T)
	}
	isReg := func(name string, t *autograd.Tensor) bool { return reg != nil && regularized(c, name, t) }
	groups := optim.SplitGroups(names, me.params, isReg, reg, c.Lambda, c.WD, c.LR)
	var cfg optim.Config
	switch c.Optimizer {
	case "adam":
		cfg = optim.AdamConfig(c.Beta1, c.Beta2, c.Eps)
	case "sgd":
		cfg = optim.SGDConfig(c.Momentum, false)
	case "proxgen":
		cfg = optim.ProxGenAdam(c.Beta1, c.Beta2, c.Eps)
	case "proxquant":
		cfg = optim.ProxGenAdam(c.Beta1, c.Beta2, c.Eps)
		cfg.Metric = optim.Euclidean
	default:
		return nil, fmt.Errorf("unknown optimizer %q", c.Optimizer)
	}
	if c.LRDecay > 1 {
		me.plateau = optim.NewReduceOnPlateau(1/c.LRDecay, 0)
		cfg.Schedule = me.plateau
	}
	for _, g := range groups {
		if g.Reg != nil {
			me.reg = g
			if c.Optimizer == "proxquant" {
				g.Clip = 1
			}
		}
	}
	me.opt = optim.New(groups, cfg)
	me.setEpoch(0)
	return me, nil
}

// setEpoch sets λ for epoch (counted from 0): λ·epoch with the homotopy.
func (me *method) setEpoch(epoch int) {
	if me.reg == nil {
		return
	}
	me.reg.Lambda = me.lambda
	if me.homotopy {
		me.reg.Lambda = me.lambda * float64(epoch)
	}
}

// hardQuantize sets the regularized weights to sign(w) (+1 for 0) and
// freezes them.
func (me *method) hardQuantize() {
	if me.reg == nil {
		return
	}
	for _, p := range me.reg.Params {
		for i, v := range p.Data {
			if v < 0 {
				p.Data[i] = -1
			} else {
				p.Data[i] = 1
			}
		}
	}
	me.reg.Frozen = true
}

// weightStats returns, over the regularized weights, the fractions of
// exact zeros and of weights at exactly ±1.
func (me *method) weightStats() (zero, binary float64) {
	if me.reg == nil {
		return 0, 0
	}
	var z, b, n int
	for _, p := range me.reg.Params {
		for _, v := range p.Data {
			switch v {
			case 0:
				z++
			case 1, -1:
				b++
			}
		}
		n += len(p.Data)
	}
	if n == 0 {
		return 0, 0
	}
	return float64(z) / float64(n), float64(b) / float64(n)
}

// epochRecord is the metrics line of one epoch.
type epochRecord struct {
	Epoch      int      `json:"epoch"`
	Steps      int      `json:"steps"` // optimizer updates so far
	TrainLoss  float64  `json:"train_loss"`
	TrainPPL   float64  `json:"train_ppl"`
	ValidLoss  *float64 `json:"valid_loss,omitempty"`
	ValidPPL   *float64 `json:"valid_ppl,omitempty"`
	TestLoss   float64  `json:"test_loss"`
	TestPPL    float64  `json:"test_ppl"`
	LR         float64  `json:"lr"`         // step size used in this epoch
	NextLR     float64  `json:"next_lr"`    // step size of the next epoch
	Lambda     float64  `json:"lambda"`     // λ used in this epoch (0 without regularizer)
	Penalty    float64  `json:"penalty"`    // λ·R(θ) after the epoch
	ZeroRatio  float64  `json:"zero_ratio"` // regularized weights at exactly 0
	Binary     float64  `json:"binary_ratio"`
	GradNorm   float64  `json:"grad_norm"`     // mean gradient norm before clipping
	Clipped    float64  `json:"clipped_ratio"` // fraction of steps that were clipped
	Tokens     int      `json:"tokens"`        // training tokens predicted
	Seconds    float64  `json:"train_seconds"`
	EvalSecond float64  `json:"eval_seconds"`
	TokPerS    float64  `json:"tok_per_s"` // training tokens per second
}

// summary is the final output line.
type summary struct {
	Summary     bool    `json:"summary"`
	Train       string  `json:"train_file"`
	Valid       string  `json:"valid_file,omitempty"`
	Test        string  `json:"test_file"`
	Note        string  `json:"note,omitempty"`
	Vocab       int     `json:"vocab"`
	Params      int     `json:"params"`
	TrainTokens int     `json:"train_tokens"`
	TestTokens  int     `json:"test_tokens"`
	TestOOV     int     `json:"test_oov"`
	Optimizer   string  `json:"optimizer"`
	Reg         string  `json:"reg"`
	Epochs      int     `json:"epochs"`
	TestLoss    float64 `json:"test_loss"` // after the last epoch
	TestPPL     float64 `json:"test_ppl"`
	BestEpoch   int     `json:"best_epoch"`    // epoch with the lowest validation loss
	BestTestPPL float64 `json:"best_test_ppl"` // test perplexity of that epoch
	TokPerS     float64 `json:"tok_per_s"`     // mean training throughput
	Seconds     float64 `json:"seconds"`
	Threads     int     `json:"threads"`
}

// trainer holds the state of a run.
type trainer struct {
	c                  *config
	data               *corpus
	model              *models.LanguageModel
	me                 *method
	train, valid, test *ptb.Batched
	// trainCtx and evalCtx are the contexts of training windows and of
	// evaluation (NoGrad); each has an arena reset before every window.
	trainCtx, evalCtx *autograd.Context
	stderr            io.Writer
}

// train runs the training described by c, printing metrics to stdout.
func train(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	start := time.Now()
	data, err := loadCorpus(c)
	if err != nil {
		return err
	}
	t := &trainer{c: c, data: data, stderr: stderr, trainCtx: &autograd.Context{Arena: autograd.NewArena()},
		evalCtx: &autograd.Context{Arena: autograd.NewArena(), NoGrad: true}}
	t.train = ptb.Batchify(data.Train, c.Batch)
	if t.train.T < 2 {
		return fmt.Errorf("%s has %d tokens, too few for %d streams of at least 2 steps (lower -batch)", data.TrainPath, len(data.Train), c.Batch)
	}
	t.test = ptb.Batchify(data.Test, c.EvalBatch)
	if t.test.T < 2 {
		return fmt.Errorf("%s has %d tokens, too few for %d streams of at least 2 steps (lower -eval-batch)", data.TestPath, len(data.Test), c.EvalBatch)
	}
	if data.ValidPath != "" {
		t.valid = ptb.Batchify(data.Valid, c.EvalBatch)
		if t.valid.T < 2 {
			return fmt.Errorf("%s has %d tokens, too few for %d streams of at least 2 steps (lower -eval-batch)", data.ValidPath, len(data.Valid), c.EvalBatch)
		}
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x707462)) // "ptb"
	t.model = models.NewLanguageModel(data.Vocab.Len(), c.Emb, c.Hidden, c.Layers, float32(c.Dropout), rng)
	if c.Weights != "" {
		if _, err := checkpoint.LoadModel(c.Weights, t.model); err != nil {
			return fmt.Errorf("-weights: %w", err)
		}
	}
	if t.me, err = newMethod(c, t.model); err != nil {
		return err
	}
	var metrics *os.File
	if c.Metrics != "" {
		if metrics, err = os.Create(c.Metrics); err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		defer metrics.Close()
	}

	sum := summary{
		Summary: true, Train: data.TrainPath, Valid: data.ValidPath, Test: data.TestPath, Note: data.Note,
		Vocab: data.Vocab.Len(), Params: nn.NumParams(t.model), TrainTokens: len(data.Train), TestTokens: len(data.Test),
		TestOOV: data.TestOOV, Optimizer: c.Optimizer, Reg: c.Reg, Threads: c.Threads,
	}
	if data.Note != "" {
		fmt.Fprintf(stderr, "ptb: note: %s\n", data.Note)
	}
	fmt.Fprintf(stderr, "ptb: vocabulary %d words, %d training tokens, %d test tokens (%d outside the vocabulary), %d parameters\n",
		sum.Vocab, sum.TrainTokens, sum.TestTokens, sum.TestOOV, sum.Params)

	bestValid := math.Inf(1)
	var tokens int
	var trainSeconds float64
	for epoch := 1; epoch <= c.Epochs; epoch++ {
		t.me.setEpoch(epoch - 1)
		rec := epochRecord{Epoch: epoch, LR: t.me.opt.LR(0)}
		if t.me.reg != nil {
			rec.Lambda = t.me.reg.Lambda
		}
		if err := t.trainEpoch(ctx, &rec); err != nil {
			return err
		}
		tokens += rec.Tokens
		trainSeconds += rec.Seconds
		evalStart := time.Now()
		rec.TestLoss = t.evaluate(t.test)
		rec.TestPPL = math.Exp(rec.TestLoss)
		steer := rec.TestLoss
		if t.valid != nil {
			v := t.evaluate(t.valid)
			pv := math.Exp(v)
			rec.ValidLoss, rec.ValidPPL = &v, &pv
			steer = v
		}
		rec.EvalSecond = time.Since(evalStart).Seconds()
		if t.me.plateau != nil {
			t.me.plateau.Observe(steer)
		}
		if c.HardQuant > 0 && epoch == c.HardQuant {
			t.me.hardQuantize()
			fmt.Fprintf(stderr, "ptb: epoch %d: regularized weights set to sign(w) and frozen\n", epoch)
		}
		rec.NextLR = t.me.opt.LR(0)
		rec.Steps = t.me.opt.Steps()
		rec.Penalty = optim.Penalty(t.me.opt.Groups())
		rec.ZeroRatio, rec.Binary = t.me.weightStats()
		if steer < bestValid {
			bestValid = steer
			sum.BestEpoch, sum.BestTestPPL = epoch, rec.TestPPL
			if c.Save != "" {
				meta := map[string]string{"epoch": strconv.Itoa(epoch), "test_ppl": strconv.FormatFloat(rec.TestPPL, 'g', 6, 64), "train_file": data.TrainPath}
				if err := checkpoint.SaveModel(c.Save, t.model, meta); err != nil {
					return fmt.Errorf("-save: %w", err)
				}
			}
		}
		sum.Epochs, sum.TestLoss, sum.TestPPL = epoch, rec.TestLoss, rec.TestPPL
		if err := writeRecord(stdout, metrics, &rec, c.JSON); err != nil {
			return err
		}
	}
	if trainSeconds > 0 {
		sum.TokPerS = float64(tokens) / trainSeconds
	}
	sum.Seconds = time.Since(start).Seconds()
	if c.JSON {
		return json.NewEncoder(stdout).Encode(&sum)
	}
	_, err = fmt.Fprintf(stdout, "test perplexity %.2f after %d epochs (best validation at epoch %d: test perplexity %.2f); %.0f tok/s, %s\n",
		sum.TestPPL, sum.Epochs, sum.BestEpoch, sum.BestTestPPL, sum.TokPerS, time.Duration(sum.Seconds*float64(time.Second)).Round(time.Second))
	return err
}

// writeRecord prints rec to stdout (a JSON line or a text line) and
// appends it to the metrics file if there is one.
func writeRecord(stdout io.Writer, metrics *os.File, rec *epochRecord, asJSON bool) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("epoch %d metrics: %w", rec.Epoch, err)
	}
	line = append(line, '\n')
	if metrics != nil {
		if _, err := metrics.Write(line); err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
	}
	if asJSON {
		_, err = stdout.Write(line)
		return err
	}
	valid := ""
	if rec.ValidPPL != nil {
		valid = fmt.Sprintf(" | valid ppl %8.2f", *rec.ValidPPL)
	}
	_, err = fmt.Fprintf(stdout, "epoch %3d | train ppl %8.2f%s | test ppl %8.2f | lr %.3g | %.1f s, %.0f tok/s\n",
		rec.Epoch, rec.TrainPPL, valid, rec.TestPPL, rec.LR, rec.Seconds, rec.TokPerS)
	return err
}

// trainEpoch runs one pass over the training data with truncated
// backpropagation through time and fills the training fields of rec.
func (t *trainer) trainEpoch(ctx context.Context, rec *epochRecord) error {
	c, m, d := t.c, t.model, t.train
	m.SetTraining(true)
	windows := ptb.NumWindows(d, c.BPTT)
	if c.MaxWindows > 0 {
		windows = min(windows, c.MaxWindows)
	}
	var (
		state             nn.LSTMState // zeros at the start of every epoch
		lossSum, normSum  float64
		tokens, clipped   int
		lossV             float32
		logLoss, logStart = 0.0, time.Now()
		logTokens         = 0
	)
	start := time.Now()
	for w := range windows {
		if err := ctx.Err(); err != nil {
			return errInterrupted
		}
		x, y, n := ptb.GetBatch(d, w*c.BPTT, c.BPTT)
		t.me.opt.ZeroGrad()
		t.trainCtx.Arena.Reset()
		logits, next := m.Run(t.trainCtx, x, n, d.B, state)
		loss := autograd.CrossEntropy(logits, y)
		loss.Backward()
		lossV = loss.Item()
		// Truncated BPTT: the next window starts from this state,
		// copied out of the arena and cut off from the graph.
		state = next.Detach()
		if math.IsNaN(float64(lossV)) || math.IsInf(float64(lossV), 0) {
			return fmt.Errorf("training diverged in epoch %d, window %d: loss %v (try a smaller -lr or -clip)", rec.Epoch, w+1, lossV)
		}
		norm := clipGradNorm(t.me.params, c.Clip)
		normSum += norm
		if c.Clip > 0 && norm > c.Clip {
			clipped++
		}
		t.me.opt.Step()
		lossSum += float64(lossV) * float64(n*d.B)
		tokens += n * d.B
		logLoss += float64(lossV) * float64(n*d.B)
		logTokens += n * d.B
		if c.LogEvery > 0 && (w+1)%c.LogEvery == 0 {
			el := time.Since(logStart).Seconds()
			fmt.Fprintf(t.stderr, "epoch %3d | window %5d/%d | loss %.3f ppl %8.2f | %.0f tok/s\n",
				rec.Epoch, w+1, windows, logLoss/float64(logTokens), math.Exp(logLoss/float64(logTokens)), float64(logTokens)/el)
			logLoss, logTokens, logStart = 0, 0, time.Now()
		}
	}
	rec.Seconds = time.Since(start).Seconds()
	rec.Tokens = tokens
	rec.TrainLoss = lossSum / float64(tokens)
	rec.TrainPPL = math.Exp(rec.TrainLoss)
	rec.GradNorm = normSum / float64(windows)
	rec.Clipped = float64(clipped) / float64(windows)
	if rec.Seconds > 0 {
		rec.TokPerS = float64(tokens) / rec.Seconds
	}
	return nil
}

// evaluate returns the mean cross-entropy per predicted token over d, run
// in windows of -bptt steps with the state carried over, without dropout.
func (t *trainer) evaluate(d *ptb.Batched) float64 {
	m := t.model
	m.SetTraining(false)
	defer m.SetTraining(true)
	total := 0.0
	var state nn.LSTMState
	for i := 0; i < d.T-1; i += t.c.BPTT {
		x, y, n := ptb.GetBatch(d, i, t.c.BPTT)
		t.evalCtx.Arena.Reset()
		logits, next := m.Run(t.evalCtx, x, n, d.B, state)
		total += float64(autograd.CrossEntropySum(logits, y).Item())
		state = next.Detach()
	}
	return total / float64(ptb.NumTargets(d))
}
