package cifarrun

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// config holds every setting of a run. It is stored (as JSON) in the
// training-state file, so a resumed run uses exactly the settings of the
// original one; the "auto" defaults are resolved before it is stored.
type config struct {
	Data       string `json:"data"`
	NoDownload bool   `json:"no_download"`
	// Download allows downloading into a -data folder that does not
	// exist; AllowSubset accepts data files with fewer records than the
	// official release.
	Download    bool   `json:"download,omitempty"`
	AllowSubset bool   `json:"allow_subset,omitempty"`
	Out         string `json:"out"`

	Model    string  `json:"model"`
	Width    float64 `json:"width"`
	Shortcut string  `json:"shortcut"`
	// Weights is the model or training-state file the run starts from
	// (a warm start) or that -eval-only evaluates; WeightsSHA256 is the
	// SHA-256 of its bytes when a training run started from it.
	Weights       string `json:"weights"`
	WeightsSHA256 string `json:"weights_sha256,omitempty"`
	// Widths are the per-layer channel counts of a compacted network
	// (read from the widths metadata of a -weights file written by
	// -compact); nil: the widths of Model and Width. Stored so that
	// -resume rebuilds the same network without reading -weights.
	Widths *models.Widths `json:"widths,omitempty"`

	// PruneFilters and PruneFLOPs select one-shot magnitude filter
	// pruning of the -weights before training (prune.Options Fraction
	// and KeepFLOPs); PruneResidual includes the residual streams.
	PruneFilters float64 `json:"prune_filters,omitempty"`
	PruneFLOPs   float64 `json:"prune_flops,omitempty"`
	// PruneMultiple prunes each layer's smallest filters down to a
	// multiple of this many live channels instead (prune.Options.Multiple).
	PruneMultiple int  `json:"prune_multiple,omitempty"`
	PruneResidual bool `json:"prune_residual,omitempty"`

	// GMP is the final fraction of zero weights of gradual magnitude
	// pruning (0: none); GMPBegin and GMPEnd are the epochs after which
	// it starts and reaches GMP, GMPEvery the updates between pruning
	// steps (experiment.GMP).
	GMP      float64 `json:"gmp,omitempty"`
	GMPBegin int     `json:"gmp_begin,omitempty"`
	GMPEnd   int     `json:"gmp_end,omitempty"`
	GMPEvery int     `json:"gmp_every,omitempty"`

	Optimizer   string  `json:"optimizer"`
	Reg         string  `json:"reg"`
	Lambda      float64 `json:"lambda"`
	LambdaScale string  `json:"lambda_scale"`
	// RegCost weighs λ per layer: "" for none, or "pixels" for λ times the
	// layer's output pixels over the largest layer's (lambdaWeights).
	RegCost    string  `json:"reg_cost,omitempty"`
	LR         float64 `json:"lr"`
	WD         float64 `json:"wd"`
	Momentum   float64 `json:"momentum"`
	Beta1      float64 `json:"beta1"`
	Beta2      float64 `json:"beta2"`
	Eps        float64 `json:"eps"`
	Schedule   string  `json:"schedule"`
	NoCoupleBN bool    `json:"no_couple_bn"`

	Homotopy       string `json:"homotopy"`
	HardQuantEpoch int    `json:"hard_quant_epoch"`
	// BinScale is where a binary regularizer puts each tensor's weights:
	// "1" for ±1, "mean" for ±(the tensor's mean |w| at the start of each
	// epoch) (experiment.MethodConfig.ScaleBinary). Checkpoints written
	// before it existed read as "", which is "1".
	BinScale string `json:"bin_scale,omitempty"`
	// Prox is when the regularizer's prox is applied: "" after every step
	// (ProxGen), or "lazy" to the accumulated real-valued iterate
	// (optim.LazyProx). Checkpoints written before it existed read as "".
	Prox string `json:"prox,omitempty"`
	// Recalibrate is the number of training batches over which the
	// batch-norm running statistics are re-estimated with the current
	// weights (nn.RecalibrateBatchNorm): after hard quantisation and
	// after pruning in a training run, before evaluating with -eval-only.
	// 0: never. Checkpoints written before it existed read as 0.
	Recalibrate int `json:"recalibrate"`

	Epochs      int    `json:"epochs"`
	Batch       int    `json:"batch"`
	EvalBatch   int    `json:"eval_batch"`
	Seed        uint64 `json:"seed"`
	TrainSubset int    `json:"train_subset"`
	TestSubset  int    `json:"test_subset"`
	NoAugment   bool   `json:"no_augment"`

	// Precision is the arithmetic of the convolution and linear products
	// in training (autograd.Context.Precision): "fp32" or "bf16".
	// Checkpoints written before it existed read as fp32.
	Precision string `json:"precision"`

	Threads   int    `json:"threads"`
	Progress  string `json:"progress"`
	LogEvery  int    `json:"log_every"`
	SaveEvery int    `json:"save_every"`
	JSON      bool   `json:"json"`
	Resume    bool   `json:"-"`
	EvalOnly  bool   `json:"-"`
	// Dense keeps every layer of -eval-only on the dense path.
	Dense bool `json:"-"`
	// Compact names the model file to write the compacted -weights to.
	Compact string `json:"-"`

	// Derived lists the settings whose "auto" value resolve chose (by
	// their JSON names), so that -resume -epochs N recomputes those that
	// depend on the run's length as a fresh N-epoch run would. Nil in
	// checkpoints written before it was recorded.
	Derived []string `json:"derived,omitempty"`

	// explicit records the flags given on the command line.
	explicit map[string]bool
	// resumed is the checkpoint read for -resume.
	resumed *train.Checkpoint
}

