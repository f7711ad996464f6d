//go:build linux

package sweep

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}

// TestChildDiesWithRunner kills a runner with SIGKILL while its child (as
// sweep local starts them) runs: the child gets its parent-death signal
// and ends (issue 35: the killed runner's child trained on and held the
// run folder's lock, so that the restarted runner exited "in use by
// another run" 6 times in 6).
func TestChildDiesWithRunner(t *testing.T) {
	if os.Getenv("SWEEP_TEST_RUNNER") == "1" {
		cmd := exec.Command("sleep", "60")
		wait, err := startChild(cmd)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		wait()
		os.Exit(0)
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command")
	}
	runner := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithRunner$")
	runner.Env = append(os.Environ(), "SWEEP_TEST_RUNNER=1")
	out, err := runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		runner.Process.Kill()
		t.Fatalf("runner said %q (%v)", line, err)
	}
	if !alive(pid) {
		t.Fatalf("child %d is not running", pid)
	}
	runner.Process.Kill()
	runner.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
			t.Fatalf("child %d still runs 5 s after its runner was killed", pid)
		}
	}
}
