package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestPrograms builds every program under cmd/ and runs each (every
// subcommand of bench) with a flag that does not exist and with -h: the
// first must exit 2 printing the error and the usage, the second exit 0
// printing "name: description", the usage line and every flag with its
// type, without a sentinel default.
func TestPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every program")
	}
	bin := t.TempDir() + string(os.PathSeparator)
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/...")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	// Every program, and the subcommands of those that have them.
	subcommands := map[string][]string{
		"bench": {"gemm", "train", "infer"},
		"sweep": {"plan", "run", "local", "slurm", "k8s", "status", "collect"},
	}
	names, _ := filepath.Glob(bin + "*")
	var programs [][]string
	for _, n := range names {
		n = filepath.Base(n)
		if sub, ok := subcommands[n]; ok {
			for _, s := range sub {
				programs = append(programs, []string{n, s})
			}
			continue
		}
		programs = append(programs, []string{n})
	}
	if len(programs) < 8 {
		t.Fatalf("built %v, want at least cifar, ptb, serve, lasso, export and bench", names)
	}
	var env []string // added to the environment of run
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin+args[0], args[1:]...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), out.String()
		}
		t.Fatal(err)
		return 0, ""
	}
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)( \S+)?$`)
	for _, p := range programs {
		name := strings.Join(p, " ")
		code, out := run(append(p, "-no-such-flag")...)
		if code != ExitUsage || !strings.Contains(out, "-no-such-flag") || !strings.Contains(out, "usage: "+name) {
			t.Errorf("%s -no-such-flag: exit %d, output\n%s\nwant exit %d, the error and the usage", name, code, out, ExitUsage)
		}
		code, out = run(append(p, "-h")...)
		lines := strings.Split(out, "\n")
		if code != ExitOK || !strings.HasPrefix(lines[0], name+": ") || len(lines[0]) < len(name)+20 || !strings.Contains(out, "\nusage: "+name) {
			t.Errorf("%s -h: exit %d, output\n%s\nwant exit 0, %q with a description, and the usage line", name, code, out, name+": ")
			continue
		}
		flags := 0
		for _, l := range lines {
			if m := flagLine.FindStringSubmatch(l); m != nil {
				flags++
				if m[2] == " value" {
					t.Errorf("%s -h: -%s has no type name: %q", name, m[1], l)
				}
			}
			for _, bad := range []string{"(default -2)", "(default -1)", "NaN", "(default auto)"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s -h shows a sentinel default: %q", name, l)
				}
			}
		}
		if flags < 1 {
			t.Errorf("%s -h lists %d flags", name, flags)
		}
	}
	// bench or sweep without a command, or with an unknown one, is a
	// usage error.
	for _, args := range [][]string{{"bench"}, {"bench", "nope"}, {"sweep"}, {"sweep", "nope"}} {
		if code, out := run(args...); code != ExitUsage || !strings.Contains(out, "usage: "+args[0]) {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
	for _, p := range []string{"bench", "sweep"} {
		if code, out := run(p, "-h"); code != ExitOK || !strings.HasPrefix(out, p+": ") {
			t.Errorf("%s -h: exit %d, output %q", p, code, out)
		}
	}
	// Every program that computes reads PROXGEN_GEMM first (package
	// cmd/internal/compute): a kernel this machine lacks is a usage
	// error, reported before anything else.
	env = []string{"PROXGEN_GEMM=bogus"}
	for _, p := range []string{"bench", "cifar", "lasso", "ptb", "serve", "sweep"} {
		code, out := run(p, "-h")
		if code != ExitUsage || !strings.HasPrefix(out, p+`: PROXGEN_GEMM="bogus": `) || !strings.Contains(out, "generic") {
			t.Errorf("PROXGEN_GEMM=bogus %s -h: exit %d, output %q; want exit %d and the error naming the kernels", p, code, out, ExitUsage)
		}
	}
	env = []string{"PROXGEN_GEMM=generic"}
	if code, out := run("bench", "gemm", "-m", "5", "-n", "7", "-k", "3", "-reps", "1", "-warmup-time", "0"); code != ExitOK || !strings.Contains(out, "kernel generic, chosen as PROXGEN_GEMM=generic; generic: ") {
		t.Errorf("PROXGEN_GEMM=generic bench gemm: exit %d, output %q; want the generic kernel chosen by PROXGEN_GEMM", code, out)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "epoch", "1 epoch"}, {0, "epoch", "0 epochs"}, {2, "batch", "2 batches"}, {30, "thread", "30 threads"}} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	if ExitCode(nil) != ExitOK || ExitCode(Usagef("x")) != ExitUsage || ExitCode(errors.New("x")) != ExitError {
		t.Error("ExitCode maps nil, a usage error and another error wrongly")
	}
}
