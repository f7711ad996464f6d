package train_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/train"
)

var update = flag.Bool("update", false, "rewrite the checkpoint fixture under testdata/train (run on the commit whose format it records)")

// oldCheckpoint is a checkpoint of newFitLine's run after its first
// epoch, written before checkpoints carried a checksum (commit 78822c6).
var oldCheckpoint = filepath.Join("..", "..", "testdata", "train", "fitline-run-v1-unsealed.safetensors")

// runOneEpoch trains newFitLine's run for one epoch into dir.
func runOneEpoch(t *testing.T, dir string) {
	t.Helper()
	f := newFitLine()
	l := f.loop(dir, nil, 0)
	l.Epochs = 1
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// resumeToEnd resumes the run in dir to its third epoch.
func resumeToEnd(t *testing.T, dir string) (*fitLine, error) {
	t.Helper()
	ck, err := train.ReadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	f := newFitLine()
	l := f.loop(dir, nil, 0)
	l.Resume = ck
	_, err = l.Run(context.Background())
	return f, err
}

// TestUnsealedCheckpointResumes resumes a checkpoint written before
// checkpoints were sealed: it must load and continue exactly as the same
// state in today's format does.
func TestUnsealedCheckpointResumes(t *testing.T) {
	if *update {
		dir := t.TempDir()
		runOneEpoch(t, dir)
		b, err := os.ReadFile(filepath.Join(dir, train.CheckpointName))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(oldCheckpoint), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(oldCheckpoint, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(oldCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The same checkpoint as this version writes it: sealed.
	f, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := safetensors.Marshal(safetensors.Sealed(f))
	if err != nil {
		t.Fatal(err)
	}
	if string(sealed) == string(b) {
		t.Fatal("the fixture is sealed; it should predate checksums")
	}
	var ends []*fitLine
	for _, data := range [][]byte{b, sealed} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, train.CheckpointName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := resumeToEnd(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, got)
	}
	// Resuming the old file continues exactly as resuming the same state
	// written today. (Not compared with an uninterrupted run: the fixture's
	// first epoch ran on the GEMM kernel of the machine that wrote it, and
	// kernels with and without fused multiply-adds round differently.)
	if !sameWeights(ends[0], ends[1]) {
		t.Error("resuming the unsealed checkpoint ended with other weights than resuming it sealed")
	}
}

// TestCorruptCheckpointRefused corrupts a checkpoint in every byte region
// (length prefix, JSON header, tensor data) at random, by bit flips and by
// changed digits. No damaged file may resume from silently wrong state:
// each is refused, or (when the damage hit only the checksum entry's own
// key, which leaves an intact unsealed file) ends exactly as an
// uninterrupted run.
func TestCorruptCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	runOneEpoch(t, dir)
	path := filepath.Join(dir, train.CheckpointName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr := 8 + int(uint64(good[0])|uint64(good[1])<<8|uint64(good[2])<<16)
	rng := rand.New(rand.NewPCG(5, 6))
	regions := []struct {
		name   string
		lo, hi int
	}{{"length", 0, 8}, {"header", 8, hdr}, {"data", hdr, len(good)}}
	want := newFitLine()
	if _, err := want.loop(t.TempDir(), nil, 0).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	refused, wrong := 0, 0
	const perRegion = 40
	for _, r := range regions {
		for i := range perRegion {
			b := append([]byte(nil), good...)
			at := r.lo + rng.IntN(r.hi-r.lo)
			if i%2 == 0 {
				b[at] ^= 1 << rng.IntN(8)
			} else if b[at] >= '0' && b[at] <= '9' {
				b[at] = '0' + (b[at]-'0'+1+byte(rng.IntN(9)))%10
			} else {
				b[at] ^= 0x01
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := resumeToEnd(t, dir)
			switch {
			case err != nil:
				refused++
			case !sameWeights(got, want):
				wrong++
				t.Errorf("%s byte %d changed: the run resumed from wrong state", r.name, at)
			}
			os.Remove(filepath.Join(dir, train.PrevCheckpointName))
		}
	}
	t.Logf("%d corrupted checkpoints: %d refused, %d resumed from wrong state", len(regions)*perRegion, refused, wrong)
}
