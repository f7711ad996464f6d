package traintest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// TwoAtOnce starts two copies of the program at the same moment in the
// same run folder, trials times: first as two new runs, then (after one
// run was killed after its first checkpoint) as two -resume runs. Each
// time exactly one must exit 0 and the other 1 with a message naming the
// run folder's lock holder (train.LockedError) or, when the first had
// already finished, 2 naming the existing run (a resume then exits 0);
// the lock must have
// refused the second at least once per kind. The folder must end as the
// uninterrupted reference (Check).
func (p Program) TwoAtOnce(t *testing.T, trials int) {
	t.Helper()
	for _, resume := range []bool{false, true} {
		locked := 0
		for trial := range trials {
			dir := filepath.Join(t.TempDir(), "run")
			args := p.Fresh(dir)
			if resume {
				// A run stopped early: killed in a write after its first
				// checkpoint.
				for n := 8; ; n += 4 {
					os.RemoveAll(dir)
					r := Run(t, "crash:"+itoa(n), args...)
					if r.Code == 0 {
						t.Fatalf("the run to resume was not stopped by an injected crash")
					}
					if _, err := os.Stat(filepath.Join(dir, train.CheckpointName)); err == nil {
						break
					}
				}
				args = p.Resume(dir)
			}
			res := make([]Result, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd, out, errb := Command(context.Background(), "", args...)
					<-start
					err := cmd.Run()
					res[i] = result(t, err, out, errb)
				}()
			}
			close(start)
			wg.Wait()
			ok := -1
			for i, r := range res {
				if r.Code == 0 {
					if ok >= 0 && !resume {
						t.Fatalf("resume=%v trial %d: both runs exited 0\n%s\n%s", resume, trial, res[0].Stderr, res[1].Stderr)
					}
					if ok < 0 {
						ok = i
					}
				}
			}
			if ok < 0 {
				t.Fatalf("resume=%v trial %d: no run succeeded: exit %d: %s\nexit %d: %s", resume, trial, res[0].Code, res[0].Stderr, res[1].Code, res[1].Stderr)
			}
			other := res[1-ok]
			switch {
			case other.Code == 1 && strings.Contains(other.Stderr, "in use by another run (pid "),
				other.Code == 1 && strings.Contains(other.Stderr, "in use by another run (a process that has not written its name"):
				// Refused by the lock; the holder may not have written its
				// pid yet when the second run looked (a slow machine, -race).
				locked++
			case other.Code == 2 && !resume && strings.Contains(other.Stderr, "already holds a run"):
			case other.Code == 0 && resume:
				// The second resume came after the first had finished.
			default:
				t.Fatalf("resume=%v trial %d: the other run exited %d: %s", resume, trial, other.Code, other.Stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, train.LockName)); !os.IsNotExist(err) {
				t.Fatalf("resume=%v trial %d: the lock file was left behind (%v)", resume, trial, err)
			}
			p.Check(t, dir)
		}
		if locked == 0 {
			t.Fatalf("resume=%v: in %d trials the lock never refused the second run", resume, trials)
		}
	}
}

// SignalStorm starts a run in dir, sends it SIGINT once it has printed
// its first progress line (-progress lines, which Fresh must give), then
// SIGINT and SIGTERM alternately every 0.2 ms until it exits: it must
// exit with cli.ExitInterrupted, not be killed, and the run, resumed,
// must end as the uninterrupted reference. It returns the number of
// signals sent after the first.
func (p Program) SignalStorm(t *testing.T, dir string) int {
	t.Helper()
	cmd, _, errb := Command(context.Background(), "", p.Fresh(dir)...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	progress := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		said := false
		for {
			n, err := pr.Read(buf)
			stderr.Write(buf[:n])
			if !said && strings.Contains(stderr.String(), " step ") {
				said = true
				close(progress)
			}
			if err != nil {
				if !said {
					close(progress)
				}
				return
			}
		}
	}()
	<-progress
	_ = errb
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error)
	go func() { done <- cmd.Wait() }()
	sent := 0
	var werr error
storm:
	for i := 0; ; i++ {
		select {
		case werr = <-done:
			break storm
		default:
		}
		sig := syscall.SIGTERM
		if i%2 == 0 {
			sig = syscall.SIGINT
		}
		if cmd.Process.Signal(sig) == nil {
			sent++
		}
		time.Sleep(200 * time.Microsecond)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("killed by %v after %d more signals, want exit %d\n%s", ws.Signal(), sent, cli.ExitInterrupted, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != cli.ExitInterrupted {
		t.Fatalf("exit %d (%v) after %d more signals, want %d\n%s", code, werr, sent, cli.ExitInterrupted, stderr.String())
	}
	Checkpoint(t, dir)
	p.Finish(t, dir)
	return sent
}