// DefaultRecalibrate is the number of training batches over which a
// training run re-estimates the batch-norm statistics (-recalibrate).
const DefaultRecalibrate = 200

// optimizers are the names of the methods (experiment.MethodNames).
var optimizers = experiment.MethodNames()

// mutableOnResume lists the flags a resumed run may change; every other
// flag given with -resume must equal the stored setting.
var mutableOnResume = []string{"data", "no-download", "download", "allow-subset", "out", "epochs", "threads", "progress", "log-every", "save-every", "eval-batch", "resume", "json"}

// defaultConfig returns the settings before "auto" values are resolved.
func defaultConfig() *config {
	return &config{
		Model: "resnet20", Width: 1, Shortcut: "A",
		Optimizer: "proxgen", Reg: "auto", Lambda: math.NaN(), LambdaScale: "auto", BinScale: "1",
		LR: math.NaN(), WD: math.NaN(), Momentum: 0.9, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Schedule: "auto", Homotopy: "auto", HardQuantEpoch: -2, Recalibrate: -1, GMPEnd: -2,
		Epochs: 30, Batch: 128, EvalBatch: 500, Seed: 1,
		Progress: "auto", Precision: "fp32",
	}
}

// newFlagSet binds the flags to c.
func newFlagSet(c *config, out io.Writer) *flag.FlagSet {
	fs := cli.NewFlagSet("cifar", "cifar [flags]", "trains and evaluates CIFAR-10 classifiers with ProxGen or a baseline of the paper (docs/cifar.md)", out)
	fs.StringVar(&c.Data, "data", c.Data, "CIFAR-10 folder (holding cifar-10-batches-bin or its files); empty: the download cache")
	fs.BoolVar(&c.NoDownload, "no-download", c.NoDownload, "fail instead of downloading when the data are missing")
	fs.BoolVar(&c.Download, "download", c.Download, "download the data into a -data folder that does not exist yet (without it, a -data folder that does not exist is an error)")
	fs.BoolVar(&c.AllowSubset, "allow-subset", c.AllowSubset, "accept data files with fewer records than the official 10,000 each (tiny test sets, reduced copies)")
	fs.StringVar(&c.Out, "out", c.Out, "run folder for checkpoints, metrics.jsonl, curves.svg and summary.json (default runs/<model>-<optimizer>-<reg>-s<seed>)")

	fs.StringVar(&c.Model, "model", c.Model, "network: "+strings.Join(models.Names(), ", ")+" or any resnet<6n+2>")
	fs.Float64Var(&c.Width, "width", c.Width, "channel-width multiplier (1 = the reference network)")
	fs.StringVar(&c.Shortcut, "shortcut", c.Shortcut, "shortcut of resnet20..56: A (zero padding, akamaster default) or B (1x1 conv + BN)")
	fs.StringVar(&c.Weights, "weights", c.Weights, "model or training-state safetensors file: the weights to evaluate (-eval-only) or to start training from, a warm start recorded with the file's SHA-256 in the run's summary and model metadata (a compacted file from -compact: without -model, its network)")

	fs.Float64Var(&c.PruneFilters, "prune-filters", c.PruneFilters, "before training, zero this fraction of the output filters (smallest ℓ2 norm) in every layer, with their batch-norm γ and β, and keep them zero (magnitude-pruning baseline; fine-tunes -weights)")
	fs.Float64Var(&c.PruneFLOPs, "prune-flops", c.PruneFLOPs, "like -prune-filters, with the fraction (the same in every layer) that leaves at most this fraction of the dense network's FLOPs")
	fs.IntVar(&c.PruneMultiple, "prune-multiple", c.PruneMultiple, "like -prune-filters, zeroing in every layer the fewest filters of smallest ℓ2 norm that leave a multiple of this many live channels (a layer with fewer keeps them), so that the compacted network's widths fill whole SIMD blocks (8: nn/infer's half blocks); for fine-tuning a compacted file")
	fs.BoolVar(&c.PruneResidual, "prune-residual", c.PruneResidual, "with -prune-filters, -prune-flops or -prune-multiple, also prune residual-stream channels (all filters writing a channel together); default: only the channels inside residual blocks")

	fs.Float64Var(&c.GMP, "gmp", c.GMP, "gradual magnitude pruning (Zhu & Gupta 2017, as torch.nn.utils.prune's global_unstructured): prune the conv and linear weights with the smallest magnitudes, over all layers together, to this final fraction of zeros along the cubic schedule from -gmp-begin to -gmp-end, keeping them zero (0: off)")
	fs.IntVar(&c.GMPBegin, "gmp-begin", c.GMPBegin, "-gmp: the epoch after which pruning starts")
	fs.Var(cli.OptionalInt{P: &c.GMPEnd, Unset: -2}, "gmp-end", "-gmp: the epoch after which the final fraction is reached (default: 2/3 of -epochs)")
	fs.IntVar(&c.GMPEvery, "gmp-every", c.GMPEvery, "-gmp: updates between two pruning steps (default 100)")

	fs.StringVar(&c.Optimizer, "optimizer", c.Optimizer, "method: "+strings.Join(optimizers, ", "))
	fs.StringVar(&c.Reg, "reg", c.Reg, "regularizer: "+prox.Syntax+" (auto: l12 for the sparsity methods, binw:1 = bin-l1 for proxquant, none otherwise)")
	fs.Var(cli.OptionalFloat{P: &c.Lambda}, "lambda", "regularization strength λ (auto: 0.1 for sparsity, 1e-4 for proxquant, 5e-8 for bin-lq:Q with proxgen, 0.1 for l0hc)")
	fs.StringVar(&c.LambdaScale, "lambda-scale", c.LambdaScale, "n: the per-step λ is -lambda divided by the training-set size (official ProxGen code); 1: -lambda as is; auto: n except for binary regularizers")
	fs.StringVar(&c.RegCost, "reg-cost", c.RegCost, "weigh λ per layer by what its weights cost: none; pixels: λ times the layer's output pixels over the largest layer's (a 16-channel block of layer1 of a ResNet-20 costs 16 times one of layer3, so the regularizer prunes where pruning saves most)")
	fs.Var(cli.OptionalFloat{P: &c.LR}, "lr", "base step size (auto: 1e-3 Adam family, 0.1 sgd and proxgen-sgd, 0.06 proxsgd, 0.01 proxquant and bc)")
	fs.Var(cli.OptionalFloat{P: &c.WD}, "wd", "weight decay ζ, decoupled for proxgenw/adamw/subgrad, coupled for adam/sgd/proxgen-sgd (auto: 0.01 proxgenw and adamw, 5e-4 sgd and proxgen-sgd, else 0)")
	fs.Float64Var(&c.Momentum, "momentum", c.Momentum, "heavy-ball momentum of sgd")
	fs.Float64Var(&c.Beta1, "beta1", c.Beta1, "first-moment decay ρ of the Adam family")
	fs.Float64Var(&c.Beta2, "beta2", c.Beta2, "second-moment decay β of the Adam family")
	fs.Float64Var(&c.Eps, "eps", c.Eps, "δ added to the preconditioner")
	fs.StringVar(&c.Schedule, "schedule", c.Schedule, "step-size schedule: const, multistep:E1,E2[:GAMMA] (epochs), step:EVERY:GAMMA (epochs), invsqrt[:OFFSET] (lr/sqrt(t+OFFSET), t = update), plateau:FACTOR (on the test loss), cosine[:FLOOR] (per update down to FLOOR at the end), onecycle[:PCT[:DIV[:FINALDIV]]][:three][:linear] (peak -lr), any but plateau preceded by warmup:EPOCHS[:START]+ (linear from START·lr, default 1/3); auto: multistep at 1/2 and 5/6 of -epochs, const for proxquant and bc, invsqrt:4 (Prox-SGD's ε_t) for proxsgd")

	fs.BoolVar(&c.NoCoupleBN, "no-couple-bn", c.NoCoupleBN, "gl0/gl21 over output filters group each convolution filter with the γ and β of the batch norm after it (a zero group is a zero channel); this flag groups the filter alone")

	fs.StringVar(&c.BinScale, "bin-scale", c.BinScale, "binary regularizers: 1 pulls the binarised weights to ±1; mean pulls each tensor to ±s, s its mean |w| at the start of each epoch (prox.BinaryWAt: the prox of z is s·prox₁(z/s)), so that a warm start trains at its own weight scale (momentum SGD's step sizes) and hard quantisation sets ±s; with -optimizer bc or bc-sgd, mean binarises each tensor to ±(the mean |w| of its real weights) after every step")
	fs.StringVar(&c.Prox, "prox", c.Prox, "step: the regularizer's proximal map after every step (ProxGen); lazy: the optimizer steps a real-valued iterate z and the network computes with the prox of λR at z under the step sizes summed so far (optim.LazyProx: a weight the prox holds at ±s or 0 leaves it when its accumulated gradient outweighs the pull; BinaryConnect is the binary limit λ → ∞); with -bin-scale mean each tensor's wells are at ±(the mean |z|)")
	fs.StringVar(&c.Homotopy, "homotopy", c.Homotopy, "on: ProxQuant homotopy λ_t = λ·epoch (epoch counted from 0); off; auto: on for binary regularizers")
	fs.Var(cli.OptionalInt{P: &c.Recalibrate, Unset: -1}, "recalibrate", "re-estimate the batch-norm running statistics over this many training batches with the current weights (cumulative average, as PyTorch's momentum=None): after hard quantisation and after -prune-filters/-prune-flops in a training run, and before evaluating with -eval-only; 0: never (default: 200 for training runs, 0 for -eval-only)")
	fs.Var(cli.OptionalInt{P: &c.HardQuantEpoch, Unset: -2}, "hard-quant-epoch", "after this many epochs set binarised weights to sign(w) and freeze them (0: never; default: 2/3 of -epochs for binary runs, never otherwise)")

	fs.IntVar(&c.Epochs, "epochs", c.Epochs, "number of epochs")
	fs.IntVar(&c.Batch, "batch", c.Batch, "training batch size")
	fs.IntVar(&c.EvalBatch, "eval-batch", c.EvalBatch, "evaluation batch size")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the initial weights, shuffling, augmentation and gates")
	fs.IntVar(&c.TrainSubset, "train-subset", c.TrainSubset, "train on the first N training images only (0: all 50,000)")
	fs.IntVar(&c.TestSubset, "test-subset", c.TestSubset, "evaluate on the first N test images only (0: all 10,000)")
	fs.BoolVar(&c.NoAugment, "no-augment", c.NoAugment, "train without random crops and flips")

	fs.StringVar(&c.Precision, "precision", c.Precision, "arithmetic of the convolution and linear products in training: fp32, or bf16 (bfloat16 operands, float32 accumulation and master weights, on CPUs with AVX512_BF16; float32 elsewhere); evaluation stays fp32")
	fs.IntVar(&c.Threads, "threads", c.Threads, "worker threads (0: all cores, at most 1024)")
	fs.StringVar(&c.Progress, "progress", c.Progress, "progress on stderr: bar, lines, none, or auto (bar on a terminal, lines otherwise)")
	fs.IntVar(&c.LogEvery, "log-every", c.LogEvery, "batches between progress lines (0: about ten lines per epoch)")
	fs.IntVar(&c.SaveEvery, "save-every", c.SaveEvery, "also checkpoint every N batches inside an epoch (0: at epoch ends only)")
	fs.BoolVar(&c.JSON, "json", c.JSON, "print each epoch's metrics and the final summary as JSON lines on stdout")
	fs.BoolVar(&c.Resume, "resume", c.Resume, "continue the run saved in -out exactly where it stopped")
	fs.BoolVar(&c.EvalOnly, "eval-only", c.EvalOnly, "evaluate -weights on the test set and exit")
	fs.BoolVar(&c.Dense, "dense", c.Dense, "-eval-only: run every layer densely (default: layers with mostly exact zeros run sparse)")
	fs.StringVar(&c.Compact, "compact", c.Compact, "write -weights without its removable channels (zero filters) to this model file, with the per-layer widths in its metadata and its sparse and binary tensors compressed (the deployable file), and exit")
	return fs
}

