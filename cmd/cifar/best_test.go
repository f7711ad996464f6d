package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/proxgen/proxgen/cmd/internal/cifarrun"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// TestBestCheckpoint checks best.safetensors: it holds the weights of the
// epoch with the best test accuracy, says which epoch in its metadata
// (the summary's best_epoch), -eval-only reproduces that accuracy, and it
// loads as cmd/serve loads a model (infer.Load with the file's metadata).
// A run interrupted after its first epoch and resumed ends with the same
// file, byte for byte.
func TestBestCheckpoint(t *testing.T) {
	data := writeFixture(t, 4, 10)
	base := t.TempDir()
	out := filepath.Join(base, "run")
	// A large step size makes the test accuracy move from epoch to epoch.
	args := tinyArgs(data, out, "-epochs", "4", "-lr", "0.05")
	if code, _, stderr := runCmd(context.Background(), args...); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var sum summary
	b, err := os.ReadFile(filepath.Join(out, summaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	best := filepath.Join(out, cifarrun.BestFile)
	f, err := safetensors.ReadFile(best)
	if err != nil {
		t.Fatalf("no best model: %v", err)
	}
	if got := f.Metadata["epoch"]; got != strconv.Itoa(sum.BestEpoch) {
		t.Errorf("best.safetensors says epoch %s, the summary's best epoch is %d", got, sum.BestEpoch)
	}
	code, stdout, stderr := runCmd(context.Background(), "-data", data, "-allow-subset", "-no-download", "-eval-only", "-weights", best, "-json", "-threads", "2", "-progress", "none")
	if code != exitOK {
		t.Fatalf("-eval-only best.safetensors: exit %d\n%s", code, stderr)
	}
	var ev evalResult
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.TestAcc != sum.BestAcc {
		t.Errorf("-eval-only best.safetensors: accuracy %v, the run's best %v (epoch %d)", ev.TestAcc, sum.BestAcc, sum.BestEpoch)
	}
	if _, err := infer.Load(best, models.Spec{}); err != nil {
		t.Errorf("best.safetensors does not load for serving: %v", err)
	}

	// Interrupted after epoch 1 (as a crash after that save leaves it)
	// and resumed: the same best model.
	part := filepath.Join(base, "part")
	if code, _, stderr := runCmd(context.Background(), tinyArgs(data, part, "-epochs", "1", "-lr", "0.05", "-schedule", "multistep:2,3")...); code != exitOK {
		t.Fatalf("first epoch: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(context.Background(), "-out", part, "-resume", "-epochs", "4", "-data", data, "-allow-subset", "-progress", "none"); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	x, _ := os.ReadFile(best)
	y, _ := os.ReadFile(filepath.Join(part, cifarrun.BestFile))
	if string(x) != string(y) {
		t.Error("best.safetensors differs after a resume")
	}
}
