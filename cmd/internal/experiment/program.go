package experiment

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// Program is the skeleton that the training programs (cifar, ptb) share:
// parse the flags; with -resume take the run folder's lock before
// anything is read, read the stored settings, check them, apply this
// invocation's flags to them and check the result; set the thread count;
// run; and turn the outcome into an exit status of internal/cli with one
// message on stderr. C is the program's settings, usually a pointer.
type Program[C any] struct {
	// Name prefixes every message ("cifar: ...").
	Name string
	// Parse parses and checks args. It returns flag.ErrHelp after -h;
	// every other error is a usage error, printed after the usage that
	// the flag package may have printed.
	Parse func(args []string, stderr io.Writer) (C, error)
	// ResumeDir returns the run folder when c asks to continue a run,
	// and "" otherwise.
	ResumeDir func(c C) string
	// ReadStored reads the checkpoint of a run folder and the settings
	// stored in it; an error that is os.ErrNotExist means that the folder
	// holds no run (a usage error).
	ReadStored func(dir string) (*train.Checkpoint, C, error)
	// CheckStored validates the stored settings without changing them: a
	// damaged or edited file must not reach the model or the data.
	CheckStored func(stored C) error
	// Merge returns the stored settings with this invocation's flags
	// applied (the flags a resumed run may change); any other flag given
	// must equal its stored value.
	Merge func(stored, now C) (C, error)
	// Check validates the merged settings and fills in what derives from
	// them; an error is a usage error (the new flags do not fit the run).
	Check func(merged C) error
	// Resumed, when set, is called before a resumed run starts, for
	// example to say on stderr what the new flags change.
	Resumed func(ck *train.Checkpoint, stored, merged C, stderr io.Writer)
	// Threads returns the -threads setting (0: all cores).
	Threads func(c C) int
	// Run runs the program; resume is the checkpoint of a resumed run
	// (nil otherwise) and threads the worker count it runs with.
	// train.ErrInterrupted (or an error wrapping it) means that it
	// stopped on a signal after saving what it had.
	Run func(ctx context.Context, c C, resume *train.Checkpoint, threads int, stdout, stderr io.Writer) error
	// ResumeHint, when set, returns the command that continues an
	// interrupted run ("" for none).
	ResumeHint func(c C) string
}

// Main runs the program with args and returns its exit status
// (cli.ExitOK, ExitError, ExitUsage or ExitInterrupted).
func (p Program[C]) Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", p.Name, fmt.Sprintf(format, a...))
		return code
	}
	c, err := p.Parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		return fail(cli.ExitUsage, "%v", err)
	}
	var resume *train.Checkpoint
	if dir := p.ResumeDir(c); dir != "" {
		// One program at a time in a run folder: the lock comes before
		// the checkpoint is read.
		lock, err := train.LockDir(dir)
		if err != nil {
			return fail(cli.ExitError, "%v", err)
		}
		defer lock.Release()
		ck, stored, err := p.ReadStored(dir)
		if err != nil {
			code := cli.ExitError
			if errors.Is(err, os.ErrNotExist) {
				code = cli.ExitUsage // -out names no run
			}
			return fail(code, "-resume: %v", strings.TrimPrefix(err.Error(), "-resume: "))
		}
		if err := p.CheckStored(stored); err != nil {
			return fail(cli.ExitError, "-resume: %s: stored configuration: %v", ck.Path, err)
		}
		merged, err := p.Merge(stored, c)
		if err != nil {
			return fail(cli.ExitUsage, "%v", err)
		}
		if err := p.Check(merged); err != nil {
			return fail(cli.ExitUsage, "-resume: %v", err)
		}
		if p.Resumed != nil {
			p.Resumed(ck, stored, merged, stderr)
		}
		c, resume = merged, ck
	}
	threads, restore := SetThreads(p.Threads(c))
	defer restore()

	err = p.Run(ctx, c, resume, threads, stdout, stderr)
	switch {
	case err == nil:
		return cli.ExitOK
	case errors.Is(err, train.ErrInterrupted):
		if p.ResumeHint != nil {
			if hint := p.ResumeHint(c); hint != "" {
				return fail(cli.ExitInterrupted, "interrupted; continue with: %s", hint)
			}
		}
		return cli.ExitInterrupted
	case cli.ExitCode(err) == cli.ExitUsage:
		return fail(cli.ExitUsage, "%v", err)
	default:
		// Errors of a data package may already start with the program's
		// name ("ptb: ...").
		return fail(cli.ExitError, "%v", strings.TrimPrefix(err.Error(), p.Name+": "))
	}
}
