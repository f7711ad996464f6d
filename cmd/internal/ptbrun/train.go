package ptbrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/datasets/ptb"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// NoTrainNote is the notice printed when ptb.valid.txt stands in for the
// missing training split.
const NoTrainNote = "ptb.train.txt is not available: training on ptb.valid.txt; ptb.test.txt steers the step size and gives the perplexities, which are therefore not comparable with the paper's"

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
			d.Note = NoTrainNote
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

// regularized reports whether the parameter name/t belongs to the set
// that -reg-on selects.
func regularized(c *config, name string, t *autograd.Tensor) bool {
	if c.RegOn == "lstm" {
		return strings.HasPrefix(name, "rnn.weight_")
	}
	return optim.IsWeight(t)
}

// newMethod builds the optimizer of c over the parameters of m, trained
// with perEpoch updates per epoch.
func newMethod(c *config, m *models.LanguageModel, perEpoch int) (*experiment.Method, error) {
	reg, err := prox.Parse(c.Reg)
	if err != nil {
		return nil, err
	}
	var sched schedule.Schedule
	switch {
	case c.Schedule != "":
		sp, err := schedule.Parse(c.Schedule)
		if err != nil {
			return nil, fmt.Errorf("-schedule: %w", err)
		}
		if sched, err = sp.Build(perEpoch, c.Epochs); err != nil {
			return nil, fmt.Errorf("-schedule: %w", err)
		}
	case c.LRDecay > 1:
		sched = schedule.NewReduceOnPlateau(1/c.LRDecay, 0)
	}
	return experiment.NewMethod(m, experiment.MethodConfig{
		Optimizer:   c.Optimizer,
		Reg:         reg,
		Regularized: func(name string, t *autograd.Tensor) bool { return reg != nil && regularized(c, name, t) },
		Lambda:      c.Lambda,
		Homotopy:    c.Homotopy,
		WD:          c.WD,
		LR:          c.LR,
		Hyper:       experiment.Hyper{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Momentum: c.Momentum},
		Schedule:    sched,
	})
}

