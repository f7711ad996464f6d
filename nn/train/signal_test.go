package train_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// signalHelperEnv makes the test binary run signalHelper instead of the
// tests.
const signalHelperEnv = "PROXGEN_TRAIN_SIGNAL_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(signalHelperEnv); dir != "" {
		signalHelper(dir)
	}
	if dir := os.Getenv(lockHelperEnv); dir != "" {
		lockHelper(dir)
	}
	os.Exit(m.Run())
}

// signalHelper is a training program as cmd/cifar and cmd/ptb are: it
// catches the signals with CatchInterrupts, runs a long Loop in dir whose
// save is slow (an Output takes 300 ms), and exits with ExitInterrupted
// after an interrupted save. It says "training" after its first step and
// "saving" when the save after the first signal starts.
func signalHelper(dir string) {
	ctx := train.CatchInterrupts()
	f := newFitLine()
	l := f.loop(dir, nil, 0)
	l.Epochs = 100000
	step := l.Step
	first := true
	l.Step = func(epoch, s int) (float64, int, error) {
		if first {
			fmt.Println("training")
			first = false
		}
		time.Sleep(time.Millisecond)
		return step(epoch, s)
	}
	said := false
	l.Outputs = []train.Output{{Name: "slow.txt", Data: func(*train.Info) ([]byte, error) {
		if ctx.Err() != nil && !said {
			fmt.Println("saving")
			said = true
			time.Sleep(300 * time.Millisecond)
		}
		return []byte("x\n"), nil
	}}}
	_, err := l.Run(ctx)
	if errors.Is(err, train.ErrInterrupted) {
		os.Exit(cli.ExitInterrupted)
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	os.Exit(3)
}

// TestSignalsDuringSave sends one SIGINT to a training process, then
// SIGINT and SIGTERM alternately every 0.1 ms from the start of
// its checkpoint save until it exits: it must exit with 130, not be
// killed, and leave a checkpoint that reads and resumes.
func TestSignalsDuringSave(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("signals are sent the Unix way")
	}
	// A SIGINT that arrives while an epoch's checkpoint is being written,
	// after its outputs, ends the run with no save left to interrupt (the
	// checkpoint is already there): such an attempt proves nothing about
	// signals during a save and is made again, up to 20 attempts for 3
	// trials that caught a save.
	for trial, attempt := 0, 0; trial < 3; attempt++ {
		if attempt == 20 {
			t.Fatalf("only %d of 20 attempts caught the helper saving", trial)
		}
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), signalHelperEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		expect := func(want string) {
			if !lines.Scan() || lines.Text() != want {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("trial %d: helper said %q, want %q (stderr %s)", trial, lines.Text(), want, stderr.String())
			}
		}
		expect("training")
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			err := cmd.Wait()
			if cmd.ProcessState.ExitCode() == cli.ExitInterrupted {
				t.Logf("attempt %d: the helper stopped after an epoch's save, before saying it was saving", attempt)
				continue
			}
			t.Fatalf("trial %d: the helper ended (%v) before saying it was saving; stderr %s", trial, err, stderr.String())
		}
		if lines.Text() != "saving" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("trial %d: helper said %q, want %q (stderr %s)", trial, lines.Text(), "saving", stderr.String())
		}
		var wg sync.WaitGroup
		done := make(chan struct{})
		sent := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				sig := syscall.SIGINT
				if i%2 == 1 {
					sig = syscall.SIGTERM
				}
				if cmd.Process.Signal(sig) != nil {
					return // exited
				}
				sent++
				time.Sleep(100 * time.Microsecond)
			}
		}()
		for lines.Scan() {
		}
		err = cmd.Wait()
		close(done)
		wg.Wait()
		st := cmd.ProcessState
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("trial %d: killed by %v after %d more signals, want exit %d", trial, ws.Signal(), sent, cli.ExitInterrupted)
		}
		if st.ExitCode() != cli.ExitInterrupted {
			t.Fatalf("trial %d: exit %d (%v), want %d; stderr %s", trial, st.ExitCode(), err, cli.ExitInterrupted, stderr.String())
		}
		if sent < 50 {
			t.Fatalf("trial %d: only %d signals sent during the save", trial, sent)
		}
		ck, err := train.ReadCheckpoint(dir)
		if err != nil {
			t.Fatalf("trial %d: the checkpoint does not read: %v", trial, err)
		}
		g := newFitLine()
		l := g.loop(dir, nil, 0)
		l.Resume = ck
		l.Epochs = ck.Epoch() + 1
		if _, err := l.Run(context.Background()); err != nil {
			t.Fatalf("trial %d: resuming: %v", trial, err)
		}
		if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(tmp) != 0 {
			t.Fatalf("trial %d: temporary files left: %v", trial, tmp)
		}
		trial++
	}
}
