// Package traintest helps test programs built on package train with
// injected faults: it runs the test binary as the program in a
// subprocess (so that it can be killed), selects faults through
// train.FaultEnv, and compares run folders.
package traintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/train"
)

// envChild marks a test binary started as the program.
const envChild = "PROXGEN_TRAINTEST_CHILD"

// MainIfChild runs main and exits when the test binary was started by
// Run or Start; call it first in TestMain.
func MainIfChild(main func()) {
	if os.Getenv(envChild) == "1" {
		main()
		os.Exit(0)
	}
}

// Result is the outcome of a subprocess.
type Result struct {
	Code           int // exit status; -1 when killed by a signal
	Stdout, Stderr string
}

// Command returns the command running the program with args and the
// fault fault (empty: none) in the environment.
func Command(ctx context.Context, fault string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(s string) bool {
		return strings.HasPrefix(s, train.FaultEnv+"=")
	}), envChild+"=1")
	if fault != "" {
		cmd.Env = append(cmd.Env, train.FaultEnv+"="+fault)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// Run runs the program with args and the fault and waits for it.
func Run(t testing.TB, fault string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, out, errb := Command(ctx, fault, args...)
	err := cmd.Run()
	return result(t, err, out, errb)
}

// RunKilledAfter starts the program and kills it with SIGKILL after d
// (if it is still running).
func RunKilledAfter(t testing.TB, d time.Duration, args ...string) Result {
	t.Helper()
	cmd, out, errb := Command(context.Background(), "", args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	return result(t, err, out, errb)
}

func result(t testing.TB, err error, out, errb *bytes.Buffer) Result {
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return r
}

// SameBytes fails unless the files a and b have equal content.
func SameBytes(t testing.TB, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s and %s differ (%d and %d bytes)", a, b, len(x), len(y))
	}
}

// SameJSONL fails unless the JSON-lines files a and b hold the same
// records once the keys in ignore (timings) are removed.
func SameJSONL(t testing.TB, a, b string, ignore ...string) {
	t.Helper()
	read := func(p string) []string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, k := range ignore {
				delete(m, k)
			}
			j, _ := json.Marshal(m)
			out = append(out, string(j))
		}
		return out
	}
	if x, y := read(a), read(b); !slices.Equal(x, y) {
		t.Fatalf("%s and %s differ:\n%s\n%s", a, b, strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
}

// NoTemp fails if dir holds a temporary file of an interrupted write.
func NoTemp(t testing.TB, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if len(m) > 0 {
		t.Fatalf("temporary files left in %s: %v", dir, m)
	}
}

// Checkpoint returns the checkpoint of dir, failing the test when it
// does not read.
func Checkpoint(t testing.TB, dir string) *train.Checkpoint {
	t.Helper()
	ck, err := train.ReadCheckpoint(dir)
	if err != nil {
		t.Fatalf("the checkpoint does not read: %v", err)
	}
	return ck
}

// Program describes how to run a program built on package train in a
// run folder.
type Program struct {
	// Fresh returns the arguments of a new run in dir; Resume those that
	// continue it.
	Fresh, Resume func(dir string) []string
	// Check compares the finished run folder dir with the uninterrupted
	// reference.
	Check func(t testing.TB, dir string)
}

// Finish continues the run in dir after a fault until it completes:
// with Resume when dir holds a checkpoint, afresh otherwise. It fails the
// test unless that ends with exit status 0.
func (p Program) Finish(t testing.TB, dir string) {
	t.Helper()
	args := p.Fresh(dir)
	if _, err := os.Stat(filepath.Join(dir, train.CheckpointName)); err == nil {
		args = p.Resume(dir)
	}
	if r := Run(t, "", args...); r.Code != 0 {
		t.Fatalf("finishing after the fault: exit %d\n%s", r.Code, r.Stderr)
	}
	NoTemp(t, dir)
	p.Check(t, dir)
}

// CrashInEveryWrite kills the program (SIGKILL) at each write event of
// its run in turn (train.FaultEnv crash:N, N = 1, 2, ... until the run
// completes without reaching N), finishes the run, and checks it: every
// stride-th event, every shortStride-th with -short or the race detector
// (whose subprocesses are many times slower). It returns the number of
// events tried.
func (p Program) CrashInEveryWrite(t *testing.T, stride, shortStride int) int {
	if Quick() {
		stride = shortStride
	}
	tried := 0
	for n := 1; ; n += stride {
		dir := filepath.Join(t.TempDir(), "run")
		r := Run(t, "crash:"+itoa(n), p.Fresh(dir)...)
		if r.Code == 0 {
			p.Check(t, dir)
			return tried
		}
		if r.Code != -1 {
			t.Fatalf("crash:%d: exit %d, want a kill\n%s", n, r.Code, r.Stderr)
		}
		tried++
		p.Finish(t, dir)
	}
}

// KillAtRandom kills the program after each of the delays and finishes
// the run.
func (p Program) KillAtRandom(t *testing.T, delays []time.Duration) {
	for _, d := range delays {
		dir := filepath.Join(t.TempDir(), "run")
		r := RunKilledAfter(t, d, p.Fresh(dir)...)
		if r.Code != -1 && r.Code != 0 {
			t.Fatalf("killed after %v: exit %d\n%s", d, r.Code, r.Stderr)
		}
		p.Finish(t, dir)
	}
}

// DiskFull runs the program with writes failing after each of the byte
// budgets: it must exit 1 naming the full disk, leave no temporary file
// and a readable checkpoint (if it got to write one), and finish to the
// reference result afterwards.
func (p Program) DiskFull(t *testing.T, budgets []int) {
	for _, b := range budgets {
		dir := filepath.Join(t.TempDir(), "run")
		r := Run(t, "full:"+itoa(b), p.Fresh(dir)...)
		if r.Code == 0 {
			p.Check(t, dir)
			continue
		}
		if r.Code != 1 || !strings.Contains(r.Stderr, "no space left on device") || strings.Contains(r.Stderr, "goroutine ") {
			t.Fatalf("full:%d: exit %d, stderr:\n%s", b, r.Code, r.Stderr)
		}
		NoTemp(t, dir)
		if _, err := os.Stat(filepath.Join(dir, train.CheckpointName)); err == nil {
			Checkpoint(t, dir)
		}
		p.Finish(t, dir)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Quick reports whether long fault loops should be cut short: with -short
// or under the race detector.
func Quick() bool { return testing.Short() || race }

// EditCheckpoint rewrites the checkpoint of dir with edit applied to the
// file and to its run metadata (the position JSON, decoded as a map; the
// program's state is under "user").
func EditCheckpoint(t testing.TB, dir string, edit func(f *safetensors.File, run map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, train.CheckpointName)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var run map[string]any
	if err := json.Unmarshal([]byte(f.Metadata["run"]), &run); err != nil {
		t.Fatal(err)
	}
	edit(f, run)
	b, _ := json.Marshal(run)
	f.Metadata["run"] = string(b)
	if err := safetensors.WriteFileAtomic(path, f); err != nil {
		t.Fatal(err)
	}
}
