package experiment

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// fakeConfig is the settings of the program the skeleton test runs.
type fakeConfig struct {
	resume  string
	epochs  int
	checked bool
}

// fakeProgram returns a Program whose hooks fail as told, and the record
// of what ran.
func fakeProgram(readErr, storedErr, mergeErr, checkErr, runErr error) (Program[*fakeConfig], *[]string) {
	var calls []string
	return Program[*fakeConfig]{
		Name: "fake",
		Parse: func(args []string, _ io.Writer) (*fakeConfig, error) {
			switch {
			case len(args) > 0 && args[0] == "-h":
				return nil, flag.ErrHelp
			case len(args) > 0 && args[0] == "-bad":
				return nil, cli.Usagef("-bad: no such flag")
			case len(args) > 1 && args[0] == "-resume":
				return &fakeConfig{resume: args[1]}, nil
			}
			return &fakeConfig{epochs: 1}, nil
		},
		ResumeDir: func(c *fakeConfig) string { return c.resume },
		ReadStored: func(dir string) (*train.Checkpoint, *fakeConfig, error) {
			calls = append(calls, "read")
			if readErr != nil {
				return nil, nil, readErr
			}
			return &train.Checkpoint{Path: dir + "/train_state.safetensors"}, &fakeConfig{epochs: 3}, nil
		},
		CheckStored: func(*fakeConfig) error { calls = append(calls, "check-stored"); return storedErr },
		Merge: func(stored, now *fakeConfig) (*fakeConfig, error) {
			calls = append(calls, "merge")
			m := *stored
			m.resume = now.resume
			return &m, mergeErr
		},
		Check: func(c *fakeConfig) error {
			calls = append(calls, "check")
			c.checked = true
			return checkErr
		},
		Threads: func(*fakeConfig) int { return 1 },
		Run: func(_ context.Context, c *fakeConfig, resume *train.Checkpoint, _ int, _, _ io.Writer) error {
			calls = append(calls, fmt.Sprintf("run epochs=%d resumed=%v checked=%v", c.epochs, resume != nil, c.checked))
			return runErr
		},
		ResumeHint: func(c *fakeConfig) string { return "fake -resume " + c.resume },
	}, &calls
}

func TestProgramMain(t *testing.T) {
	notExist := fmt.Errorf("no checkpoint: %w", os.ErrNotExist)
	for _, c := range []struct {
		name                                        string
		args                                        []string
		readErr, storedErr, mergeErr, checkErr, run error
		code                                        int
		stderr                                      string // a part of the message; "" for none
		calls                                       string
	}{
		{name: "help", args: []string{"-h"}, code: cli.ExitOK},
		{name: "bad flag", args: []string{"-bad"}, code: cli.ExitUsage, stderr: "fake: -bad: no such flag"},
		{name: "fresh run", code: cli.ExitOK, calls: "run epochs=1 resumed=false checked=false"},
		{name: "resume", args: []string{"-resume", t.TempDir()}, code: cli.ExitOK,
			calls: "read check-stored merge check run epochs=3 resumed=true checked=true"},
		{name: "no run in the folder", args: []string{"-resume", t.TempDir()}, readErr: notExist, code: cli.ExitUsage,
			stderr: "fake: -resume: no checkpoint", calls: "read"},
		{name: "damaged checkpoint", args: []string{"-resume", t.TempDir()}, readErr: errors.New("crc mismatch"), code: cli.ExitError,
			stderr: "fake: -resume: crc mismatch", calls: "read"},
		{name: "damaged stored settings", args: []string{"-resume", t.TempDir()}, storedErr: errors.New("-epochs -1"), code: cli.ExitError,
			stderr: "stored configuration: -epochs -1", calls: "read check-stored"},
		{name: "flag that may not change", args: []string{"-resume", t.TempDir()}, mergeErr: errors.New("-seed 2 differs from the run's 1"), code: cli.ExitUsage,
			stderr: "fake: -seed 2 differs", calls: "read check-stored merge"},
		{name: "new flags that do not fit", args: []string{"-resume", t.TempDir()}, checkErr: errors.New("-epochs 2 ends before the warm-up"), code: cli.ExitUsage,
			stderr: "fake: -resume: -epochs 2", calls: "read check-stored merge check"},
		{name: "interrupted", args: []string{"-resume", "DIR"}, run: fmt.Errorf("epoch 2: %w", train.ErrInterrupted), code: cli.ExitInterrupted,
			stderr: "fake: interrupted; continue with: fake -resume DIR", calls: "read check-stored merge check run epochs=3 resumed=true checked=true"},
		{name: "failed run", run: errors.New("fake: data: truncated"), code: cli.ExitError, stderr: "fake: data: truncated",
			calls: "run epochs=1 resumed=false checked=false"},
		{name: "usage error found while running", run: cli.Usagef("-weights: not a model file"), code: cli.ExitUsage,
			stderr: "fake: -weights: not a model file", calls: "run epochs=1 resumed=false checked=false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "interrupted" {
				c.args[1] = t.TempDir()
				c.stderr = "fake: interrupted; continue with: fake -resume " + c.args[1]
			}
			p, calls := fakeProgram(c.readErr, c.storedErr, c.mergeErr, c.checkErr, c.run)
			var stderr bytes.Buffer
			code := p.Main(context.Background(), c.args, io.Discard, &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr.String())
			}
			if c.stderr == "" && stderr.Len() > 0 || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), c.stderr)
			}
			if got := strings.Join(*calls, " "); got != c.calls {
				t.Errorf("calls %q, want %q", got, c.calls)
			}
		})
	}
}