// parseConfig parses args, resolves the "auto" settings and validates the
// result. It returns flag.ErrHelp for -h.
func parseConfig(args []string, out io.Writer) (*config, error) {
	c := defaultConfig()
	explicit, err := experiment.ParseFlags(newFlagSet(c, out), args)
	if err != nil {
		return nil, err
	}
	c.explicit = explicit
	if msg := prox.Deprecation(c.Reg); msg != "" && c.explicit["reg"] {
		fmt.Fprintf(out, "cifar: warning: -reg: %s\n", msg)
	}
	if err := c.resolve(); err != nil {
		return nil, err
	}
	return c, nil
}

// binaryReg reports whether the regularizer pulls weights towards ±1
// (ProxQuant and revised ProxQuant runs); such runs can be hard-quantised.
func (c *config) binaryReg() bool {
	r, err := prox.Parse(c.Reg)
	return err == nil && prox.IsBinary(r)
}

// binaryLevels names the values of a binarised weight: ±1, or ±s for
// -bin-scale mean (s per tensor).
func (c *config) binaryLevels() string {
	if c.BinScale == "mean" {
		return "±s"
	}
	return "±1"
}

// checkLazy checks that -prox lazy has a proximal method, a regularizer
// and, for filter groups, no batch-norm coupling.
func (c *config) checkLazy() error {
	switch c.Optimizer {
	case "proxgen", "proxgenw", "proxgen-sgd", "proxquant":
	default:
		return fmt.Errorf("-prox lazy needs a proximal method (proxgen, proxgenw, proxgen-sgd or proxquant), not -optimizer %s", c.Optimizer)
	}
	r, err := prox.Parse(c.Reg)
	if err != nil || r == nil {
		return fmt.Errorf("-prox lazy needs a regularizer, not -reg %s", c.Reg)
	}
	if gr, ok := r.(prox.GroupRegularizer); ok && gr.GroupBy() == prox.ByFilter && !c.NoCoupleBN {
		return fmt.Errorf("-prox lazy takes no batch-norm couplings: with -reg %s add -no-couple-bn", c.Reg)
	}
	return nil
}

