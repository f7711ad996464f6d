package main

import (
	"context"
	"math"
	"path/filepath"
	"testing"
)

// TestGMPRun checks gradual magnitude pruning end to end: the zeros
// follow the cubic schedule to the final fraction, stay there while the
// rest trains, the statistics are re-estimated after the last pruning
// step, and an interrupted run resumes to the same bytes (masks included).
func TestGMPRun(t *testing.T) {
	checkResume(t, 0, "-optimizer", "sgd", "-lr", "1e-3", "-gmp", "0.5", "-gmp-every", "1")

	data := writeFixture(t, 4, 10) // 2 batches of 8 per epoch
	out := filepath.Join(t.TempDir(), "gmp")
	args := tinyArgs(data, out, "-optimizer", "sgd", "-lr", "0.01", "-epochs", "3", "-gmp", "0.6", "-gmp-end", "2", "-gmp-every", "1")
	if code, _, stderr := runCmd(context.Background(), args...); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	recs := readMetrics(t, out)
	// Updates 1–4 prune (Begin 0, End 4): 0.6·(1 − (1 − t/4)³) after
	// update 2 is 0.525; after 4 it is 0.6 and stays there.
	if z := recs[0].Zero; math.Abs(z-0.525) > 1e-3 {
		t.Errorf("zeros after epoch 1: %v, want 0.525", z)
	}
	for _, r := range recs[1:] {
		if math.Abs(r.Zero-0.6) > 1e-4 {
			t.Errorf("zeros after epoch %d: %v, want 0.6", r.Epoch, r.Zero)
		}
	}
	if recs[0].Recalibrated != 0 || recs[1].Recalibrated == 0 || recs[2].Recalibrated != 0 {
		t.Errorf("recalibrated batches per epoch %d, %d, %d: want one after the last pruning step (epoch 2)",
			recs[0].Recalibrated, recs[1].Recalibrated, recs[2].Recalibrated)
	}
}
