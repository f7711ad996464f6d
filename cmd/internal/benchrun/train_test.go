package benchrun

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/internal/procstat"
)

// jsonKeys returns the keys of v's JSON object in their order.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not a JSON object", b)
	}
	var keys []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key.(string))
	}
	return keys
}

// checkTable reports the strings of want that table lacks.
func checkTable(t *testing.T, table string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s", w, table)
		}
	}
}

// tinyTrain is a configuration that trains a small model quickly.
func tinyTrain(model string) TrainConfig {
	c := DefaultTrainConfig()
	c.Model, c.Batch, c.Width = model, 2, 0.25
	if model == "vgg16" {
		c.Width = 0.0625
	}
	if model == "lstm" {
		c.Batch, c.BPTT, c.Vocab, c.Emb, c.Hidden = 3, 4, 50, 6, 5
	}
	c.Warmup, c.Steps = 1, 2
	return c
}

func TestTrain(t *testing.T) {
	defer withThreads(1)()
	for _, tc := range []struct {
		model string
		keys  string // the JSON keys, in order
	}{
		{"resnet20", "impl model threads batch kernel params arena precision warmup steps seconds ms_per_step ms_per_step_min cpu_ms_per_step img_per_s alloc_mb_per_step gc_per_step peak_rss_mb loss go_version gomaxprocs"},
		{"vgg16", "impl model threads batch kernel params arena precision warmup steps seconds ms_per_step ms_per_step_min cpu_ms_per_step img_per_s alloc_mb_per_step gc_per_step peak_rss_mb loss go_version gomaxprocs"},
		{"lstm", "impl model threads batch bptt kernel params arena precision warmup steps seconds ms_per_step ms_per_step_min cpu_ms_per_step tok_per_s alloc_mb_per_step gc_per_step peak_rss_mb loss go_version gomaxprocs"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			c := tinyTrain(tc.model)
			r, err := Train(c)
			if err != nil {
				t.Fatal(err)
			}
			keys := tc.keys
			if _, ok := procstat.CPUTime(); !ok {
				keys = strings.Replace(keys, " cpu_ms_per_step", "", 1)
			}
			if _, ok := procstat.PeakRSS(); !ok {
				keys = strings.Replace(keys, " peak_rss_mb", "", 1)
			}
			if got := strings.Join(jsonKeys(t, r), " "); got != keys {
				t.Errorf("JSON keys\n%s\nwant\n%s", got, keys)
			}
			if r.Model != tc.model || r.Impl != "go" || r.Steps != 2 || r.Warmup != 1 || r.Batch != c.Batch || r.Threads != 1 || r.GOMAXPROCS != 1 {
				t.Errorf("result %+v does not echo the configuration", r)
			}
			rate := r.ImgPerS
			if tc.model == "lstm" {
				rate = r.TokPerS
				if r.BPTT != c.BPTT {
					t.Errorf("bptt = %d, want %d", r.BPTT, c.BPTT)
				}
			}
			if rate == nil || !(*rate > 0) {
				t.Errorf("rate %v, want > 0", rate)
			}
			if !(r.MsPerStep > 0) || r.MsMin > r.MsPerStep || !(r.Elapsed > 0) {
				t.Errorf("ms_per_step %v, min %v, elapsed %v: want 0 < min <= mean", r.MsPerStep, r.MsMin, r.Elapsed)
			}
			if r.Params <= 0 || r.Kernel != blas.Kernel() || r.Precision != "fp32" || !r.Arena || r.Profile != nil {
				t.Errorf("result %+v", r)
			}
			if _, ok := procstat.PeakRSS(); ok && !(r.PeakRSSMB > 0) {
				t.Errorf("peak_rss_mb = %v, want > 0", r.PeakRSSMB)
			}
		})
	}
}

// withThreads sets the thread count to n and returns the restore.
func withThreads(n int) func() {
	_, restore := compute.SetThreads(n)
	return restore
}

