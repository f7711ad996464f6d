package train

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/internal/atomicfile"
)

// FaultEnv is the environment variable that injects faults into the file
// writes of a Loop, for fault-injection tests of programs built on this
// package. It is read once by Loop.Run; unset (the normal case) it does
// nothing. Values:
//
//	crash:N  kill the process (SIGKILL on Unix) at the N-th write event
//	         of the run, counted from 1. Every file write has the events
//	         "half the data written to the temporary file", "temporary file
//	         complete and synced" and "renamed into place, directory not yet
//	         synced"; a checkpoint write also has "previous generation
//	         linked" before its rename.
//	full:N   fail every write once N bytes in all have been written by the
//	         run, as a full disk does.
const FaultEnv = "PROXGEN_TRAIN_FAULT"

// errDiskFull is the error of an injected full disk.
var errDiskFull = errors.New("no space left on device (injected by " + FaultEnv + ")")

// faults is the fault injection of one run, parsed from FaultEnv.
type faults struct {
	crashAt int   // event number to die at; 0: never
	events  int   // events so far
	budget  int64 // bytes left before writes fail; <0: unlimited
}

func parseFaults(s string) (*faults, error) {
	f := &faults{budget: -1}
	if s == "" {
		return f, nil
	}
	kind, n, ok := strings.Cut(s, ":")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 0 {
		return nil, fmt.Errorf("%s=%q: want crash:N or full:N", FaultEnv, s)
	}
	switch kind {
	case "crash":
		f.crashAt = int(v)
	case "full":
		f.budget = v
	default:
		return nil, fmt.Errorf("%s=%q: want crash:N or full:N", FaultEnv, s)
	}
	return f, nil
}

// event counts a write event and kills the process at the chosen one.
func (f *faults) event() {
	f.events++
	if f.crashAt > 0 && f.events == f.crashAt {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
		select {} // wait for the signal to land
	}
}

// write writes b to fh, failing as a full disk would when the budget is
// spent, with an event after the first half.
func (f *faults) write(fh io.Writer, b []byte) error {
	half := len(b) / 2
	for i, part := range [][]byte{b[:half], b[half:]} {
		if f.budget >= 0 {
			if int64(len(part)) > f.budget {
				n, _ := fh.Write(part[:f.budget])
				f.budget -= int64(n)
				return errDiskFull
			}
			f.budget -= int64(len(part))
		}
		if _, err := fh.Write(part); err != nil {
			return err
		}
		if i == 0 {
			f.event()
		}
	}
	return nil
}

// writeAtomic replaces path by data through atomicfile, with the
// injected faults; when keep is not empty the old file becomes keep (the
// previous generation).
func (f *faults) writeAtomic(path string, data []byte, keep string) error {
	return atomicfile.Write(path, data, atomicfile.Options{
		Keep:  keep,
		Fill:  f.write,
		Event: func() error { f.event(); return nil },
	})
}
