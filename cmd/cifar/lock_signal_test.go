package main

import (
	"path/filepath"
	"testing"

	"github.com/proxgen/proxgen/nn/train/traintest"
)

// TestTwoRunsOneFolder starts two runs at once into one -out, and two
// -resume of one folder: one runs, the other exits 1 naming the lock's
// holder, and the folder ends as an uninterrupted run.
func TestTwoRunsOneFolder(t *testing.T) {
	p, _, _ := faultRun(t)
	trials := 4
	if traintest.Quick() {
		trials = 2
	}
	p.TwoAtOnce(t, trials)
}

// TestSignalStorm interrupts a run and keeps sending SIGINT and SIGTERM
// through its checkpoint save until it exits: exit 130, and the resumed
// run ends as an uninterrupted one.
func TestSignalStorm(t *testing.T) {
	p, _, _ := faultRun(t)
	fresh := p.Fresh
	p.Fresh = func(dir string) []string { return append(fresh(dir), "-progress", "lines", "-log-every", "1") }
	n := p.SignalStorm(t, filepath.Join(t.TempDir(), "run"))
	t.Logf("%d signals after the first", n)
}