// trainLoss returns the loss after c's steps on n threads.
func trainLoss(t *testing.T, c TrainConfig, n int) *TrainResult {
	t.Helper()
	defer withThreads(n)()
	r, err := Train(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTrainSameSeedSameLoss checks that the benchmark's training is
// deterministic: the same seed gives the same loss after the same steps,
// with and without the arena, on 1 and 2 threads.
func TestTrainSameSeedSameLoss(t *testing.T) {
	c := tinyTrain("resnet20")
	noArena, seed2 := c, c
	noArena.Arena, seed2.Seed = false, 2
	a, b, d := trainLoss(t, c, 1).Loss, trainLoss(t, c, 2).Loss, trainLoss(t, noArena, 1).Loss
	if a != b || a != d {
		t.Errorf("losses differ: 1 thread %v, 2 threads %v, no arena %v", a, b, d)
	}
	if e := trainLoss(t, seed2, 1).Loss; e == a {
		t.Errorf("seed 2 gives the same loss %v as seed 1", e)
	}
}

// TestTrainPrecision runs a bf16 step: the same loss at 1 and 2
// threads, another than fp32's where the CPU computes in bfloat16, and
// the precision named in the result.
func TestTrainPrecision(t *testing.T) {
	f := tinyTrain("resnet20")
	c := f
	c.Precision = autograd.BF16
	a, b, fp := trainLoss(t, c, 1), trainLoss(t, c, 2), trainLoss(t, f, 1)
	if a.Loss != b.Loss {
		t.Errorf("bf16 losses differ: 1 thread %v, 2 threads %v", a.Loss, b.Loss)
	}
	if blas.BF16Native() {
		if a.Precision != "bf16" || a.Loss == fp.Loss {
			t.Errorf("bf16 run: precision %v, loss %v (fp32 %v)", a.Precision, a.Loss, fp.Loss)
		}
	} else if a.Precision != "fp32 (bf16 asked; no AVX512_BF16)" {
		t.Errorf("bf16 without AVX512_BF16 reported as %q", a.Precision)
	}
}

// TestTrainProfiles writes the CPU and allocation profiles and the op
// profile of the timed steps.
func TestTrainProfiles(t *testing.T) {
	dir := t.TempDir()
	c := tinyTrain("lstm")
	c.Warmup, c.Steps, c.OpProfile = 0, 1, true
	c.CPUProfile, c.MemProfile = filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	r, err := Train(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{c.CPUProfile, c.MemProfile, c.MemProfile + ".base"} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s not written: %v", filepath.Base(f), err)
		}
	}
	if r.Profile == nil {
		t.Fatal("no op profile")
	}
	var table, prof bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := r.Profile.WriteTable(&prof); err != nil {
		t.Fatal(err)
	}
	checkTable(t, table.String(), "tokens/s", "3 columns × 4 steps", "ms/step", "GEMM kernel", "parameters", "last loss")
	checkTable(t, prof.String(), "calls/step", "optimizer step", "rest", "Embedding")
}

func TestTrainBadConfig(t *testing.T) {
	for name, change := range map[string]func(*TrainConfig){
		"model":      func(c *TrainConfig) { c.Model = "resnet99x" },
		"batch":      func(c *TrainConfig) { c.Batch = -1 },
		"steps":      func(c *TrainConfig) { c.Steps = 0 },
		"warmup":     func(c *TrainConfig) { c.Warmup = -1 },
		"width":      func(c *TrainConfig) { c.Width = 0 },
		"lr":         func(c *TrainConfig) { c.LR = -1 },
		"cpuprofile": func(c *TrainConfig) { c.CPUProfile = filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof") },
	} {
		c := tinyTrain("resnet20")
		c.Warmup, c.Steps = 0, 1
		change(&c)
		if _, err := Train(c); err == nil {
			t.Errorf("%s: Train(%+v) succeeded, want an error", name, c)
		}
	}
}
