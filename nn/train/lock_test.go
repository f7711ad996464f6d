package train_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/proxgen/proxgen/nn/train"
)

// lockHelperEnv makes the test binary run lockHelper instead of the
// tests.
const lockHelperEnv = "PROXGEN_TRAIN_LOCK_HELPER"

// lockHelper takes the lock of dir (with flock unless
// PROXGEN_TRAIN_LOCK_EXCL is set), prints "locked", holds it until its
// standard input ends (the test has seen both processes try) and exits 0,
// or prints the error and exits 1.
func lockHelper(dir string) {
	var l *train.Lock
	var err error
	if os.Getenv("PROXGEN_TRAIN_LOCK_EXCL") != "" {
		l, err = train.LockDirExclusive(dir)
	} else {
		l, err = train.LockDir(dir)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	if err := l.Release(); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	os.Exit(0)
}

// TestLockTwoProcesses starts two processes at once on one run folder,
// several times, with flock and with the exclusive-create lock: exactly
// one gets it each time, the other exits 1 naming the holder's pid. The
// holder keeps the lock until both have tried, however slowly a loaded
// machine starts them.
func TestLockTwoProcesses(t *testing.T) {
	for _, mode := range []string{"flock", "exclusive"} {
		for trial := range 4 {
			dir := filepath.Join(t.TempDir(), "run")
			outs := make([]string, 2)
			codes := make([]int, 2)
			pids := make([]int, 2)
			cmds := make([]*exec.Cmd, 2)
			stdins := make([]io.WriteCloser, 2)
			var tried, exited sync.WaitGroup
			for i := range 2 {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
				if mode == "exclusive" {
					cmd.Env = append(cmd.Env, "PROXGEN_TRAIN_LOCK_EXCL=1")
				}
				in, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmds[i], stdins[i] = cmd, in
				tried.Add(1)
				exited.Add(1)
				go func() {
					defer exited.Done()
					r := bufio.NewReader(out)
					first, _ := r.ReadString('\n') // "locked", or the error
					tried.Done()
					rest, _ := io.ReadAll(r)
					outs[i] = first + string(rest)
				}()
			}
			for i := range 2 {
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
				pids[i] = cmds[i].Process.Pid
			}
			tried.Wait()
			for i := range 2 {
				stdins[i].Close()
			}
			exited.Wait()
			for i := range 2 {
				cmds[i].Wait()
				codes[i] = cmds[i].ProcessState.ExitCode()
			}
			winner := -1
			for i := range 2 {
				if codes[i] == 0 && strings.TrimSpace(outs[i]) == "locked" {
					if winner >= 0 {
						t.Fatalf("%s trial %d: both processes took the lock", mode, trial)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("%s trial %d: no process took the lock: %q %q (exit %v)", mode, trial, outs[0], outs[1], codes)
			}
			loser := 1 - winner
			want := fmt.Sprintf("pid %d on host", pids[winner])
			if codes[loser] != 1 || !strings.Contains(outs[loser], "in use by another run") || !strings.Contains(outs[loser], want) {
				t.Fatalf("%s trial %d: the second process exited %d with %q, want 1 and a message naming %q", mode, trial, codes[loser], outs[loser], want)
			}
			if _, err := os.Stat(filepath.Join(dir, train.LockName)); !os.IsNotExist(err) {
				t.Fatalf("%s trial %d: lock file left after release (%v)", mode, trial, err)
			}
		}
	}
}

// TestLockStale checks that an exclusive-create lock left by a process of
// this host that has ended is taken over, one of another host is not, and
// that a lock in a folder it created leaves no folder behind.
func TestLockStale(t *testing.T) {
	dir := t.TempDir()
	// A pid that no longer runs: a finished child's.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"=") // runs no helper
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	path := filepath.Join(dir, train.LockName)
	write := func(pid int, host string) {
		if err := os.WriteFile(path, []byte(fmt.Sprintf("pid %d\nhost %s\nsince 2026-01-01T00:00:00Z\n", pid, host)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cmd.Process.Pid, host)
	l, err := train.LockDirExclusive(dir)
	if err != nil {
		t.Fatalf("a stale lock of this host was not taken over: %v", err)
	}
	l.Release()

	write(cmd.Process.Pid, "elsewhere.example")
	_, err = train.LockDirExclusive(dir)
	var le *train.LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "on host elsewhere.example") {
		t.Fatalf("a lock of another host: error %v, want a LockedError naming the host", err)
	}
	// flock ignores a leftover file: the kernel knows no holder.
	l, err = train.LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir over a leftover lock file: %v", err)
	}
	l.Release()

	// A folder created for the lock and left empty is removed.
	fresh := filepath.Join(t.TempDir(), "a", "b")
	l, err = train.LockDir(fresh)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Fatalf("the folders created for the lock were kept (%v)", err)
	}
}