// binary reports whether the run trains a binary network (its metrics
// include the fraction of weights at ±1).
func (c *config) binary() bool { return c.binaryReg() || c.binaryConnect() }

// binaryConnect reports whether the optimizer is one of the BinaryConnect
// methods (bc over Adam, bc-sgd over momentum SGD).
func (c *config) binaryConnect() bool { return c.Optimizer == "bc" || c.Optimizer == "bc-sgd" }

// usesReg reports whether the optimizer takes a regularizer.
func (c *config) usesReg() bool {
	m, err := experiment.LookupMethod(c.Optimizer)
	return err == nil && m.TakesReg
}

// adamFamily reports whether the optimizer uses the Adam moments.
func (c *config) adamFamily() bool {
	m, err := experiment.LookupMethod(c.Optimizer)
	return err == nil && m.Adam
}

// epochDependent are the derived settings that depend on -epochs: JSON
// name and flag.
var epochDependent = []struct{ key, flag string }{{"schedule", "schedule"}, {"hard_quant_epoch", "hard-quant-epoch"}, {"gmp_end", "gmp-end"}}

// derive records that resolve chose the setting key.
func (c *config) derive(key string) {
	if !slices.Contains(c.Derived, key) {
		c.Derived = append(c.Derived, key)
	}
}

