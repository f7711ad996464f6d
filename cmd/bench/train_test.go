package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
)

func runTrainForTest(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runTrain(args, &out, &errOut)
	return out.String(), err
}

// TestTrainFlags checks that the flags reach benchrun.Train, that the
// thread count is restored, and the JSON line, the table and the op
// profile that come out.
func TestTrainFlags(t *testing.T) {
	procs, workers := runtime.GOMAXPROCS(0), parallel.Workers()
	out, err := runTrainForTest(t, "-model", "resnet20", "-batch", "2", "-width", "0.25", "-arena=false",
		"-warmup", "1", "-steps", "2", "-threads", "1", "-json")
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, lastJSON(t, out), map[string]any{"impl": "go", "model": "resnet20", "batch": 2.0, "arena": false,
		"warmup": 1.0, "steps": 2.0, "threads": 1.0, "gomaxprocs": 1.0, "precision": "fp32"})
	if runtime.GOMAXPROCS(0) != procs || parallel.Workers() != workers {
		t.Errorf("GOMAXPROCS/workers not restored: %d/%d, want %d/%d", runtime.GOMAXPROCS(0), parallel.Workers(), procs, workers)
	}
	out, err = runTrainForTest(t, "-model", "lstm", "-batch", "2", "-bptt", "3", "-vocab", "20", "-emb", "4", "-hidden", "4",
		"-warmup", "0", "-steps", "1", "-op-profile", "-memprofile", filepath.Join(t.TempDir(), "mem.prof"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tokens/s", "optimizer step"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
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
