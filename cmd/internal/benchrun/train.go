package benchrun

// Training throughput: full training steps (forward, cross-entropy,
// backward, Adam step) of one of the paper's models on a fixed batch of
// random data, after a few warm-up steps. scripts/bench_torch.py runs the
// same models in PyTorch and prints the same JSON keys.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
)

// trainModels lists the models Train accepts.
var trainModels = []string{"resnet20", "resnet56", "vgg16", "resnet34", "lstm"}

// TrainModels returns the names of the models Train accepts: the CNNs of
// models.New for CIFAR-10 images and "lstm", the paper's PTB language
// model.
func TrainModels() []string { return slices.Clone(trainModels) }

// Shape of the word-level language model: the paper's PTB LSTM.
const (
	lmLayers  = 1
	lmDropout = 0.2
	lmBatch   = 20
	cnnBatch  = 128
	cnnImage  = 32 // CIFAR-10 images are 3×32×32
	cnnLabels = 10
)

// DefaultBatch returns the batch size of model in the paper: 20 columns
// for "lstm", 128 images otherwise.
func DefaultBatch(model string) int {
	if model == "lstm" {
		return lmBatch
	}
	return cnnBatch
}

// TrainConfig describes a training benchmark.
type TrainConfig struct {
	Model string // one of TrainModels
	// Batch is the number of images of a CNN's batch or of columns of the
	// LSTM's; 0 means DefaultBatch(Model).
	Batch int
	// BPTT (time steps per batch), Vocab, Emb and Hidden shape the LSTM.
	BPTT, Vocab, Emb, Hidden int
	Width                    float64            // CNNs: channel width multiplier, positive
	Seed                     uint64             // seed of the weights and the data
	LR                       float64            // Adam learning rate, positive
	Precision                autograd.Precision // arithmetic of the convolution and linear products
	Arena                    bool               // recycle op buffers between steps (autograd.Arena)
	OpProfile                bool               // profile each op's forward and backward (TrainResult.Profile)
	// CPUProfile and MemProfile name files for a CPU profile of the timed
	// steps and an allocation profile (MemProfile, the cumulative one
	// after the timed steps, and MemProfile+".base", the one before, for
	// "go tool pprof -sample_index=alloc_space -base"); empty: none.
	CPUProfile, MemProfile string
	Loop
}

// DefaultTrainConfig returns the configuration of bench train without
// flags: resnet20 at its default batch, the paper's PTB LSTM shape, full
// width, seed 1, learning rate 1e-3, float32, the arena on, 2 warm-up
// and 10 timed steps.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{
		Model: "resnet20", BPTT: 35, Vocab: 10000, Emb: 300, Hidden: 300,
		Width: 1, Seed: 1, LR: 1e-3, Precision: autograd.FP32, Arena: true,
		Loop: defaultLoop,
	}
}

// TrainResult is what Train measured; its JSON keys match those of
// scripts/bench_torch.py and are those of bench train -json.
type TrainResult struct {
	Impl       string   `json:"impl"` // "go"
	Model      string   `json:"model"`
	Threads    int      `json:"threads"` // parallel.Workers
	Batch      int      `json:"batch"`
	BPTT       int      `json:"bptt,omitempty"` // lstm only
	Kernel     string   `json:"kernel"`         // the GEMM micro-kernel
	Params     int      `json:"params"`
	Arena      bool     `json:"arena"`
	Precision  string   `json:"precision"` // the arithmetic the products ran in
	Warmup     int      `json:"warmup"`
	Steps      int      `json:"steps"`   // timed steps
	Seconds    float64  `json:"seconds"` // their wall time, rounded to 0.1 ms
	MsPerStep  float64  `json:"ms_per_step"`
	MsMin      float64  `json:"ms_per_step_min"`
	CPUMs      float64  `json:"cpu_ms_per_step,omitempty"`
	ImgPerS    *float64 `json:"img_per_s,omitempty"` // CNNs
	TokPerS    *float64 `json:"tok_per_s,omitempty"` // lstm
	AllocMB    float64  `json:"alloc_mb_per_step"`
	GCPerStep  float64  `json:"gc_per_step"`
	PeakRSSMB  float64  `json:"peak_rss_mb,omitempty"` // the process's high-water mark
	Loss       float64  `json:"loss"`                  // of the last step
	GoVersion  string   `json:"go_version"`
	GOMAXPROCS int      `json:"gomaxprocs"`

	// Elapsed is the timed steps' wall time, unrounded.
	Elapsed time.Duration `json:"-"`
	// Profile is where the timed steps spent their time, nil without
	// TrainConfig.OpProfile.
	Profile *OpProfile `json:"-"`
}

