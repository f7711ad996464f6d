package sweep

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/train"
)

// TestRunArgsResumeKeepsSpec: a point resumed from its checkpoint gets
// the spec's arguments as well as -resume, so that the settings a resume
// may change (-progress, -json) stay the spec's (issue 35: a resumed
// point's summary.json had /config/progress "auto" instead of the spec's
// "none").
func TestRunArgsResumeKeepsSpec(t *testing.T) {
	dir := t.TempDir()
	r := Run{Dir: filepath.Join("runs", "0001"), Args: []string{"-epochs=3", "-progress=none", "-json=true"}}
	out := filepath.Join(dir, r.Dir)
	args, resume := RunArgs(dir, r, 2)
	if want := []string{"-epochs=3", "-progress=none", "-json=true", "-out", out, "-threads", "2"}; resume || !slices.Equal(args, want) {
		t.Fatalf("new run: %q %v, want %q", args, resume, want)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, train.CheckpointName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args, resume = RunArgs(dir, r, 0)
	if want := []string{"-epochs=3", "-progress=none", "-json=true", "-out", out, "-resume"}; !resume || !slices.Equal(args, want) {
		t.Fatalf("resumed run: %q %v, want %q", args, resume, want)
	}
}

// TestWaitForLock: a restarted runner waits for the lock that a runner
// killed an instant ago still holds (released here after 200 ms), and
// gives up after its wait when the holder stays.
func TestWaitForLock(t *testing.T) {
	out := t.TempDir()
	l, err := train.LockDir(out)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.Release()
	}()
	t0 := time.Now()
	waitForLock(context.Background(), out, 5*time.Second)
	if d := time.Since(t0); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("waited %v for a lock released after 200 ms", d)
	}
	l2, err := train.LockDir(out)
	if err != nil {
		t.Fatalf("the lock after the wait: %v", err)
	}
	defer l2.Release()
	t0 = time.Now()
	waitForLock(context.Background(), out, 300*time.Millisecond)
	if d := time.Since(t0); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("gave up after %v, want the 300 ms wait", d)
	}
}
