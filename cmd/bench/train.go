package main

// The train subcommand measures training throughput: full training steps
// (forward, cross-entropy, backward, Adam step) of one of the paper's
// models on a fixed batch of random data, after a few warm-up steps.
//
//	go run ./cmd/bench train -model resnet20 -batch 128 -threads 2 -json
//
// scripts/bench_torch.py runs the same models in PyTorch and prints the
// same JSON keys; scripts/bench_train.sh runs both side by side.

import (
	"bytes"
	"encoding/json"
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
	"github.com/proxgen/proxgen/cmd/internal/benchrun"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/optim"
)

// trainModels lists the models the train subcommand accepts.
var trainModels = []string{"resnet20", "resnet56", "vgg16", "resnet34", "lstm"}

// Shape of the word-level language model: the paper's PTB LSTM.
const (
	lmVocab   = 10000
	lmEmb     = 300
	lmHidden  = 300
	lmLayers  = 1
	lmDropout = 0.2
	lmBPTT    = 35
	lmBatch   = 20
	cnnBatch  = 128
	cnnImage  = 32 // CIFAR-10 images are 3×32×32
	cnnLabels = 10
)

// trainConfig holds the flags of the train subcommand.
type trainConfig struct {
	model      string
	precision  string             // -precision
	prec       autograd.Precision // parsed
	batch      int
	bptt       int
	vocab      int
	emb        int
	hidden     int
	width      float64
	threads    int
	warmup     int
	steps      int
	minTime    time.Duration
	seed       uint64
	lr         float64
	arena      bool
	json       bool
	cpuprofile string
	memprofile string
	opProfile  bool
}

// trainResult is the JSON object the train subcommand prints; the keys
// match those of scripts/bench_torch.py.
type trainResult struct {
	Impl       string   `json:"impl"`
	Model      string   `json:"model"`
	Threads    int      `json:"threads"`
	Batch      int      `json:"batch"`
	BPTT       int      `json:"bptt,omitempty"`
	Kernel     string   `json:"kernel"`
	Params     int      `json:"params"`
	Arena      bool     `json:"arena"`
	Precision  string   `json:"precision"`
	Warmup     int      `json:"warmup"`
	Steps      int      `json:"steps"`
	Seconds    float64  `json:"seconds"`
	MsPerStep  float64  `json:"ms_per_step"`
	MsMin      float64  `json:"ms_per_step_min"`
	CPUMs      float64  `json:"cpu_ms_per_step,omitempty"`
	ImgPerS    *float64 `json:"img_per_s,omitempty"`
	TokPerS    *float64 `json:"tok_per_s,omitempty"`
	AllocMB    float64  `json:"alloc_mb_per_step"`
	GCPerStep  float64  `json:"gc_per_step"`
	PeakRSSMB  float64  `json:"peak_rss_mb,omitempty"`
	Loss       float64  `json:"loss"`
	GoVersion  string   `json:"go_version"`
	GOMAXPROCS int      `json:"gomaxprocs"`

	elapsed time.Duration // the timed steps' wall time, unrounded
}

// parseTrainFlags parses the arguments of the train subcommand. Usage and
// flag errors go to stderr.
func parseTrainFlags(args []string, stderr io.Writer) (*trainConfig, error) {
	c := &trainConfig{}
	fs := cli.NewFlagSet("bench train", "bench train [flags]", "training steps per second of a model on random data", stderr)
	fs.StringVar(&c.model, "model", "resnet20", "model: "+strings.Join(trainModels, ", "))
	fs.IntVar(&c.batch, "batch", 0, fmt.Sprintf("batch size (0: %d images; %d columns for lstm)", cnnBatch, lmBatch))
	fs.IntVar(&c.bptt, "bptt", lmBPTT, "lstm: time steps per batch")
	fs.IntVar(&c.vocab, "vocab", lmVocab, "lstm: vocabulary size")
	fs.IntVar(&c.emb, "emb", lmEmb, "lstm: embedding size")
	fs.IntVar(&c.hidden, "hidden", lmHidden, "lstm: hidden size")
	fs.Float64Var(&c.width, "width", 1, "CNNs: channel width multiplier (for quick tests)")
	fs.IntVar(&c.threads, "threads", 0, "GOMAXPROCS and worker-pool size (0: keep GOMAXPROCS)")
	fs.IntVar(&c.warmup, "warmup", 2, "untimed warm-up steps")
	fs.IntVar(&c.steps, "steps", 10, "timed steps (at least)")
	fs.DurationVar(&c.minTime, "min-time", 0, "keep timing steps until this much time has passed")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed for weights and data")
	fs.Float64Var(&c.lr, "lr", 1e-3, "Adam learning rate")
	fs.StringVar(&c.precision, "precision", "fp32", "arithmetic of the convolution and linear products: fp32, or bf16 (bfloat16 operands, float32 accumulation; on CPUs with AVX512_BF16, fp32 elsewhere)")
	fs.BoolVar(&c.arena, "arena", true, "recycle op buffers between steps with autograd.Arena")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON line")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the timed steps to `file`")
	fs.BoolVar(&c.opProfile, "op-profile", false, "also print where the timed steps spend their time: each op's forward and backward time (autograd.Profile) and the optimizer's")
	fs.StringVar(&c.memprofile, "memprofile", "", "write an allocation profile (alloc_space: the timed steps minus what was allocated before) to `file`")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if !slices.Contains(trainModels, c.model) {
		return nil, cli.Usagef("bench train: unknown model %q (known: %s)", c.model, strings.Join(trainModels, ", "))
	}
	if c.batch == 0 {
		c.batch = cnnBatch
		if c.model == "lstm" {
			c.batch = lmBatch
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"batch", c.batch}, {"bptt", c.bptt}, {"vocab", c.vocab}, {"emb", c.emb}, {"hidden", c.hidden}, {"steps", c.steps}} {
		if f.v < 1 {
			return nil, cli.Usagef("bench train: -%s must be at least 1, got %d", f.name, f.v)
		}
	}
	if err := checkLoopFlags(c.threads, c.warmup, c.minTime, c.width); err != nil {
		return nil, cli.Usagef("bench train: %w", err)
	}
	if !(c.lr > 0) {
		return nil, cli.Usagef("bench train: -lr must be positive, got %g", c.lr)
	}
	prec, err := autograd.ParsePrecision(c.precision)
	if err != nil {
		return nil, cli.Usagef("bench train: -precision: %w", err)
	}
	c.prec = prec
	return c, nil
}