// Check reports a configuration that Train cannot run: an unknown model,
// a negative batch, an LSTM size below 1, a width or learning rate not
// positive (or an infinite width), or a loop of no timed steps or a
// negative warm-up or time. The error names the setting by the name of
// bench train's flag for it.
func (c *TrainConfig) Check() error {
	if !slices.Contains(trainModels, c.Model) {
		return fmt.Errorf("unknown model %q (known: %s)", c.Model, strings.Join(trainModels, ", "))
	}
	if c.Batch < 0 {
		return fmt.Errorf("batch must not be negative, got %d", c.Batch)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"bptt", c.BPTT}, {"vocab", c.Vocab}, {"emb", c.Emb}, {"hidden", c.Hidden}} {
		if f.v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", f.name, f.v)
		}
	}
	if !(c.Width > 0) || math.IsInf(c.Width, 0) {
		return fmt.Errorf("width must be positive, got %g", c.Width)
	}
	if !(c.LR > 0) {
		return fmt.Errorf("lr must be positive, got %g", c.LR)
	}
	return c.Loop.check()
}

// Train builds the model c names with its Adam optimizer and a fixed
// batch of random data (from c.Seed), runs c.Warmup steps, then times
// steps as TimeLoop does, and reports the rate (images or tokens per
// second), the times, the allocations and the last loss. It computes with
// the thread count and GEMM engine the program set, and returns an error
// for a configuration out of range, a profile that cannot be written, or
// a loss that is not finite.
func Train(c TrainConfig) (*TrainResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch(c.Model)
	}
	s, err := newTrainStep(&c)
	if err != nil {
		return nil, err
	}
	res, err := timeSteps(&c, s.step, s.prof.reset)
	if err != nil {
		return nil, err
	}
	if c.OpProfile {
		s.prof.steps, s.prof.elapsed = res.Steps, res.Elapsed
		res.Profile = s.prof
	}
	res.Params = s.params
	// From the unrounded time: steps of a tiny model may take less than
	// the 0.1 ms that Seconds resolves.
	rate := float64(s.samples) * float64(res.Steps) / res.Elapsed.Seconds()
	rate = math.Round(rate*100) / 100
	if c.Model == "lstm" {
		res.BPTT = c.BPTT
		res.TokPerS = &rate
	} else {
		res.ImgPerS = &rate
	}
	return res, nil
}

// WriteTable prints r as a readable table, as bench train does without
// -json.
func (r *TrainResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s\n", r.Model)
	if r.TokPerS != nil {
		fmt.Fprintf(tw, "tokens/s\t%.1f\n", *r.TokPerS)
		fmt.Fprintf(tw, "batch\t%d columns × %d steps\n", r.Batch, r.BPTT)
	} else {
		fmt.Fprintf(tw, "images/s\t%.1f\n", *r.ImgPerS)
		fmt.Fprintf(tw, "batch\t%d\n", r.Batch)
	}
	fmt.Fprintf(tw, "ms/step\t%.1f (min %.1f)\n", r.MsPerStep, r.MsMin)
	if r.CPUMs > 0 {
		fmt.Fprintf(tw, "CPU ms/step\t%.1f (all threads)\n", r.CPUMs)
	}
	fmt.Fprintf(tw, "timed steps\t%d in %.2f s after %d warm-up\n", r.Steps, r.Seconds, r.Warmup)
	fmt.Fprintf(tw, "threads\t%d (GOMAXPROCS %d)\n", r.Threads, r.GOMAXPROCS)
	fmt.Fprintf(tw, "GEMM kernel\t%s\n", r.Kernel)
	fmt.Fprintf(tw, "precision\t%s\n", r.Precision)
	fmt.Fprintf(tw, "parameters\t%d\n", r.Params)
	fmt.Fprintf(tw, "arena\t%v\n", r.Arena)
	fmt.Fprintf(tw, "allocated/step\t%.1f MB, %.2f GCs\n", r.AllocMB, r.GCPerStep)
	if r.PeakRSSMB > 0 {
		fmt.Fprintf(tw, "peak RSS\t%.1f MB (process high-water mark)\n", r.PeakRSSMB)
	}
	fmt.Fprintf(tw, "last loss\t%.4f\n", r.Loss)
	return tw.Flush()
}

