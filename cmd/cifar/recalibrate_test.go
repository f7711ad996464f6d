package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// TestRecalibrateHardQuant checks that a binary run re-estimates the
// batch-norm statistics right after the hard quantisation (and records
// it in its metrics, summary and model file), that a run interrupted
// around it resumes to the same bytes, and that a warm start from its
// model file is recorded with the file's SHA-256.
func TestRecalibrateHardQuant(t *testing.T) {
	checkResume(t, 0, "-optimizer", "proxquant", "-lr", "1e-3", "-hard-quant-epoch", "1", "-shortcut", "B")

	data := writeFixture(t, 4, 10)
	base := t.TempDir()
	bin := filepath.Join(base, "bin")
	args := tinyArgs(data, bin, "-optimizer", "proxquant", "-epochs", "2", "-hard-quant-epoch", "1", "-shortcut", "B", "-recalibrate", "1")
	if code, _, stderr := runCmd(context.Background(), args...); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	recs := readMetrics(t, bin)
	if recs[0].Recalibrated != 1 || recs[1].Recalibrated != 0 {
		t.Fatalf("recalibrated batches per epoch: %d, %d; want 1, 0", recs[0].Recalibrated, recs[1].Recalibrated)
	}
	var s summary
	b, err := os.ReadFile(filepath.Join(bin, summaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.RecalibratedEpochs, []int{1}) || s.Init != "" {
		t.Fatalf("summary: recalibrated epochs %v, init %q", s.RecalibratedEpochs, s.Init)
	}
	model := filepath.Join(bin, checkpoint.ModelFileName)
	f, err := safetensors.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Metadata["bn_recalibrated_epochs"]; got != "1" {
		t.Fatalf("model metadata bn_recalibrated_epochs %q, want 1", got)
	}
	// After the recalibration every batch normalisation has counted the
	// one batch and then the second epoch's batches.
	for _, n := range f.Names() {
		if strings.HasSuffix(n, "num_batches_tracked") {
			v, err := f.Tensors[n].Int64()
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != 3 { // 1 batch of the recalibration + 2 of epoch 2
				t.Fatalf("%s = %d, want 3", n, v[0])
			}
		}
	}

	// A warm start from the model file.
	warm := filepath.Join(base, "warm")
	code, stdout, stderr := runCmd(context.Background(), tinyArgs(data, warm, "-optimizer", "adam", "-epochs", "1", "-shortcut", "B", "-weights", model)...)
	if code != 0 {
		t.Fatalf("warm start: exit %d\n%s", code, stderr)
	}
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(raw))
	if !strings.Contains(stdout, "started from") || !strings.Contains(stdout, sum) {
		t.Errorf("summary output does not name the warm start:\n%s", stdout)
	}
	b, err = os.ReadFile(filepath.Join(warm, summaryFile))
	if err != nil {
		t.Fatal(err)
	}
	s = summary{}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Init != model || s.InitSHA256 != sum {
		t.Errorf("summary init %q %q, want %q %q", s.Init, s.InitSHA256, model, sum)
	}
	f, err = safetensors.ReadFile(filepath.Join(warm, checkpoint.ModelFileName))
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["init"] != model || f.Metadata["init_sha256"] != sum {
		t.Errorf("model metadata init %q %q", f.Metadata["init"], f.Metadata["init_sha256"])
	}

	// -eval-only -recalibrate: the same figures at any thread count, and
	// the statistics the file holds are those of -recalibrate 0.
	eval := func(threads string, more ...string) evalResult {
		args := append([]string{"-data", data, "-allow-subset", "-no-download", "-eval-only", "-weights", model, "-json", "-threads", threads, "-progress", "none", "-batch", "8"}, more...)
		code, stdout, stderr := runCmd(context.Background(), args...)
		if code != 0 {
			t.Fatalf("-eval-only %q: exit %d\n%s", more, code, stderr)
		}
		var r evalResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	plain, r1, r2 := eval("1"), eval("1", "-recalibrate", "2"), eval("2", "-recalibrate", "2")
	if plain.Recalibrated != 0 || r1.Recalibrated != 2 {
		t.Errorf("recalibrated batches %d and %d, want 0 and 2", plain.Recalibrated, r1.Recalibrated)
	}
	if r1.TestLoss != r2.TestLoss || r1.TestAcc != r2.TestAcc {
		t.Errorf("-recalibrate 2: loss %v on 1 thread, %v on 2", r1.TestLoss, r2.TestLoss)
	}
	if r1.TestLoss == plain.TestLoss {
		t.Errorf("-recalibrate 2 left the test loss at %v", plain.TestLoss)
	}
}