// EpochRecord is the metrics line of one epoch.
type EpochRecord struct {
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

// Summary is the final output line.
type Summary struct {
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
	BestEpoch   int     `json:"best_epoch"`          // epoch with the lowest validation loss
	BestTestPPL float64 `json:"best_test_ppl"`       // test perplexity of that epoch
	TokPerS     float64 `json:"tok_per_s,omitempty"` // mean training throughput
	Seconds     float64 `json:"seconds,omitempty"`
	Threads     int     `json:"threads,omitempty"`
}

// runState is the program's part of the checkpoint (train.State.JSON);
// the carried LSTM state and the best model are its tensors.
type runState struct {
	Config *config `json:"config"`
	// RNG is the state of the dropout masks' random stream.
	RNG []byte `json:"rng"`
	// NormSum and Clipped accumulate the gradient norms of the epoch.
	NormSum float64 `json:"norm_sum"`
	Clipped int     `json:"clipped"`
	// HasBest says whether an epoch was evaluated; BestValid is its
	// lowest validation (or steering) loss, BestEpoch the epoch and
	// BestTestLoss the test loss of that epoch.
	HasBest      bool    `json:"has_best"`
	BestValid    float64 `json:"best_valid"`
	BestEpoch    int     `json:"best_epoch"`
	BestTestLoss float64 `json:"best_test_loss"`
	Frozen       bool    `json:"frozen"`
}

// Tensor names of the program's part of the checkpoint.
const (
	stateH    = "lstm.h."     // + layer: carried hidden state
	stateC    = "lstm.c."     // + layer: carried cell state
	bestState = "best_model." // + state_dict name: the best model so far
)

// trainer holds the state of a run: the step and evaluation functions of
// a train.Loop.
type trainer struct {
	c                  *config
	prog               *train.Progress
	data               *corpus
	model              *models.LanguageModel
	me                 *experiment.Method
	pcg                *rand.PCG
	train, valid, test *ptb.Batched
	// trainCtx and evalCtx are the contexts of training windows and of
	// evaluation (NoGrad); each has an arena reset before every window.
	trainCtx, evalCtx *autograd.Context
	stdout            io.Writer
	windows           int // per epoch

	st    runState
	state nn.LSTMState // carried from window to window; zero at epoch starts
	best  experiment.BestModel
	lr    float64 // step size of the current epoch
	lam   float64 // λ of the current epoch
}

// readStoredRun reads the checkpoint of the run folder dir and the
// settings stored in it.
func readStoredRun(dir string) (*train.Checkpoint, *config, error) {
	c := defaultConfig()
	ck, err := experiment.ReadStoredRun(dir, c)
	return ck, c, err
}

// trainRun runs (or resumes from ck) the training described by c,
// printing metrics to stdout.
func trainRun(ctx context.Context, c *config, ck *train.Checkpoint, threads int, stdout, stderr io.Writer) error {
	if ck == nil {
		lock, err := experiment.LockNewRun(c.Out)
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	if c.Metrics != "" {
		if st, err := os.Stat(filepath.Dir(c.Metrics)); err != nil || !st.IsDir() {
			return fmt.Errorf("-metrics %s: the folder %s does not exist", c.Metrics, filepath.Dir(c.Metrics))
		}
	}
	data, err := loadCorpus(c)
	if err != nil {
		return err
	}
	t := &trainer{c: c, data: data, stdout: stdout, trainCtx: &autograd.Context{Arena: autograd.NewArena()},
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
	t.windows = ptb.NumWindows(t.train, c.BPTT)
	if c.MaxWindows > 0 {
		t.windows = min(t.windows, c.MaxWindows)
	}
	t.pcg = rand.NewPCG(c.Seed, 0x707462) // "ptb"
	t.model = models.NewLanguageModel(data.Vocab.Len(), c.Emb, c.Hidden, c.Layers, float32(c.Dropout), rand.New(t.pcg))
	if c.Weights != "" && ck == nil {
		if _, err := checkpoint.LoadModel(c.Weights, t.model); err != nil {
			return fmt.Errorf("-weights: %w", err)
		}
	}
	if t.me, err = newMethod(c, t.model, t.windows); err != nil {
		return err
	}
	t.st.Config = c

	sum := Summary{
		Summary: true, Train: data.TrainPath, Valid: data.ValidPath, Test: data.TestPath, Note: data.Note,
		Vocab: data.Vocab.Len(), Params: nn.NumParams(t.model), TrainTokens: len(data.Train), TestTokens: len(data.Test),
		TestOOV: data.TestOOV, Optimizer: c.Optimizer, Reg: c.Reg, Threads: threads,
	}
	if data.Note != "" {
		fmt.Fprintf(stderr, "ptb: note: %s\n", data.Note)
	}
	fmt.Fprintf(stderr, "ptb: vocabulary %d words, %d training tokens, %d test tokens (%d outside the vocabulary), %d parameters\n",
		sum.Vocab, sum.TrainTokens, sum.TestTokens, sum.TestOOV, sum.Params)

	mode := c.Progress
	if c.LogEvery == 0 {
		mode = train.ProgressNone
	}
	t.prog = train.NewProgress(stderr, mode, c.LogEvery, "tok")
	l := &train.Loop{
		Dir: c.Out, Epochs: c.Epochs, StepsPerEpoch: t.windows, SaveEvery: c.SaveEvery,
		Model: t.model, Optimizer: t.me.Opt, Progress: t.prog,
		BeginEpoch: t.beginEpoch, Step: t.step, Update: t.update, EndEpoch: t.endEpoch,
		Status:    func(s train.EpochStats) string { return fmt.Sprintf("ppl %.2f", math.Exp(s.MeanLoss())) },
		SaveState: t.saveState, LoadState: t.loadState,
		Outputs: t.outputs(&sum), Resume: ck,
	}
	if ck != nil && ck.Epoch() < c.Epochs {
		fmt.Fprintf(stderr, "ptb: resuming %s at epoch %d, window %d\n", c.Out, ck.Epoch()+1, ck.Step())
	}
	res, err := l.Run(ctx)
	if err != nil {
		return err
	}
	if res.Already {
		fmt.Fprintf(stderr, "ptb: the run in %s is complete (%s); its files were re-created from the checkpoint\n", c.Out, cli.Count(res.Epoch, "epoch"))
	}
	s, err := t.summarize(&sum, res.History)
	if err != nil {
		return err
	}
	if c.JSON {
		line, err := train.MarshalJSON(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", line)
		return err
	}
	_, err = fmt.Fprintf(stdout, "test perplexity %.2f after %s (best validation at epoch %d: test perplexity %.2f); %.0f tok/s, %s\n",
		s.TestPPL, cli.Count(s.Epochs, "epoch"), s.BestEpoch, s.BestTestPPL, s.TokPerS, time.Duration(s.Seconds*float64(time.Second)).Round(time.Second))
	return err
}

// summarize completes the summary from the metrics records of the run.
func (t *trainer) summarize(base *Summary, history []json.RawMessage) (*Summary, error) {
	s := *base
	var tokens int
	var trainSeconds float64
	for i, line := range history {
		var r EpochRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("metrics record %d: %w", i+1, err)
		}
		tokens += r.Tokens
		trainSeconds += r.Seconds
		s.Seconds += r.Seconds + r.EvalSecond
		s.Epochs = r.Epoch
		// null (a perplexity that overflowed) decodes as 0: recompute
		// from the loss, which is finite unless the evaluation diverged.
		s.TestLoss, s.TestPPL = nullable(r.TestLoss), math.Exp(nullable(r.TestLoss))
	}
	if t.st.HasBest {
		s.BestEpoch, s.BestTestPPL = t.st.BestEpoch, math.Exp(t.st.BestTestLoss)
	}
	if trainSeconds > 0 {
		s.TokPerS = float64(tokens) / trainSeconds
	}
	return &s, nil
}

// nullable maps the zero a JSON null decodes to back to NaN. A loss is
// never exactly 0 for a model with a softmax over more than one word.
func nullable(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

// outputs returns the files the run folder derives from the checkpoint:
// the best model and, at the end, the summary; -save and -metrics add
// copies.
func (t *trainer) outputs(sum *Summary) []train.Output {
	c := t.c
	model := func(info *train.Info) ([]byte, error) {
		if !t.st.HasBest {
			return nil, nil
		}
		return t.best.File(t.model, map[string]string{"epoch": strconv.Itoa(t.st.BestEpoch), "test_ppl": strconv.FormatFloat(math.Exp(t.st.BestTestLoss), 'g', 6, 64), "train_file": t.data.TrainPath})
	}
	outs := []train.Output{
		{Name: checkpoint.ModelFileName, Data: model},
		{Name: "summary.json", Final: true, Data: func(info *train.Info) ([]byte, error) {
			s, err := t.summarize(sum, info.History)
			if err != nil {
				return nil, err
			}
			// Without timings and thread count, the file of a resumed run
			// is identical to that of an uninterrupted one.
			s.Seconds, s.TokPerS, s.Threads = 0, 0, 0
			b, err := train.MarshalJSON(s)
			return append(b, '\n'), err
		}},
	}
	outs = append(outs, train.Output{Name: "curves.svg", Data: func(info *train.Info) ([]byte, error) {
		return curves(info.History, fmt.Sprintf("PTB LSTM %s %s", c.Optimizer, c.Reg))
	}})
	if c.Save != "" {
		outs = append(outs, train.Output{Name: absPath(c.Save), Data: model})
	}
	if c.Metrics != "" {
		outs = append(outs, train.Output{Name: absPath(c.Metrics), Data: func(info *train.Info) ([]byte, error) {
			var b []byte
			for _, h := range info.History {
				b = append(append(b, h...), '\n')
			}
			return b, nil
		}})
	}
	return outs
}

// curves draws the losses and the step size per epoch.
func curves(history []json.RawMessage, title string) ([]byte, error) {
	n := len(history)
	x, trainLoss, test, valid, lr := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	hasValid := false
	for i, line := range history {
		var r EpochRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("metrics record %d: %w", i+1, err)
		}
		x[i], trainLoss[i], test[i], lr[i], valid[i] = float64(r.Epoch), nullable(r.TrainLoss), nullable(r.TestLoss), r.LR, math.NaN()
		if r.ValidLoss != nil {
			valid[i], hasValid = *r.ValidLoss, true
		}
	}
	losses := []train.Series{{Name: "train", X: x, Y: trainLoss}, {Name: "test", X: x, Y: test}}
	if hasValid {
		losses = append(losses, train.Series{Name: "valid", X: x, Y: valid})
	}
	var b bytes.Buffer
	err := train.WriteSVG(&b, []train.Chart{
		{Title: title + ": loss", XLabel: "epoch", YLabel: "cross-entropy per token", Series: losses},
		{Title: "step size", XLabel: "epoch", YLabel: "lr", LogY: true, Series: []train.Series{{Name: "lr", X: x, Y: lr}}},
	}, 2)
	return b.Bytes(), err
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// beginEpoch sets the epoch's λ and, at the epoch's start, zeroes the
// carried LSTM state and the gradient-norm sums.
func (t *trainer) beginEpoch(_ context.Context, epoch, start int) error {
	t.me.SetEpoch(epoch)
	t.lr = t.me.LR()
	t.lam = 0
	if len(t.me.Regs) > 0 {
		t.lam = t.me.LambdaAt(epoch)
	}
	t.model.SetTraining(true)
	if start == 0 {
		t.state = nn.LSTMState{}
		t.st.NormSum, t.st.Clipped = 0, 0
	}
	return nil
}

// step runs forward and backward on window w with truncated
// backpropagation through time.
func (t *trainer) step(_, w int) (float64, int, error) {
	c, d := t.c, t.train
	x, y, n := ptb.GetBatch(d, w*c.BPTT, c.BPTT)
	t.me.Opt.ZeroGrad()
	t.trainCtx.Arena.Reset()
	logits, next := t.model.Run(t.trainCtx, x, n, d.B, t.state)
	loss := autograd.CrossEntropy(logits, y)
	loss.Backward()
	// Truncated BPTT: the next window starts from this state, copied out
	// of the arena and cut off from the graph.
	t.state = next.Detach()
	return float64(loss.Item()), n * d.B, nil
}

// update clips the gradient norm and applies the optimizer.
func (t *trainer) update() error {
	norm := optim.ClipGradNorm(t.me.Params, t.c.Clip)
	t.st.NormSum += norm
	if t.c.Clip > 0 && norm > t.c.Clip {
		t.st.Clipped++
	}
	t.me.Opt.Step()
	return nil
}

// endEpoch evaluates, steers the step size, hard-quantises when due,
// keeps the best model and prints the epoch's metrics.
func (t *trainer) endEpoch(ctx context.Context, epoch int, s train.EpochStats) (any, error) {
	c := t.c
	rec := EpochRecord{Epoch: epoch + 1, LR: t.lr, Lambda: t.lam, Tokens: s.Samples, Seconds: s.Seconds}
	rec.TrainLoss = s.MeanLoss()
	rec.TrainPPL = math.Exp(rec.TrainLoss)
	rec.GradNorm = t.st.NormSum / float64(s.Steps)
	rec.Clipped = float64(t.st.Clipped) / float64(s.Steps)
	if s.Seconds > 0 {
		rec.TokPerS = float64(s.Samples) / s.Seconds
	}
	evalStart := time.Now()
	var err error
	if rec.TestLoss, err = t.evaluate(ctx, t.test); err != nil {
		return nil, err
	}
	rec.TestPPL = math.Exp(rec.TestLoss)
	steer := rec.TestLoss
	if t.valid != nil {
		v, err := t.evaluate(ctx, t.valid)
		if err != nil {
			return nil, err
		}
		pv := math.Exp(v)
		rec.ValidLoss, rec.ValidPPL = &v, &pv
		steer = v
	}
	rec.EvalSecond = time.Since(evalStart).Seconds()
	// From here on nothing is interrupted: the state changes once.
	if p := t.me.Plateau(); p != nil {
		p.Observe(steer)
	}
	if c.HardQuant > 0 && epoch+1 == c.HardQuant {
		t.me.HardQuantize()
		t.st.Frozen = true
	}
	rec.NextLR = t.me.LR()
	rec.Steps = t.me.Opt.Steps()
	rec.Penalty = optim.Penalty(t.me.Opt.Groups())
	ws := experiment.ComputeWeightStats(t.me.Weights)
	rec.ZeroRatio, rec.Binary = ws.Zero, ws.PM1
	if !t.st.HasBest || steer < t.st.BestValid {
		if !math.IsNaN(steer) && !math.IsInf(steer, 0) && !math.IsNaN(rec.TestLoss) && !math.IsInf(rec.TestLoss, 0) {
			t.st.HasBest, t.st.BestValid, t.st.BestEpoch, t.st.BestTestLoss = true, steer, epoch+1, rec.TestLoss
			t.best.Keep(t.model)
		}
	}
	if err := writeRecord(t.stdout, &rec, c.JSON); err != nil {
		return nil, err
	}
	return &rec, nil
}

// saveState returns the program's part of a checkpoint.
func (t *trainer) saveState() (train.State, error) {
	rng, err := t.pcg.MarshalBinary()
	if err != nil {
		return train.State{}, err
	}
	t.st.RNG = rng
	b, err := json.Marshal(&t.st)
	if err != nil {
		return train.State{}, err
	}
	s := train.State{JSON: b, Tensors: map[string][]float32{}}
	for i := range t.state.H {
		s.Tensors[stateH+strconv.Itoa(i)] = t.state.H[i].Data
		s.Tensors[stateC+strconv.Itoa(i)] = t.state.C[i].Data
	}
	if t.st.HasBest {
		t.best.AddTo(s.Tensors, bestState)
	}
	return s, nil
}

// loadState restores what saveState saved, checking every size first.
func (t *trainer) loadState(s train.State) error {
	st := runState{Config: defaultConfig()}
	if err := json.Unmarshal(s.JSON, &st); err != nil {
		return fmt.Errorf("bad run state: %w", err)
	}
	if st.Clipped < 0 || st.BestEpoch < 0 || math.IsNaN(st.NormSum) || math.IsInf(st.NormSum, 0) {
		return fmt.Errorf("bad run state: clipped %d, best epoch %d, norm sum %v", st.Clipped, st.BestEpoch, st.NormSum)
	}
	var state nn.LSTMState
	want := t.train.B * t.c.Hidden
	if _, ok := s.Tensors[stateH+"0"]; ok {
		for i := range t.c.Layers {
			h, c := s.Tensors[stateH+strconv.Itoa(i)], s.Tensors[stateC+strconv.Itoa(i)]
			if len(h) != want || len(c) != want {
				return fmt.Errorf("bad run state: LSTM state of layer %d has %d and %d values, want %d", i, len(h), len(c), want)
			}
			state.H = append(state.H, autograd.FromSlice(slices.Clone(h), t.train.B, t.c.Hidden))
			state.C = append(state.C, autograd.FromSlice(slices.Clone(c), t.train.B, t.c.Hidden))
		}
	}
	var best experiment.BestModel
	if st.HasBest {
		if err := best.LoadFrom(s.Tensors, bestState, t.model); err != nil {
			return err
		}
	}
	if err := t.pcg.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("bad run state: random state: %w", err)
	}
	st.Config = t.c
	t.st, t.state, t.best = st, state, best
	if t.st.Frozen {
		t.me.Freeze()
	}
	return nil
}

// writeRecord prints rec to stdout: a JSON line (non-finite values as
// null) or a text line.
func writeRecord(stdout io.Writer, rec *EpochRecord, asJSON bool) error {
	if asJSON {
		line, err := train.MarshalJSON(rec)
		if err != nil {
			return fmt.Errorf("epoch %d metrics: %w", rec.Epoch, err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", line)
		return err
	}
	valid := ""
	if rec.ValidPPL != nil {
		valid = fmt.Sprintf("| valid ppl %8.2f", *rec.ValidPPL)
	}
	// One line on a wide terminal, more lines (indented) on a narrow one.
	_, err := fmt.Fprintln(stdout, train.WrapFields(train.TerminalWidth(stdout), "   ", []string{
		fmt.Sprintf("epoch %3d", rec.Epoch), fmt.Sprintf("| train ppl %8.2f", rec.TrainPPL), valid,
		fmt.Sprintf("| test ppl %8.2f", rec.TestPPL), fmt.Sprintf("| lr %.3g", rec.LR), fmt.Sprintf("| %.1f s, %.0f tok/s", rec.Seconds, rec.TokPerS),
	}))
	return err
}

// evaluate returns the mean cross-entropy per predicted token over d, run
// in windows of -bptt steps with the state carried over, without dropout.
// It returns ctx.Err() as soon as ctx is cancelled.
func (t *trainer) evaluate(ctx context.Context, d *ptb.Batched) (float64, error) {
	m := t.model
	m.SetTraining(false)
	defer m.SetTraining(true)
	total := 0.0
	var state nn.LSTMState
	for i := 0; i < d.T-1; i += t.c.BPTT {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		x, y, n := ptb.GetBatch(d, i, t.c.BPTT)
		t.evalCtx.Arena.Reset()
		logits, next := m.Run(t.evalCtx, x, n, d.B, state)
		total += float64(autograd.CrossEntropySum(logits, y).Item())
		state = next.Detach()
		t.prog.EvalUpdate(i/t.c.BPTT+1, (d.T-2)/t.c.BPTT+1)
	}
	return total / float64(ptb.NumTargets(d)), nil
}
