package main

import (
	"context"
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

// faultRun returns a small run with a mid-epoch checkpoint, its
// uninterrupted reference (1 thread) and the program description whose
// runs use 2 threads.
func faultRun(t *testing.T, extra ...string) (p traintest.Program, ref, data string) {
	data = writeFixture(t, 5, 10) // 25 training images: 3 batches of 8
	args := func(dir, threads string) []string {
		a := tinyArgs(data, dir, append([]string{"-epochs", "2", "-save-every", "2"}, extra...)...)
		return append(a, "-threads", threads)
	}
	ref = filepath.Join(t.TempDir(), "ref")
	if code, _, stderr := runCmd(context.Background(), args(ref, "1")...); code != 0 {
		t.Fatalf("reference run: exit %d\n%s", code, stderr)
	}
	p = traintest.Program{
		Fresh: func(dir string) []string { return args(dir, "2") },
		Resume: func(dir string) []string {
			return []string{"-out", dir, "-resume", "-threads", "2", "-data", data, "-allow-subset"}
		},
		Check: func(t testing.TB, dir string) {
			t.Helper()
			traintest.SameBytes(t, filepath.Join(ref, checkpoint.ModelFileName), filepath.Join(dir, checkpoint.ModelFileName))
			traintest.SameBytes(t, filepath.Join(ref, curvesFile), filepath.Join(dir, curvesFile))
			traintest.SameJSONL(t, filepath.Join(ref, metricsFile), filepath.Join(dir, metricsFile), "seconds", "eval_seconds", "img_per_s")
			if _, err := os.Stat(filepath.Join(dir, summaryFile)); err != nil {
				t.Fatal(err)
			}
		},
	}
	return p, ref, data
}

// TestFaultKill kills the program inside every file write of a run and at
// random moments; each resumed run must end byte-identical to an
// uninterrupted one (with another thread count).
func TestFaultKill(t *testing.T) {
	p, _, _ := faultRun(t)
	n := p.CrashInEveryWrite(t, 1, 9)
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

// TestFaultKillL0 does the same for the ℓ0 hard-concrete method, whose
// gates and random stream are part of the checkpoint.
func TestFaultKillL0(t *testing.T) {
	if traintest.Quick() {
		t.Skip("long")
	}
	p, _, _ := faultRun(t, "-optimizer", "l0hc")
	p.CrashInEveryWrite(t, 4, 4)
}

// TestFaultDiskFull fails the writes after a number of bytes.
func TestFaultDiskFull(t *testing.T) {
	p, _, _ := faultRun(t)
	budgets := []int{0, 100, 5000, 50000, 150000, 400000}
	if traintest.Quick() {
		budgets = []int{100, 150000}
	}
	p.DiskFull(t, budgets)
}

// TestFaultDivergence checks that a diverging run stops with exit 1,
// names its last good checkpoint, that this checkpoint holds only finite
// numbers and loads, and that a finite but exploding loss stops too.
func TestFaultDivergence(t *testing.T) {
	data := writeFixture(t, 5, 10)
	for _, lr := range []string{"1e38", "1e6", "30"} {
		dir := filepath.Join(t.TempDir(), "run")
		code, _, stderr := runCmd(context.Background(), tinyArgs(data, dir, "-epochs", "3", "-save-every", "1", "-lr", lr)...)
		want := "the last good checkpoint is in " + filepath.Join(dir, train.CheckpointName)
		if code != exitError || !strings.Contains(stderr, "training diverged") || !strings.Contains(stderr, want) {
			t.Fatalf("-lr %s: exit %d, stderr:\n%s", lr, code, stderr)
		}
		ck := traintest.Checkpoint(t, dir)
		t.Logf("-lr %s: %s (checkpoint at epoch %d step %d)", lr, strings.TrimSpace(stderr[strings.LastIndex(stderr, "cifar:"):]), ck.Epoch(), ck.Step())
		// The weights of the checkpoint evaluate.
		code, _, stderr = runCmd(context.Background(), "-eval-only", "-weights", filepath.Join(dir, train.CheckpointName), "-data", data, "-allow-subset", "-width", "0.25")
		if code != 0 {
			t.Fatalf("-lr %s: evaluating the last good checkpoint: exit %d\n%s", lr, code, stderr)
		}
	}
}

// TestFaultCorruptState resumes from damaged checkpoints and evaluates
// damaged weights: each must fail with exit 1 and a message naming the
// problem, without a panic, and leave the files as they were.
func TestFaultCorruptState(t *testing.T) {
	_, ref, data := faultRun(t)
	config := func(key string, v any) func(*safetensors.File, map[string]any) {
		return func(_ *safetensors.File, run map[string]any) {
			run["user"].(map[string]any)["config"].(map[string]any)[key] = v
		}
	}
	nan := func(name string, v float32) func(*safetensors.File, map[string]any) {
		return func(f *safetensors.File, _ map[string]any) {
			d, shape, _ := f.Float32(name)
			d[0] = v
			f.Set(name, safetensors.FromFloat32(shape, d))
		}
	}
	cases := []struct {
		name string
		edit func(*safetensors.File, map[string]any)
		want string
	}{
		{"batch 0", config("batch", 0), "stored configuration: -batch 0 and -eval-batch 5 must be positive"},
		{"batch -5", config("batch", -5), "stored configuration: -batch -5 and -eval-batch 5 must be positive"},
		{"width 1000", config("width", 1000), "stored configuration: -width 1000: want a multiplier in (0, 16]"},
		{"negative lr", config("lr", -1), "stored configuration: -lr -1 must be positive"},
		{"negative subset", config("train_subset", -3), "stored configuration: -train-subset -3 and -test-subset 0 must not be negative"},
		{"model", config("model", "resnet7"), `stored configuration: -model "resnet7"`},
		{"model depth", config("model", "resnet600000002"), `stored configuration: -model "resnet600000002": want one of vgg16, resnet20, resnet32, resnet44, resnet56, resnet18, resnet34, or resnet<6n+2> up to resnet1202`},
		{"batch 1e9", config("batch", 1e9), "stored configuration: -batch 1000000000 and -eval-batch 5: at most 4096"},
		{"NaN weight", nan("model/conv1.weight", float32(math.NaN())), `tensor "model/conv1.weight": element 0 is NaN`},
		{"Inf moment", nan("optim/conv1.weight.v", float32(math.Inf(1))), `tensor "optim/conv1.weight.v": element 0 is +Inf`},
		{"position", func(_ *safetensors.File, run map[string]any) { run["step"] = 7 }, "the checkpoint is at step 7 of an epoch of 3 steps"},
		{"history", func(_ *safetensors.File, run map[string]any) { run["history"] = []any{} }, "0 metrics records for 2 epochs"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "run")
		os.CopyFS(dir, os.DirFS(ref))
		traintest.EditCheckpoint(t, dir, c.edit)
		before, _ := os.ReadFile(filepath.Join(dir, train.CheckpointName))
		code, _, stderr := runCmd(context.Background(), "-out", dir, "-resume", "-epochs", "3", "-progress", "none")
		if code != exitError || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "goroutine ") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and %q", c.name, code, stderr, c.want)
		}
		after, _ := os.ReadFile(filepath.Join(dir, train.CheckpointName))
		if string(before) != string(after) {
			t.Errorf("%s: the failed resume changed the checkpoint", c.name)
		}
	}

	// A flipped bit in the tensor data (not a deliberate edit, which
	// re-seals the file) fails the checksum: exit 1 naming the file, and
	// the checkpoint is left as it was.
	dir := filepath.Join(t.TempDir(), "run")
	os.CopyFS(dir, os.DirFS(ref))
	path := filepath.Join(dir, train.CheckpointName)
	b, _ := os.ReadFile(path)
	b[len(b)-101] ^= 0x04
	os.WriteFile(path, b, 0o644)
	code, _, stderr := runCmd(context.Background(), "-out", dir, "-resume", "-epochs", "3", "-progress", "none")
	if code != exitError || !strings.Contains(stderr, "checksum mismatch") || !strings.Contains(stderr, path) {
		t.Errorf("flipped bit: exit %d, stderr:\n%s\nwant exit 1 and a checksum mismatch naming %s", code, stderr, path)
	}
	if after, _ := os.ReadFile(path); string(after) != string(b) {
		t.Error("flipped bit: the failed resume changed the checkpoint")
	}

	// Weights with a NaN, an infinity or a negative running variance are
	// refused by -eval-only and -weights, naming the tensor.
	for _, c := range []struct {
		tensor string
		v      float32
		want   string
	}{
		{"conv1.weight", float32(math.NaN()), `tensor "conv1.weight": element 0 is NaN`},
		{"linear.bias", float32(math.Inf(-1)), `tensor "linear.bias": element 0 is -Inf`},
		{"bn1.running_var", -0.5, `tensor "bn1.running_var": element 0 is -0.5: a running variance must not be negative`},
	} {
		f, err := safetensors.ReadFile(filepath.Join(ref, checkpoint.ModelFileName))
		if err != nil {
			t.Fatal(err)
		}
		nan(c.tensor, c.v)(f, nil)
		w := filepath.Join(t.TempDir(), "w.safetensors")
		if err := safetensors.WriteFileAtomic(w, f); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"-eval-only", "-weights", w, "-data", data, "-allow-subset"},
			tinyArgs(data, filepath.Join(t.TempDir(), "x"), "-weights", w),
		} {
			code, _, stderr := runCmd(context.Background(), args...)
			if code != exitError || !strings.Contains(stderr, c.want) {
				t.Errorf("%s %v: exit %d, stderr:\n%s", c.tensor, args[:2], code, stderr)
			}
		}
	}
}
