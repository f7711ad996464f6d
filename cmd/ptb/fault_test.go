package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/nn/train/traintest"
)

func TestMain(m *testing.M) {
	traintest.MainIfChild(main)
	os.Exit(m.Run())
}

// timing lists the metrics that measure time, not the run.
var timing = []string{"train_seconds", "eval_seconds", "tok_per_s"}

// faultRun returns a small run with mid-epoch checkpoints, its
// uninterrupted reference (1 thread) and the program description whose
// runs use 2 threads.
func faultRun(t *testing.T) (traintest.Program, string) {
	data := tinyData(t)
	args := func(dir string, threads string) []string {
		return append([]string{"-data", data, "-out", dir, "-epochs", "2", "-max-windows", "6", "-save-every", "2",
			"-dropout", "0.3", "-threads", threads, "-progress", "none"}, quick...)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if code, _, stderr := runPTB(t, args(ref, "1")...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	p := traintest.Program{
		Fresh:  func(dir string) []string { return args(dir, "2") },
		Resume: func(dir string) []string { return []string{"-out", dir, "-resume", "-threads", "2", "-data", data} },
		Check: func(t testing.TB, dir string) {
			t.Helper()
			traintest.SameBytes(t, filepath.Join(ref, checkpoint.ModelFileName), filepath.Join(dir, checkpoint.ModelFileName))
			traintest.SameBytes(t, filepath.Join(ref, "summary.json"), filepath.Join(dir, "summary.json"))
			traintest.SameJSONL(t, filepath.Join(ref, train.MetricsName), filepath.Join(dir, train.MetricsName), timing...)
		},
	}
	return p, ref
}

// TestFaultKill kills the program inside every file write of a run and at
// random moments; each resumed run must end byte-identical to an
// uninterrupted one (with another thread count).
func TestFaultKill(t *testing.T) {
	p, _ := faultRun(t)
	n := p.CrashInEveryWrite(t, 1, 7)
	t.Logf("%d kills inside writes", n)
	start := time.Now()
	p.Finish(t, filepath.Join(t.TempDir(), "timing"))
	full := time.Since(start)
	delays := []time.Duration{full / 5, full / 2, full * 4 / 5}
	if traintest.Quick() {
		delays = delays[1:2]
	}
	p.KillAtRandom(t, delays)
}

// TestFaultDiskFull fails the writes after a number of bytes.
func TestFaultDiskFull(t *testing.T) {
	p, _ := faultRun(t)
	budgets := []int{0, 100, 3000, 20000, 60000, 200000}
	if traintest.Quick() {
		budgets = []int{100, 20000}
	}
	p.DiskFull(t, budgets)
}

// TestFaultDivergence checks that a diverging run stops with exit 1,
// names its last good checkpoint, and that this checkpoint holds only
// finite numbers and loads.
func TestFaultDivergence(t *testing.T) {
	data := tinyData(t)
	for _, lr := range []string{"1e38", "1e6"} {
		dir := filepath.Join(t.TempDir(), "run")
		code, _, stderr := runPTB(t, append([]string{"-data", data, "-out", dir, "-epochs", "2", "-max-windows", "6", "-save-every", "2", "-clip", "0"}, append(quick, "-lr", lr)...)...)
		want := "the last good checkpoint is in " + filepath.Join(dir, train.CheckpointName)
		if code != exitError || !strings.Contains(stderr, "training diverged") || !strings.Contains(stderr, want) {
			t.Fatalf("-lr %s: exit %d, stderr:\n%s", lr, code, stderr)
		}
		traintest.Checkpoint(t, dir)
		// The checkpoint resumes (and diverges again, the same way).
		code, _, stderr2 := runPTB(t, "-out", dir, "-resume", "-data", data)
		if code != exitError || !strings.Contains(stderr2, "training diverged") {
			t.Fatalf("-lr %s resumed: exit %d, stderr:\n%s", lr, code, stderr2)
		}
	}
}

// TestFaultCorruptState resumes from damaged checkpoints and weights:
// each must fail with exit 1 and a message naming the problem, without a
// panic, and leave the files as they were.
func TestFaultCorruptState(t *testing.T) {
	_, ref := faultRun(t)
	config := func(key string, v any) func(*safetensors.File, map[string]any) {
		return func(_ *safetensors.File, run map[string]any) {
			run["user"].(map[string]any)["config"].(map[string]any)[key] = v
		}
	}
	nan := func(name string) func(*safetensors.File, map[string]any) {
		return func(f *safetensors.File, _ map[string]any) {
			v, shape, _ := f.Float32(name)
			v[0] = float32(math.NaN())
			f.Set(name, safetensors.FromFloat32(shape, v))
		}
	}
	cases := []struct {
		name string
		edit func(*safetensors.File, map[string]any)
		want string
	}{
		{"batch 0", config("Batch", 0), "stored configuration: -batch = 0, want a positive number"},
		{"batch -5", config("Batch", -5), "stored configuration: -batch = -5, want a positive number"},
		{"bptt 1e9", config("BPTT", 1e9), "stored configuration: -bptt 1000000000: at most 4096"},
		{"batch 1e9", config("Batch", 1e9), "stored configuration: -batch 1000000000, -eval-batch"},
		{"hidden 100000", config("Hidden", 100000), "stored configuration: -emb 12, -hidden 100000, -layers 1: at most 4096"},
		{"negative lr", config("LR", -1), "stored configuration: -lr = -1, want a positive step size"},
		{"threads", config("Threads", 1<<30), "stored configuration: -threads 1073741824: at most 1024"},
		{"NaN weight", nan("model/rnn.weight_hh_l0"), `tensor "model/rnn.weight_hh_l0": element 0 is NaN`},
		{"NaN moment", nan("optim/rnn.weight_hh_l0.v"), `tensor "optim/rnn.weight_hh_l0.v": element 0 is NaN`},
		{"position", func(_ *safetensors.File, run map[string]any) { run["step"] = 1e6 }, "the checkpoint is at step 1000000 of an epoch of 6 steps"},
		{"history", func(_ *safetensors.File, run map[string]any) { run["epoch"] = 5 }, "5 epochs"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "run")
		os.CopyFS(dir, os.DirFS(ref))
		traintest.EditCheckpoint(t, dir, c.edit)
		before, _ := os.ReadFile(filepath.Join(dir, train.CheckpointName))
		code, _, stderr := runPTB(t, "-out", dir, "-resume", "-epochs", "3")
		if code != exitError || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "goroutine ") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and %q", c.name, code, stderr, c.want)
		}
		after, _ := os.ReadFile(filepath.Join(dir, train.CheckpointName))
		if string(before) != string(after) {
			t.Errorf("%s: the failed resume changed the checkpoint", c.name)
		}
	}
	// A truncated checkpoint, and one that is not a file.
	dir := filepath.Join(t.TempDir(), "run")
	os.CopyFS(dir, os.DirFS(ref))
	path := filepath.Join(dir, train.CheckpointName)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)/2], 0o644)
	if code, _, stderr := runPTB(t, "-out", dir, "-resume"); code != exitError || !strings.Contains(stderr, "run past the end") {
		t.Errorf("truncated: exit %d, stderr:\n%s", code, stderr)
	}
	os.Remove(path)
	os.Mkdir(path, 0o755)
	if code, _, stderr := runPTB(t, "-out", dir, "-resume"); code != exitError || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("directory: exit %d, stderr:\n%s", code, stderr)
	}

	// Weights with a NaN are refused, naming the tensor.
	w := filepath.Join(t.TempDir(), "w.safetensors")
	f, err := safetensors.ReadFile(filepath.Join(ref, checkpoint.ModelFileName))
	if err != nil {
		t.Fatal(err)
	}
	nan("decoder.bias")(f, nil)
	if err := safetensors.WriteFileAtomic(w, f); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runPTB(t, append([]string{"-data", tinyData(t), "-weights", w, "-epochs", "1"}, quick...)...)
	if code != exitError || !strings.Contains(stderr, `tensor "decoder.bias": element 0 is NaN`) {
		t.Errorf("NaN weights: exit %d, stderr:\n%s", code, stderr)
	}
}
