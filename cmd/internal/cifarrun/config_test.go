package cifarrun

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/optim/schedule"
)

func mustParse(t *testing.T, args ...string) *config {
	t.Helper()
	c, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatalf("parseConfig(%q): %v", args, err)
	}
	return c
}

func TestConfigDefaults(t *testing.T) {
	c := mustParse(t)
	want := config{
		Model: "resnet20", Width: 1, Shortcut: "A", Optimizer: "proxgen", Reg: "l12",
		Lambda: 0.1, LambdaScale: "n", LR: 1e-3, WD: 0, Momentum: 0.9, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Schedule: "multistep:15,25", Homotopy: "off", HardQuantEpoch: 0, Recalibrate: DefaultRecalibrate,
		Epochs: 30, Batch: 128, EvalBatch: 500, Seed: 1, Progress: "auto", Precision: "fp32",
		Out:     "runs/resnet20-proxgen-l12-s1",
		Derived: []string{"schedule", "hard_quant_epoch"},
	}
	c.explicit = nil
	if !reflect.DeepEqual(*c, want) {
		t.Fatalf("defaults\n got %+v\nwant %+v", *c, want)
	}
	if got := perStepLambda(c, 50000); got != 0.1/50000 {
		t.Fatalf("per-step λ %v, want 2e-6", got)
	}
}