// runTrain runs the train subcommand with the given arguments (without the
// subcommand name), printing the result to stdout.
func runTrain(args []string, stdout, stderr io.Writer) error {
	c, err := parseTrainFlags(args, stderr)
	if err != nil {
		return err
	}
	defer setThreads(c.threads)()
	step, samples, params, prof, err := newTrainStep(c)
	if err != nil {
		return err
	}
	res, err := timeSteps(c, step, prof.reset)
	if err != nil {
		return err
	}
	if c.opProfile {
		defer prof.write(stdout, res.Steps, res.elapsed)
	}
	res.Params = params
	// From the unrounded time: steps of a tiny model may take less than
	// the 0.1 ms that Seconds resolves.
	rate := float64(samples) * float64(res.Steps) / res.elapsed.Seconds()
	rate = math.Round(rate*100) / 100
	if c.model == "lstm" {
		res.BPTT = c.bptt
		res.TokPerS = &rate
	} else {
		res.ImgPerS = &rate
	}
	if c.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	return writeTrainTable(stdout, res)
}

// writeTrainTable prints res as a readable table.
func writeTrainTable(w io.Writer, r *trainResult) error {
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

// timeSteps runs the warm-up steps, then timed steps until both c.steps
// steps and c.minTime have passed, profiling the timed ones if asked.
func timeSteps(c *trainConfig, step func() float32, timed func()) (*trainResult, error) {
	for range c.warmup {
		step()
	}
	timed()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return nil, fmt.Errorf("bench train: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("bench train: starting CPU profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var memBase *bytes.Buffer
	if c.memprofile != "" {
		// The heap profile is cumulative; write the baseline now so that
		// "go tool pprof -base" can subtract the set-up and warm-up.
		runtime.GC()
		memBase = new(bytes.Buffer)
		if err := pprof.Lookup("allocs").WriteTo(memBase, 0); err != nil {
			return nil, fmt.Errorf("bench train: memory profile: %w", err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var loss float32
	lt := benchrun.TimeLoop(c.steps, c.minTime, func() { loss = step() })
	n, elapsed, fastest := lt.N, lt.Elapsed, lt.Fastest
	runtime.ReadMemStats(&after)
	if c.memprofile != "" {
		if err := writeMemProfile(c.memprofile, memBase.Bytes()); err != nil {
			return nil, err
		}
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return nil, errors.New("bench train: loss is not finite; the step is broken")
	}
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
	var cpuMs float64
	if lt.CPUOK {
		cpuMs = ms(lt.CPU / time.Duration(n))
	}
	var rssMB float64
	if b, ok := procstat.PeakRSS(); ok {
		rssMB = math.Round(float64(b)/1e5) / 10
	}
	return &trainResult{
		Impl:       "go",
		Model:      c.model,
		Threads:    parallel.Workers(),
		Batch:      c.batch,
		Kernel:     blas.Kernel(),
		Arena:      c.arena,
		Precision:  c.precisionUsed(),
		Warmup:     c.warmup,
		Steps:      n,
		Seconds:    math.Round(elapsed.Seconds()*1e4) / 1e4,
		MsPerStep:  ms(elapsed / time.Duration(n)),
		MsMin:      ms(fastest),
		CPUMs:      cpuMs,
		AllocMB:    math.Round(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/1e4) / 100,
		GCPerStep:  math.Round(float64(after.NumGC-before.NumGC)/float64(n)*100) / 100,
		PeakRSSMB:  rssMB,
		Loss:       float64(loss),
		GoVersion:  runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		elapsed:    elapsed,
	}, nil
}

// newTrainStep builds the model, its Adam optimizer and a fixed batch of
// random data, and returns a function that runs one training step and
// reports its loss, the number of samples (images or tokens) one step
// processes and the model's parameter count.
func newTrainStep(c *trainConfig) (step func() float32, samples, params int, prof *opProfile, err error) {
	rng := rand.New(rand.NewPCG(c.seed, 0x70726f7867656e)) // "proxgen"
	var (
		model   nn.Module
		forward func(*autograd.Context) *autograd.Tensor // loss of one step, recorded in the context
		after   func()                                   // runs after Backward, before the arena is reset
	)
	if c.model == "lstm" {
		lm := models.NewLanguageModel(c.vocab, c.emb, c.hidden, lmLayers, lmDropout, rng)
		model = lm
		ids := make([]int, (c.bptt+1)*c.batch)
		for i := range ids {
			ids[i] = rng.IntN(c.vocab)
		}
		// Column b of the (bptt+1, batch) block is a stream of words; the
		// target of word t is word t+1 of the same column.
		in, targets := ids[:c.bptt*c.batch], ids[c.batch:]
		var state, next nn.LSTMState
		forward = func(ctx *autograd.Context) *autograd.Tensor {
			var logits *autograd.Tensor
			logits, next = lm.Run(ctx, in, c.bptt, c.batch, state)
			return autograd.CrossEntropy(logits, targets)
		}
		// Truncated backpropagation through time: the next window starts
		// from this window's final state, cut off from the graph.
		after = func() { state = next.Detach() }
		samples = c.bptt * c.batch
	} else {
		m, err := models.New(c.model, cnnLabels, rng, models.WithWidth(c.width))
		if err != nil {
			return nil, 0, 0, nil, fmt.Errorf("bench train: %w", err)
		}
		model = m
		x := autograd.RandN(rng, c.batch, 3, cnnImage, cnnImage)
		labels := make([]int, c.batch)
		for i := range labels {
			labels[i] = rng.IntN(cnnLabels)
		}
		forward = func(ctx *autograd.Context) *autograd.Tensor {
			return autograd.CrossEntropy(model.Forward(autograd.FromSlice(x.Data, x.Shape()...).In(ctx)), labels)
		}
		samples = c.batch
	}
	model.SetTraining(true)
	// torch.optim.Adam(model.parameters(), lr) with its defaults.
	all := &optim.Group{LR: c.lr}
	all.Names, all.Params = nn.SplitParams(model.Params())
	opt := optim.New([]*optim.Group{all}, optim.AdamConfig(0.9, 0.999, 1e-8))

	var ctx *autograd.Context // nil: op buffers come from the heap
	if c.arena {
		ctx = &autograd.Context{Arena: autograd.NewArena()}
	}
	if c.prec != autograd.FP32 {
		if ctx == nil {
			ctx = &autograd.Context{}
		}
		ctx.Precision = c.prec
	}
	prof = &opProfile{}
	if c.opProfile {
		if ctx == nil {
			ctx = &autograd.Context{}
		}
		prof.ops = autograd.NewProfile()
		ctx.Profile = prof.ops
	}
	step = func() float32 {
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
	return step, samples, nn.NumParams(model), prof, nil
}

// opProfile is where the timed training steps spend their time: each op
// forward and backward, and the optimizer.
type opProfile struct {
	ops       *autograd.Profile // nil without -op-profile
	optimizer time.Duration
}

// reset forgets what the warm-up steps spent.
func (p *opProfile) reset() {
	if p.ops != nil {
		p.ops.Reset()
	}
	p.optimizer = 0
}

// write prints the profile of steps steps that took elapsed in all: per
// step, each op's forward and backward milliseconds and its share of the
// step, the optimizer's, and the rest (arena, loss read-out, clock).
func (p *opProfile) write(w io.Writer, steps int, elapsed time.Duration) {
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(steps) }
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / elapsed.Seconds() }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\tcalls/step\tforward ms\tbackward ms\tshare %%\t\n")
	var counted time.Duration
	for _, o := range p.ops.Ops() {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.1f\t\n", o.Op, o.Calls/steps, ms(o.Forward), ms(o.Backward), share(o.Forward+o.Backward))
		counted += o.Forward + o.Backward
	}
	fmt.Fprintf(tw, "optimizer step\t1\t\t%.2f\t%.1f\t\n", ms(p.optimizer), share(p.optimizer))
	rest := elapsed - counted - p.optimizer
	fmt.Fprintf(tw, "rest\t\t\t\t%.1f\t\n", share(rest))
	tw.Flush()
}

// precisionUsed names the arithmetic the products ran in: -precision, or
// "fp32 (bf16 asked; no AVX512_BF16)" where bfloat16 fell back.
func (c *trainConfig) precisionUsed() string {
	if c.prec == autograd.BF16 && !blas.BF16Native() {
		return "fp32 (bf16 asked; no AVX512_BF16)"
	}
	return c.prec.String()
}