// resolve fills in the "auto" settings and checks every value.
func (c *config) resolve() error {
	if c.Dense && !c.EvalOnly {
		return errors.New("-dense applies to -eval-only only")
	}
	if c.Schedule == "auto" {
		c.derive("schedule")
	}
	if c.HardQuantEpoch == -2 {
		c.derive("hard_quant_epoch")
	}
	if c.EvalOnly {
		if c.Weights == "" {
			return errors.New("-eval-only needs -weights FILE")
		}
		if c.Resume {
			return errors.New("-eval-only and -resume exclude each other")
		}
	}
	switch {
	case c.Recalibrate == -1 && (c.EvalOnly || c.Compact != ""):
		c.Recalibrate = 0
	case c.Recalibrate == -1:
		c.Recalibrate = DefaultRecalibrate
	case c.Recalibrate < 0:
		return fmt.Errorf("-recalibrate %d must not be negative", c.Recalibrate)
	case c.Recalibrate > 0 && c.Compact != "":
		return errors.New("-compact does not recalibrate (compaction removes only channels that are exactly zero); use -recalibrate with -eval-only or a training run")
	}
	if c.Download && c.NoDownload {
		return errors.New("-download and -no-download exclude each other")
	}
	if c.Compact != "" {
		if c.Weights == "" {
			return errors.New("-compact needs -weights FILE")
		}
		if c.EvalOnly || c.Resume {
			return errors.New("-compact excludes -eval-only and -resume")
		}
	}
	if err := c.checkPrune(); err != nil {
		return err
	}
	if !slices.Contains(optimizers, c.Optimizer) {
		return fmt.Errorf("-optimizer %q: want one of %s", c.Optimizer, strings.Join(optimizers, ", "))
	}
	if err := checkModel(c.Model); err != nil {
		return err
	}
	if !(c.Width > 0 && c.Width <= models.MaxWidth) {
		return fmt.Errorf("-width %v: want a multiplier in (0, %d]", c.Width, models.MaxWidth)
	}
	c.Shortcut = strings.ToUpper(c.Shortcut)
	if c.Shortcut != "A" && c.Shortcut != "B" {
		return fmt.Errorf("-shortcut %q: want A or B", c.Shortcut)
	}
	// The whole network within the maxima of package models (e.g. its
	// weight count at a large -width), before anything is allocated.
	s := c.spec()
	if err := models.Check(s.Model, s.NumClasses, s.Options()...); err != nil {
		return fmt.Errorf("-model %s -width %v: %w", c.Model, c.Width, err)
	}

	// Regularizer.
	if c.Reg == "auto" {
		switch {
		case c.Optimizer == "proxquant":
			c.Reg = "binw:1"
		case c.Optimizer == "proxsgd":
			c.Reg = "l1"
		case c.usesReg():
			c.Reg = "l12"
		default:
			c.Reg = "none"
		}
	}
	reg, err := parseReg(c.Reg)
	if err != nil {
		return err
	}
	if !c.usesReg() && c.Reg != "none" {
		return fmt.Errorf("-optimizer %s takes no regularizer (got -reg %s); use proxgen, proxgenw, subgrad, proxsgd or proxquant, or -reg none", c.Optimizer, c.Reg)
	}
	if c.Optimizer == "proxquant" && !c.binaryReg() {
		return fmt.Errorf("-optimizer proxquant needs a binary regularizer bin-lq:Q, got -reg %s", c.Reg)
	}
	if c.Optimizer == "subgrad" && reg != nil {
		if _, ok := reg.(prox.Subdifferentiable); !ok {
			return fmt.Errorf("-optimizer subgrad: -reg %s has no subgradient", c.Reg)
		}
	}
	if q, ok := reg.(interface{ Q() float64 }); ok && c.Optimizer == "subgrad" && q.Q() == 0 {
		return fmt.Errorf("-optimizer subgrad: -reg %s has a zero gradient almost everywhere; use a proximal method", c.Reg)
	}

	// λ and its scaling.
	if math.IsNaN(c.Lambda) {
		switch {
		case c.Reg == "none" && c.Optimizer != "l0hc":
			c.Lambda = 0
		case c.Optimizer == "proxquant":
			c.Lambda = 1e-4
		case c.binaryReg():
			c.Lambda = 5e-8
		default:
			c.Lambda = 0.1
		}
	}
	if c.Lambda < 0 {
		return fmt.Errorf("-lambda %v must not be negative", c.Lambda)
	}
	if c.Lambda != 0 && c.Reg == "none" && c.Optimizer != "l0hc" {
		return fmt.Errorf("-lambda %v has no effect without a regularizer (-reg none with -optimizer %s)", c.Lambda, c.Optimizer)
	}
	switch c.LambdaScale {
	case "auto":
		c.LambdaScale = "n"
		if c.binary() {
			c.LambdaScale = "1"
		}
	case "n", "1":
	default:
		return fmt.Errorf("-lambda-scale %q: want n, 1 or auto", c.LambdaScale)
	}

	// Step size and weight decay.
	if math.IsNaN(c.LR) {
		switch c.Optimizer {
		case "sgd", "proxgen-sgd", "bc-sgd":
			c.LR = 0.1
		case "proxsgd":
			c.LR = 0.06
		case "proxquant", "bc":
			c.LR = 0.01
		default:
			c.LR = 1e-3
		}
	}
	if !(c.LR > 0) {
		return fmt.Errorf("-lr %v must be positive", c.LR)
	}
	if math.IsNaN(c.WD) {
		switch c.Optimizer {
		case "proxgenw", "adamw":
			c.WD = 0.01
		case "sgd", "proxgen-sgd":
			c.WD = 5e-4
		default:
			c.WD = 0
		}
	}
	if c.WD < 0 {
		return fmt.Errorf("-wd %v must not be negative", c.WD)
	}
	if c.Optimizer == "proxgen" && c.WD > 0 {
		return fmt.Errorf("-optimizer proxgen has no weight decay (Algorithm 1); use proxgenw for -wd %v", c.WD)
	}
	if !(c.Momentum >= 0 && c.Momentum < 1) {
		return fmt.Errorf("-momentum %v: want a value in [0, 1)", c.Momentum)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1) {
		return fmt.Errorf("-beta1 %v and -beta2 %v: want values in [0, 1)", c.Beta1, c.Beta2)
	}
	if !(c.Eps > 0) {
		return fmt.Errorf("-eps %v must be positive", c.Eps)
	}

	// Epochs, batches, data.
	if c.Epochs < 1 {
		return fmt.Errorf("-epochs %d: want at least 1", c.Epochs)
	}
	if c.Batch < 1 || c.EvalBatch < 1 {
		return fmt.Errorf("-batch %d and -eval-batch %d must be positive", c.Batch, c.EvalBatch)
	}
	if c.Batch > models.MaxBatch || c.EvalBatch > models.MaxBatch {
		return fmt.Errorf("-batch %d and -eval-batch %d: at most %d", c.Batch, c.EvalBatch, models.MaxBatch)
	}
	if c.TrainSubset < 0 || c.TestSubset < 0 {
		return fmt.Errorf("-train-subset %d and -test-subset %d must not be negative", c.TrainSubset, c.TestSubset)
	}
	if c.TrainSubset > 0 && c.TrainSubset < c.Batch && !c.EvalOnly {
		return fmt.Errorf("-train-subset %d is smaller than -batch %d: no full batch to train on", c.TrainSubset, c.Batch)
	}
	if c.Threads < 0 || c.LogEvery < 0 || c.SaveEvery < 0 {
		return fmt.Errorf("-threads %d, -log-every %d and -save-every %d must not be negative", c.Threads, c.LogEvery, c.SaveEvery)
	}
	if c.Threads > 1024 {
		return fmt.Errorf("-threads %d: at most 1024", c.Threads)
	}
	if _, err := c.precision(); err != nil {
		return err
	}
	if !slices.Contains([]string{"auto", "bar", "lines", "none"}, c.Progress) {
		return fmt.Errorf("-progress %q: want bar, lines, none or auto", c.Progress)
	}

	// Schedule, homotopy and hard quantisation.
	if c.Schedule == "auto" {
		switch {
		case c.Optimizer == "proxsgd":
			c.Schedule = "invsqrt:4"
		case c.Optimizer == "proxquant" || c.Optimizer == "bc" || c.Epochs < 4:
			c.Schedule = "const"
		default:
			c.Schedule = fmt.Sprintf("multistep:%d,%d", c.Epochs/2, c.Epochs*5/6)
		}
	}
	if sp, err := parseSchedule(c.Schedule); err != nil {
		return err
	} else if err := sp.Check(c.Epochs); err != nil {
		return fmt.Errorf("-schedule: %w", err)
	}
	switch c.BinScale {
	case "", "1":
		c.BinScale = ""
	case "mean":
		if !c.binary() {
			return fmt.Errorf("-bin-scale mean needs a binary regularizer (-reg bin-...) or BinaryConnect, not -reg %s with -optimizer %s", c.Reg, c.Optimizer)
		}
	default:
		return fmt.Errorf("-bin-scale %q: want 1 or mean", c.BinScale)
	}
	switch c.Prox {
	case "", "step":
		c.Prox = ""
	case "lazy":
		if err := c.checkLazy(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-prox %q: want step or lazy", c.Prox)
	}
	switch c.Homotopy {
	case "auto":
		c.Homotopy = "off"
		if c.binaryReg() {
			c.Homotopy = "on"
		}
	case "on", "off":
	default:
		return fmt.Errorf("-homotopy %q: want on, off or auto", c.Homotopy)
	}
	if c.Homotopy == "on" && c.Reg == "none" {
		return errors.New("-homotopy on needs a regularizer")
	}
	switch {
	case c.HardQuantEpoch == -2: // not given
		c.HardQuantEpoch = 0
		if c.binaryReg() {
			c.HardQuantEpoch = max(1, c.Epochs*2/3)
		}
	case c.HardQuantEpoch < 0:
		return fmt.Errorf("-hard-quant-epoch %d must not be negative", c.HardQuantEpoch)
	case c.HardQuantEpoch > 0 && !c.binaryReg():
		return fmt.Errorf("-hard-quant-epoch needs a binary regularizer (bin-lq:Q) with proxgen, proxgenw or proxquant")
	}

	if err := c.checkGMP(); err != nil {
		return err
	}
	if err := c.checkRegCost(); err != nil {
		return err
	}

	if c.Out == "" {
		c.Out = fmt.Sprintf("runs/%s-%s-%s-s%d", c.Model, c.Optimizer, strings.NewReplacer(":", "", "/", "").Replace(c.Reg), c.Seed)
	}
	return nil
}

// checkRegCost resolves and checks -reg-cost.
func (c *config) checkRegCost() error {
	switch c.RegCost {
	case "", "none":
		c.RegCost = "" // stored as absent, as in runs from before the flag
		return nil
	case "pixels":
	default:
		return fmt.Errorf("-reg-cost %q: want none or pixels", c.RegCost)
	}
	switch {
	case c.binary() || c.Optimizer == "l0hc":
		return fmt.Errorf("-reg-cost %s does not combine with binary weights or ℓ0 hard-concrete gates", c.RegCost)
	case c.Reg == "none" || !c.usesReg():
		return fmt.Errorf("-reg-cost %s needs a regularizer (-reg, with an optimizer that takes one)", c.RegCost)
	}
	return nil
}

// DefaultGMPEvery is the default number of updates between two pruning
// steps of -gmp.
const DefaultGMPEvery = 100

// checkGMP resolves and checks the gradual-pruning flags.
func (c *config) checkGMP() error {
	if c.GMP == 0 {
		if c.GMPBegin != 0 || (c.GMPEnd != -2 && c.GMPEnd != 0) || c.GMPEvery != 0 {
			return errors.New("-gmp-begin, -gmp-end and -gmp-every need -gmp")
		}
		c.GMPEnd = 0
		return nil
	}
	if !(c.GMP > 0 && c.GMP < 1) {
		return fmt.Errorf("-gmp %v: want a fraction of zeros in (0, 1)", c.GMP)
	}
	if c.GMPEnd == -2 {
		c.derive("gmp_end")
		c.GMPEnd = max(1, c.Epochs*2/3)
	}
	if c.GMPEvery == 0 {
		c.GMPEvery = DefaultGMPEvery
	}
	switch {
	case c.GMPBegin < 0 || c.GMPEnd < c.GMPBegin || c.GMPEnd > c.Epochs:
		return fmt.Errorf("-gmp-begin %d and -gmp-end %d: want 0 ≤ begin ≤ end ≤ -epochs %d", c.GMPBegin, c.GMPEnd, c.Epochs)
	case c.GMPEvery < 1:
		return fmt.Errorf("-gmp-every %d must be positive", c.GMPEvery)
	case c.EvalOnly || c.Compact != "":
		return errors.New("-eval-only and -compact do not prune; prune with a training run")
	case c.pruning() || c.Optimizer == "l0hc" || c.binary():
		return errors.New("-gmp does not combine with -prune-filters/-prune-flops, ℓ0 hard-concrete gates or binary weights")
	}
	return nil
}

// pruning reports whether the run prunes filters before training.
func (c *config) pruning() bool { return c.PruneFilters > 0 || c.PruneFLOPs > 0 || c.PruneMultiple > 0 }

// checkPrune checks the pruning flags.
func (c *config) checkPrune() error {
	if !(c.PruneFilters >= 0 && c.PruneFilters < 1) {
		return fmt.Errorf("-prune-filters %v: want a fraction in [0, 1)", c.PruneFilters)
	}
	if !(c.PruneFLOPs >= 0 && c.PruneFLOPs <= 1) {
		return fmt.Errorf("-prune-flops %v: want a fraction in (0, 1]", c.PruneFLOPs)
	}
	if c.PruneMultiple < 0 {
		return fmt.Errorf("-prune-multiple %d must not be negative", c.PruneMultiple)
	}
	if n := btoi(c.PruneFilters > 0) + btoi(c.PruneFLOPs > 0) + btoi(c.PruneMultiple > 0); n > 1 {
		return errors.New("-prune-filters, -prune-flops and -prune-multiple exclude each other")
	}
	if c.PruneResidual && !c.pruning() {
		return errors.New("-prune-residual needs -prune-filters, -prune-flops or -prune-multiple")
	}
	if c.pruning() && (c.EvalOnly || c.Compact != "") {
		return errors.New("-eval-only and -compact do not prune; prune with a training run")
	}
	if c.pruning() && (c.Optimizer == "l0hc" || c.binary()) {
		return errors.New("-prune-filters, -prune-flops and -prune-multiple do not combine with ℓ0 hard-concrete gates or binary weights")
	}
	return nil
}

// checkModel reports whether models.New knows name.
func checkModel(name string) error {
	if models.CheckName(name) != nil {
		return fmt.Errorf("-model %q: want one of %s, or resnet<6n+2> up to resnet%d", name, strings.Join(models.Names(), ", "), models.MaxResNetDepth)
	}
	return nil
}

// parseReg returns the regularizer named by s (nil for "none"), in the
// grammar of prox.Parse.
func parseReg(s string) (prox.Regularizer, error) {
	r, err := prox.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-reg %q: %v", s, strings.TrimPrefix(err.Error(), "optim: "))
	}
	return r, nil
}

// parseSchedule parses a -schedule value (schedule.Parse's grammar).
// A warm-up cannot precede plateau here: the trainer observes the test
// loss through the schedule itself.
func parseSchedule(s string) (schedule.Spec, error) {
	sp, err := schedule.Parse(s)
	if err != nil {
		return sp, fmt.Errorf("-schedule: %w", err)
	}
	if sp.Kind == "plateau" && sp.WarmupEpochs > 0 {
		return sp, fmt.Errorf("-schedule %q: plateau cannot follow a warm-up", s)
	}
	return sp, nil
}

// precision returns the arithmetic of the training products, -precision.
func (c *config) precision() (autograd.Precision, error) {
	p, err := autograd.ParsePrecision(c.Precision)
	if err != nil {
		return p, fmt.Errorf("-precision: %w", err)
	}
	return p, nil
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