func TestConfigMethodDefaults(t *testing.T) {
	cases := []struct {
		args  []string
		check func(c *config) bool
	}{
		{[]string{"-optimizer", "proxgenw"}, func(c *config) bool { return c.WD == 0.01 && c.Reg == "l12" }},
		{[]string{"-optimizer", "adam"}, func(c *config) bool { return c.Reg == "none" && c.Lambda == 0 && c.WD == 0 && c.LR == 1e-3 }},
		{[]string{"-optimizer", "adamw"}, func(c *config) bool { return c.WD == 0.01 }},
		{[]string{"-optimizer", "sgd"}, func(c *config) bool { return c.LR == 0.1 && c.WD == 5e-4 && c.Reg == "none" }},
		{[]string{"-optimizer", "proxgen-sgd"}, func(c *config) bool { return c.LR == 0.1 && c.WD == 5e-4 && c.Reg == "l12" && c.Lambda == 0.1 }},
		{[]string{"-optimizer", "subgrad", "-reg", "l1"}, func(c *config) bool { return c.Reg == "l1" && c.Lambda == 0.1 }},
		{[]string{"-optimizer", "proxsgd"}, func(c *config) bool { return c.Reg == "l1" && c.LR == 0.06 && c.Schedule == "invsqrt:4" }},
		{[]string{"-optimizer", "proxquant", "-epochs", "300"}, func(c *config) bool {
			return c.Reg == "binw:1" && c.Lambda == 1e-4 && c.LambdaScale == "1" && c.LR == 0.01 &&
				c.Schedule == "const" && c.Homotopy == "on" && c.HardQuantEpoch == 200
		}},
		{[]string{"-reg", "binw:2/3", "-epochs", "9"}, func(c *config) bool {
			return c.Lambda == 5e-8 && c.LambdaScale == "1" && c.Homotopy == "on" && c.HardQuantEpoch == 6 && c.Schedule == "multistep:4,7"
		}},
		{[]string{"-optimizer", "bc"}, func(c *config) bool { return c.Reg == "none" && c.LR == 0.01 && c.HardQuantEpoch == 0 && c.binary() }},
		{[]string{"-optimizer", "bc-sgd", "-bin-scale", "mean"}, func(c *config) bool {
			return c.Reg == "none" && c.LR == 0.1 && c.HardQuantEpoch == 0 && c.binary() && c.BinScale == "mean"
		}},
		{[]string{"-optimizer", "proxgen-sgd", "-reg", "bin-l1", "-prox", "lazy"}, func(c *config) bool { return c.Prox == "lazy" && c.Homotopy == "on" }},
		{[]string{"-prox", "step"}, func(c *config) bool { return c.Prox == "" }},
		{[]string{"-optimizer", "proxgen-sgd", "-reg", "gl0:block", "-prox", "lazy"}, func(c *config) bool { return c.Prox == "lazy" }},
		{[]string{"-reg", "gl0", "-no-couple-bn", "-prox", "lazy"}, func(c *config) bool { return c.Prox == "lazy" }},
		{[]string{"-reg", "lq:0.3", "-lambda", "2", "-lambda-scale", "1"}, func(c *config) bool { return c.Lambda == 2 && c.LambdaScale == "1" }},
		{[]string{"-epochs", "3"}, func(c *config) bool { return c.Schedule == "const" }},
		{[]string{"-shortcut", "b"}, func(c *config) bool { return c.Shortcut == "B" }},
		{[]string{"-model", "resnet110"}, func(c *config) bool { return c.Model == "resnet110" }},
		{[]string{"-eval-only", "-weights", "w.safetensors"}, func(c *config) bool { return c.EvalOnly }},
		{[]string{"-eval-only", "-weights", "w.safetensors", "-dense"}, func(c *config) bool { return c.Dense }},
		{[]string{"-eval-only", "-weights", "w.safetensors"}, func(c *config) bool { return c.Recalibrate == 0 }},
		{[]string{"-eval-only", "-weights", "w.safetensors", "-recalibrate", "50"}, func(c *config) bool { return c.Recalibrate == 50 }},
		{[]string{"-compact", "x", "-weights", "w.safetensors"}, func(c *config) bool { return c.Recalibrate == 0 }},
		{[]string{"-recalibrate", "0"}, func(c *config) bool { return c.Recalibrate == 0 }},
		{[]string{"-optimizer", "sgd", "-gmp", "0.9", "-epochs", "30"}, func(c *config) bool {
			return c.GMP == 0.9 && c.GMPBegin == 0 && c.GMPEnd == 20 && c.GMPEvery == 100 && slices.Contains(c.Derived, "gmp_end")
		}},
	}
	for _, tc := range cases {
		c := mustParse(t, tc.args...)
		if !tc.check(c) {
			t.Errorf("%q resolved to %+v", tc.args, *c)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-model", "resnet21"}, `-model "resnet21"`},
		{[]string{"-model", "alexnet"}, "want one of vgg16"},
		{[]string{"-width", "0"}, "-width 0"},
		{[]string{"-shortcut", "C"}, "-shortcut"},
		{[]string{"-optimizer", "lion"}, `-optimizer "lion"`},
		{[]string{"-reg", "l3"}, `-reg "l3": unknown regularizer`},
		{[]string{"-reg", "lq:1.5"}, "outside [0, 1]"},
		{[]string{"-reg", "binw:x"}, "bad exponent"},
		{[]string{"-optimizer", "adam", "-reg", "l1"}, "takes no regularizer"},
		{[]string{"-optimizer", "adam", "-lambda", "0.1"}, "no effect without a regularizer"},
		{[]string{"-optimizer", "proxquant", "-reg", "l1"}, "needs a binary regularizer"},
		{[]string{"-optimizer", "subgrad", "-reg", "l0"}, "zero gradient"},
		{[]string{"-schedule", "invsqrt:-1"}, "offset"},
		{[]string{"-lambda", "-1"}, "must not be negative"},
		{[]string{"-lambda", "x"}, "invalid value"},
		{[]string{"-lambda", "NaN"}, "finite"},
		{[]string{"-lambda-scale", "2"}, "-lambda-scale"},
		{[]string{"-lr", "0"}, "-lr 0 must be positive"},
		{[]string{"-wd", "-1", "-optimizer", "adamw"}, "-wd -1"},
		{[]string{"-wd", "0.1"}, "use proxgenw"},
		{[]string{"-momentum", "1"}, "-momentum"},
		{[]string{"-beta2", "1"}, "-beta2"},
		{[]string{"-eps", "0"}, "-eps"},
		{[]string{"-epochs", "0"}, "-epochs 0"},
		{[]string{"-batch", "0"}, "-batch 0"},
		{[]string{"-train-subset", "-5"}, "must not be negative"},
		{[]string{"-train-subset", "100"}, "smaller than -batch 128"},
		{[]string{"-threads", "-1"}, "-threads -1"},
		{[]string{"-progress", "fancy"}, "-progress"},
		{[]string{"-schedule", "cosines"}, "unknown schedule"},
		{[]string{"-schedule", "warmup:2+plateau:0.5"}, "plateau cannot follow a warm-up"},
		{[]string{"-schedule", "onecycle:2"}, "PCT"},
		{[]string{"-epochs", "5", "-schedule", "warmup:5+cosine"}, "leaves nothing"},
		{[]string{"-schedule", "multistep:5,3"}, "must increase"},
		{[]string{"-schedule", "multistep:a"}, "not a positive epoch"},
		{[]string{"-schedule", "multistep:5:2"}, "gamma"},
		{[]string{"-schedule", "step:0:0.5"}, "EVERY"},
		{[]string{"-schedule", "plateau:1.2"}, "factor"},
		{[]string{"-schedule", "const:1"}, "takes no arguments"},
		{[]string{"-homotopy", "yes"}, "-homotopy"},
		{[]string{"-prox", "later"}, "want step or lazy"},
		{[]string{"-optimizer", "bc-sgd", "-prox", "lazy"}, "needs a proximal method"},
		{[]string{"-optimizer", "adam", "-prox", "lazy"}, "needs a proximal method"},
		{[]string{"-optimizer", "proxgen-sgd", "-reg", "none", "-prox", "lazy"}, "needs a regularizer"},
		{[]string{"-reg", "gl0", "-prox", "lazy"}, "-no-couple-bn"},
		{[]string{"-optimizer", "adam", "-homotopy", "on"}, "needs a regularizer"},
		{[]string{"-hard-quant-epoch", "5"}, "needs a binary regularizer"},
		{[]string{"-reg", "binw:1", "-hard-quant-epoch", "-3"}, "must not be negative"},
		{[]string{"-eval-only"}, "needs -weights"},
		{[]string{"-eval-only", "-weights", "w", "-resume"}, "exclude each other"},
		{[]string{"-dense"}, "-dense applies to -eval-only"},
		{[]string{"-prune-filters", "1"}, "-prune-filters 1"},
		{[]string{"-prune-flops", "-0.5"}, "-prune-flops -0.5"},
		{[]string{"-prune-filters", "0.5", "-prune-flops", "0.5"}, "exclude each other"},
		{[]string{"-prune-residual"}, "needs -prune-filters"},
		{[]string{"-prune-multiple", "8", "-prune-flops", "0.5"}, "exclude each other"},
		{[]string{"-prune-multiple", "-8"}, "-prune-multiple -8"},
		{[]string{"-prune-multiple", "8", "-optimizer", "bc"}, "binary weights"},
		{[]string{"-prune-filters", "0.5", "-optimizer", "bc"}, "binary weights"},
		{[]string{"-prune-filters", "0.5", "-optimizer", "bc-sgd"}, "binary weights"},
		{[]string{"-bin-scale", "mean", "-optimizer", "sgd"}, "-bin-scale mean needs a binary regularizer"},
		{[]string{"-prune-filters", "0.5", "-eval-only", "-weights", "w"}, "do not prune"},
		{[]string{"-compact", "x"}, "-compact needs -weights"},
		{[]string{"-compact", "x", "-weights", "w", "-resume"}, "-compact excludes"},
		{[]string{"-recalibrate", "-2"}, "-recalibrate -2 must not be negative"},
		{[]string{"-gmp", "1"}, "-gmp 1"},
		{[]string{"-gmp-every", "5"}, "need -gmp"},
		{[]string{"-gmp", "0.5", "-gmp-begin", "5", "-gmp-end", "4"}, "want 0 ≤ begin ≤ end"},
		{[]string{"-gmp", "0.5", "-gmp-end", "31"}, "want 0 ≤ begin ≤ end"},
		{[]string{"-gmp", "0.5", "-gmp-every", "-1"}, "-gmp-every -1"},
		{[]string{"-gmp", "0.5", "-optimizer", "bc"}, "-gmp does not combine"},
		{[]string{"-gmp", "0.5", "-prune-filters", "0.5"}, "-gmp does not combine"},
		{[]string{"-reg-cost", "flops"}, `-reg-cost "flops"`},
		{[]string{"-reg-cost", "pixels", "-optimizer", "sgd"}, "needs a regularizer"},
		{[]string{"-reg-cost", "pixels", "-reg", "binw:1"}, "does not combine"},
		{[]string{"-reg-cost", "pixels", "-optimizer", "l0hc"}, "does not combine"},
		{[]string{"-recalibrate", "x"}, "invalid value"},
		{[]string{"-compact", "x", "-weights", "w", "-recalibrate", "10"}, "-compact does not recalibrate"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nosuchflag"}, "not defined"},
	}
	for _, tc := range cases {
		_, err := parseConfig(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseConfig(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseConfig([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestParseSchedule(t *testing.T) {
	sp, err := parseSchedule("multistep:150,250:0.2")
	if err != nil {
		t.Fatal(err)
	}
	s := build(t, sp, 10)
	for _, c := range []struct {
		t    int
		want float64
	}{{1, 1}, {1500, 1}, {1501, 0.2}, {2500, 0.2}, {2501, 0.2 * 0.2}} {
		if got := s.Rate(1, c.t); abs(got-c.want) > 1e-12 {
			t.Errorf("multistep rate at update %d = %v, want %v", c.t, got, c.want)
		}
	}
	sp, _ = parseSchedule("step:2:0.5")
	if got := build(t, sp, 3).Rate(1, 7); got != 0.5 {
		t.Errorf("step rate at update 7 (epoch 3) = %v, want 0.5", got)
	}
	if got := build(t, sp, 3).Rate(1, 13); got != 0.25 {
		t.Errorf("step rate at update 13 (epoch 5) = %v, want 0.25", got)
	}
	sp, _ = parseSchedule("invsqrt")
	if got := build(t, sp, 3).Rate(1, 4); got != 0.5 {
		t.Errorf("invsqrt rate at update 4 = %v", got)
	}
	sp, _ = parseSchedule("warmup:1:0.5+cosine:0.01")
	if got := build(t, sp, 3).Rate(1, 2); got != 0.5+0.5/3 {
		t.Errorf("warmup rate at update 2 = %v", got)
	}
	if got := build(t, sp, 3).Rate(1, 1200); abs(got-0.01) > 1e-4 {
		t.Errorf("cosine rate at the last update = %v, want about the floor 0.01", got)
	}
	sp, _ = parseSchedule("invsqrt:5")
	if got := build(t, sp, 3).Rate(1, 4); got != 1.0/3 {
		t.Errorf("invsqrt:5 rate at update 4 = %v, want 1/3", got)
	}
}

// build returns sp's schedule for 400 epochs of perEpoch updates.
func build(t *testing.T, sp schedule.Spec, perEpoch int) schedule.Schedule {
	t.Helper()
	s, err := sp.Build(perEpoch, 400)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDeprecatedReg checks that cmd/cifar's former regularizer spellings
// still work, with a warning only when given explicitly.
func TestDeprecatedReg(t *testing.T) {
	for _, tc := range []struct {
		args []string
		warn string
	}{
		{[]string{"-optimizer", "proxquant", "-reg", "binw:1"}, `write "bin-l1"`},
		{[]string{"-reg", "lq:1/3"}, "deprecated spelling"},
		{[]string{"-optimizer", "proxquant", "-reg", "bin-l1"}, ""},
		{[]string{"-optimizer", "proxquant"}, ""}, // auto: binw:1, not given
		{[]string{"-reg", "l12"}, ""},
	} {
		var out strings.Builder
		c, err := parseConfig(tc.args, &out)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := out.String(); (tc.warn == "") != (got == "") || !strings.Contains(got, tc.warn) {
			t.Errorf("%v: warning %q, want %q", tc.args, got, tc.warn)
		}
		if c.Optimizer == "proxquant" && (!c.binaryReg() || c.HardQuantEpoch == 0) {
			t.Errorf("%v: a binary run without hard quantisation: %+v", tc.args, c)
		}
	}
}

// TestRederiveOldCheckpoint checks -resume -epochs on a configuration
// stored before derived settings were recorded: refused naming the flag
// when the stored schedule is the one the old length implies, accepted
// when it is not (then it was chosen).
func TestRederiveOldCheckpoint(t *testing.T) {
	stored, err := parseConfig([]string{"-epochs", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stored.Derived = nil // as written before the field existed
	merged := *stored
	merged.Epochs = 5
	if err := rederive(stored, &merged); err == nil || !strings.Contains(err.Error(), "-schedule const") || !strings.Contains(err.Error(), "-schedule multistep:2,4") {
		t.Fatalf("old checkpoint with the derived schedule: error %v", err)
	}
	stored.Schedule = "cosine"
	merged = *stored
	merged.Epochs = 5
	if err := rederive(stored, &merged); err != nil || merged.Schedule != "cosine" {
		t.Fatalf("old checkpoint with a chosen schedule: %v, schedule %q", err, merged.Schedule)
	}
}