// timeSteps runs the warm-up steps, then timed steps until both c.Steps
// steps and c.MinTime have passed, profiling the timed ones if asked.
func timeSteps(c *TrainConfig, step func() float32, timed func()) (*TrainResult, error) {
	c.warmUp(func() { step() })
	timed()
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("starting CPU profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var memBase *bytes.Buffer
	if c.MemProfile != "" {
		// The heap profile is cumulative; write the baseline now so that
		// "go tool pprof -base" can subtract the set-up and warm-up.
		runtime.GC()
		memBase = new(bytes.Buffer)
		if err := pprof.Lookup("allocs").WriteTo(memBase, 0); err != nil {
			return nil, fmt.Errorf("memory profile: %w", err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var loss float32
	lt := TimeLoop(c.Steps, c.MinTime, func() { loss = step() })
	n := lt.N
	runtime.ReadMemStats(&after)
	if c.MemProfile != "" {
		if err := writeMemProfile(c.MemProfile, memBase.Bytes()); err != nil {
			return nil, err
		}
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return nil, errors.New("loss is not finite; the step is broken")
	}
	msStep, cpuMs := lt.perStep()
	var rssMB float64
	if b, ok := procstat.PeakRSS(); ok {
		rssMB = math.Round(float64(b)/1e5) / 10
	}
	return &TrainResult{
		Impl:       "go",
		Model:      c.Model,
		Threads:    parallel.Workers(),
		Batch:      c.Batch,
		Kernel:     blas.Kernel(),
		Arena:      c.Arena,
		Precision:  c.precisionUsed(),
		Warmup:     c.Warmup,
		Steps:      n,
		Seconds:    math.Round(lt.Elapsed.Seconds()*1e4) / 1e4,
		MsPerStep:  msStep,
		MsMin:      millis(lt.Fastest),
		CPUMs:      cpuMs,
		AllocMB:    math.Round(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/1e4) / 100,
		GCPerStep:  math.Round(float64(after.NumGC-before.NumGC)/float64(n)*100) / 100,
		PeakRSSMB:  rssMB,
		Loss:       float64(loss),
		GoVersion:  runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Elapsed:    lt.Elapsed,
	}, nil
}

// writeMemProfile writes the cumulative allocation profile to path and
// the baseline taken before the timed steps to path+".base", for
// "go tool pprof -sample_index=alloc_space -base path.base path".
func writeMemProfile(path string, base []byte) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(path+".base", base, 0o644)
}

// trainStep is one training step of a model on a fixed batch.
type trainStep struct {
	step    func() float32 // runs a step and returns its loss
	samples int            // images or tokens of a step
	params  int            // the model's parameter count
	prof    *OpProfile     // where the steps spend their time
}

// newTrainStep builds the model, its Adam optimizer and a fixed batch of
// random data, and returns the training step on them.
func newTrainStep(c *TrainConfig) (*trainStep, error) {
	rng := rand.New(rand.NewPCG(c.Seed, seedStream))
	var (
		model   nn.Module
		forward func(*autograd.Context) *autograd.Tensor // loss of one step, recorded in the context
		after   func()                                   // runs after Backward, before the arena is reset
		samples int
	)
	if c.Model == "lstm" {
		lm := models.NewLanguageModel(c.Vocab, c.Emb, c.Hidden, lmLayers, lmDropout, rng)
		model = lm
		ids := make([]int, (c.BPTT+1)*c.Batch)
		for i := range ids {
			ids[i] = rng.IntN(c.Vocab)
		}
		// Column b of the (bptt+1, batch) block is a stream of words; the
		// target of word t is word t+1 of the same column.
		in, targets := ids[:c.BPTT*c.Batch], ids[c.Batch:]
		var state, next nn.LSTMState
		forward = func(ctx *autograd.Context) *autograd.Tensor {
			var logits *autograd.Tensor
			logits, next = lm.Run(ctx, in, c.BPTT, c.Batch, state)
			return autograd.CrossEntropy(logits, targets)
		}
		// Truncated backpropagation through time: the next window starts
		// from this window's final state, cut off from the graph.
		after = func() { state = next.Detach() }
		samples = c.BPTT * c.Batch
	} else {
		m, err := models.New(c.Model, cnnLabels, rng, models.WithWidth(c.Width))
		if err != nil {
			return nil, err
		}
		model = m
		x := autograd.RandN(rng, c.Batch, 3, cnnImage, cnnImage)
		labels := make([]int, c.Batch)
		for i := range labels {
			labels[i] = rng.IntN(cnnLabels)
		}
		forward = func(ctx *autograd.Context) *autograd.Tensor {
			return autograd.CrossEntropy(model.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(ctx)), labels)
		}
		samples = c.Batch
	}
	model.SetTraining(true)
	// torch.optim.Adam(model.parameters(), lr) with its defaults.
	all := &optim.Group{LR: c.LR}
	all.Names, all.Params = nn.SplitParams(model.Params())
	opt := optim.New([]*optim.Group{all}, optim.AdamConfig(0.9, 0.999, 1e-8))

	var ctx *autograd.Context // nil: op buffers come from the heap
	if c.Arena {
		ctx = &autograd.Context{Arena: autograd.NewArena()}
	}
	if c.Precision != autograd.FP32 {
		if ctx == nil {
			ctx = &autograd.Context{}
		}
		ctx.Precision = c.Precision
	}
	prof := &OpProfile{}
	if c.OpProfile {
		if ctx == nil {
			ctx = &autograd.Context{}
		}
		prof.ops = autograd.NewProfile()
		ctx.Profile = prof.ops
	}
	step := func() float32 {
		if ctx != nil && ctx.Arena != nil {
			ctx.Arena.Reset()
		}
		opt.ZeroGrad()
		if prof.ops != nil {
			prof.ops.Mark()
		}
		l := forward(ctx)
		l.Backward()
		loss := l.Item()
		if after != nil {
			after()
		}
		start := time.Now()
		opt.Step()
		prof.optimizer += time.Since(start)
		return loss
	}
	return &trainStep{step: step, samples: samples, params: nn.NumParams(model), prof: prof}, nil
}

// OpProfile is where the timed training steps of Train spent their time:
// each op forward and backward (autograd.Profile), and the optimizer.
type OpProfile struct {
	ops       *autograd.Profile // nil without TrainConfig.OpProfile
	optimizer time.Duration
	steps     int           // timed steps
	elapsed   time.Duration // their wall time
}

// reset forgets what the warm-up steps spent.
func (p *OpProfile) reset() {
	if p.ops != nil {
		p.ops.Reset()
	}
	p.optimizer = 0
}

// WriteTable prints the profile as a table: per step, each op's calls,
// forward and backward milliseconds and its share of the step, the
// optimizer's, and the share of the rest (arena, loss read-out, clock).
func (p *OpProfile) WriteTable(w io.Writer) error {
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(p.steps) }
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / p.elapsed.Seconds() }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\tcalls/step\tforward ms\tbackward ms\tshare %%\t\n")
	var counted time.Duration
	for _, o := range p.ops.Ops() {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.1f\t\n", o.Op, o.Calls/p.steps, ms(o.Forward), ms(o.Backward), share(o.Forward+o.Backward))
		counted += o.Forward + o.Backward
	}
	fmt.Fprintf(tw, "optimizer step\t1\t\t%.2f\t%.1f\t\n", ms(p.optimizer), share(p.optimizer))
	rest := p.elapsed - counted - p.optimizer
	fmt.Fprintf(tw, "rest\t\t\t\t%.1f\t\n", share(rest))
	return tw.Flush()
}

// precisionUsed names the arithmetic the products ran in: c.Precision, or
// "fp32 (bf16 asked; no AVX512_BF16)" where bfloat16 fell back.
func (c *TrainConfig) precisionUsed() string {
	if c.Precision == autograd.BF16 && !blas.BF16Native() {
		return "fp32 (bf16 asked; no AVX512_BF16)"
	}
	return c.Precision.String()
}
