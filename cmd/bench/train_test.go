package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// lastJSON decodes the last line of out as a JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line of output is not a JSON object: %v\noutput:\n%s", err, out)
	}
	return m
}

// num returns the JSON number m[key], failing the test if it is missing.
func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("JSON has no number %q: %v", key, m)
	}
	return v
}

func runTrainForTest(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runTrain(args, &out, &errOut)
	return out.String(), err
}

func TestTrainJSON(t *testing.T) {
	procs, workers := runtime.GOMAXPROCS(0), parallel.Workers()
	for _, tc := range []struct {
		name  string
		args  []string
		rate  string
		other string
		batch float64
	}{
		{"resnet20", []string{"-model", "resnet20", "-batch", "2", "-width", "0.25"}, "img_per_s", "tok_per_s", 2},
		{"vgg16", []string{"-model", "vgg16", "-batch", "2", "-width", "0.0625"}, "img_per_s", "tok_per_s", 2},
		{"lstm", []string{"-model", "lstm", "-batch", "3", "-bptt", "4", "-vocab", "50", "-emb", "6", "-hidden", "5"}, "tok_per_s", "img_per_s", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "-warmup", "1", "-steps", "2", "-threads", "1", "-json")
			out, err := runTrainForTest(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			m := lastJSON(t, out)
			if m["model"] != tc.name || m["impl"] != "go" {
				t.Errorf("model, impl = %v, %v; want %s, go", m["model"], m["impl"], tc.name)
			}
			if _, ok := m[tc.other]; ok {
				t.Errorf("JSON has %q besides %q: %v", tc.other, tc.rate, m)
			}
			if r := num(t, m, tc.rate); !(r > 0) {
				t.Errorf("%s = %v, want > 0", tc.rate, r)
			}
			if ms := num(t, m, "ms_per_step"); !(ms > 0) || num(t, m, "ms_per_step_min") > ms {
				t.Errorf("ms_per_step %v, min %v: want 0 < min <= mean", ms, m["ms_per_step_min"])
			}
			if s := num(t, m, "steps"); s != 2 {
				t.Errorf("steps = %v, want 2", s)
			}
			if b := num(t, m, "batch"); b != tc.batch {
				t.Errorf("batch = %v, want %v", b, tc.batch)
			}
			if th := num(t, m, "threads"); th != 1 {
				t.Errorf("threads = %v, want 1", th)
			}
			if p := num(t, m, "params"); !(p > 0) {
				t.Errorf("params = %v, want > 0", p)
			}
			if k, _ := m["kernel"].(string); k == "" {
				t.Errorf("kernel missing: %v", m)
			}
			if _, ok := procstat.PeakRSS(); ok {
				if r := num(t, m, "peak_rss_mb"); !(r > 0) {
					t.Errorf("peak_rss_mb = %v, want > 0", r)
				}
			}
			if runtime.GOMAXPROCS(0) != procs || parallel.Workers() != workers {
				t.Errorf("GOMAXPROCS/workers not restored: %d/%d, want %d/%d", runtime.GOMAXPROCS(0), parallel.Workers(), procs, workers)
			}
		})
	}
}

// TestTrainSameSeedSameLoss checks that the benchmark's training is
// deterministic: the same seed gives the same loss after the same steps,
// with and without the arena.
func TestTrainSameSeedSameLoss(t *testing.T) {
	loss := func(args ...string) float64 {
		out, err := runTrainForTest(t, append([]string{"-model", "resnet20", "-batch", "2", "-width", "0.25",
			"-warmup", "1", "-steps", "2", "-json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return num(t, lastJSON(t, out), "loss")
	}
	a, b, c := loss("-threads", "1"), loss("-threads", "2"), loss("-threads", "1", "-arena=false")
	if a != b || a != c {
		t.Errorf("losses differ: 1 thread %v, 2 threads %v, no arena %v", a, b, c)
	}
	if d := loss("-threads", "1", "-seed", "2"); d == a {
		t.Errorf("seed 2 gives the same loss %v as seed 1", d)
	}
}

// TestTrainPrecision runs a bf16 step: the same loss at 1 and 2
// threads, another than fp32's where the CPU computes in bfloat16, and
// the precision named in the result.
func TestTrainPrecision(t *testing.T) {
	run := func(args ...string) map[string]any {
		out, err := runTrainForTest(t, append([]string{"-model", "resnet20", "-batch", "2", "-width", "0.25",
			"-warmup", "1", "-steps", "2", "-json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lastJSON(t, out)
	}
	a, b := run("-threads", "1", "-precision", "bf16"), run("-threads", "2", "-precision", "bf16")
	if num(t, a, "loss") != num(t, b, "loss") {
		t.Errorf("bf16 losses differ: 1 thread %v, 2 threads %v", a["loss"], b["loss"])
	}
	f := run("-threads", "1")
	if blas.BF16Native() {
		if a["precision"] != "bf16" || num(t, a, "loss") == num(t, f, "loss") {
			t.Errorf("bf16 run: precision %v, loss %v (fp32 %v)", a["precision"], a["loss"], f["loss"])
		}
	} else if a["precision"] == "bf16" {
		t.Errorf("bf16 reported without AVX512_BF16")
	}
	if f["precision"] != "fp32" {
		t.Errorf("default precision %v", f["precision"])
	}
}

func TestTrainTableAndProfile(t *testing.T) {
	dir := t.TempDir()
	prof, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	out, err := runTrainForTest(t, "-model", "lstm", "-batch", "2", "-bptt", "3", "-vocab", "20", "-emb", "4", "-hidden", "4",
		"-warmup", "0", "-steps", "1", "-cpuprofile", prof, "-memprofile", mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tokens/s", "ms/step", "GEMM kernel"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{prof, mem, mem + ".base"} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s not written: %v", filepath.Base(f), err)
		}
	}
}

func TestTrainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-model", "resnet99x"},
		{"-model", "lstm", "-batch", "-1"},
		{"-steps", "0"},
		{"-threads", "-2"},
		{"-width", "0"},
		{"-lr", "-1"},
		{"-precision", "fp16"},
		{"-nosuchflag"},
		{"extra"},
		{"-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"), "-batch", "1", "-width", "0.1", "-steps", "1", "-warmup", "0"},
	} {
		if _, err := runTrainForTest(t, args...); err == nil {
			t.Errorf("runTrain(%q) succeeded, want an error", args)
		}
	}
}
