package experiment

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

// ReadStoredRun reads the checkpoint of the run folder dir and decodes
// the settings stored in its run state (train.State.JSON, the member
// "config" of a JSON object) into config, which holds the defaults of
// settings the file lacks. No tensor is loaded. A folder without a
// checkpoint gives an error that is os.ErrNotExist.
func ReadStoredRun(dir string, config any) (*train.Checkpoint, error) {
	ck, err := train.ReadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	var st struct {
		Config json.RawMessage `json:"config"`
	}
	err = json.Unmarshal(ck.User(), &st)
	if err == nil && (len(st.Config) == 0 || string(st.Config) == "null") {
		err = fmt.Errorf("no stored configuration")
	}
	if err == nil {
		err = json.Unmarshal(st.Config, config)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: bad run state: %w", ck.Path, err)
	}
	return ck, nil
}

// MergeFlags applies to merged, a flag set bound to a copy of the stored
// settings of a run, the flags of this invocation: for every flag named in
// explicit, read from now, a flag in mutable takes the new value and any
// other must equal its value in stored. The error lists the flags that
// differ.
func MergeFlags(stored, now, merged *flag.FlagSet, explicit map[string]bool, mutable []string) error {
	var diff []string
	for name := range explicit {
		got := now.Lookup(name).Value.String()
		if slices.Contains(mutable, name) {
			// Settings of the environment rather than of the run (and
			// -epochs, to extend or shorten it) may change.
			if err := merged.Set(name, got); err != nil {
				return fmt.Errorf("-%s: %w", name, err)
			}
			continue
		}
		if want := stored.Lookup(name).Value.String(); got != want {
			diff = append(diff, fmt.Sprintf("-%s %s (the run has %s)", name, got, want))
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		return fmt.Errorf("-resume continues the run with its own settings; these flags differ: %s", strings.Join(diff, ", "))
	}
	return nil
}

// CheckNewRun returns an error when the run folder dir already holds a
// checkpoint, so that a new run does not overwrite it: a *cli.UsageError,
// since -resume or another -out is what was missing.
func CheckNewRun(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, train.CheckpointName)); err == nil {
		return cli.Usagef("%s already holds a run (%s); continue it with -resume or choose another -out", dir, train.CheckpointName)
	}
	return nil
}

// LockNewRun takes the lock of the run folder dir (train.LockDir), so
// that no other program runs in it, and checks that it holds no run yet
// (CheckNewRun); the caller releases the lock when its run ends.
func LockNewRun(dir string) (*train.Lock, error) {
	lock, err := train.LockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := CheckNewRun(dir); err != nil {
		lock.Release()
		return nil, err
	}
	return lock, nil
}

// DecodeHistory decodes the metrics records of a run (train.Info.History)
// into values of type T (null, written for a non-finite value, decodes as
// the zero value).
func DecodeHistory[T any](lines []json.RawMessage) ([]T, error) {
	recs := make([]T, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &recs[i]); err != nil {
			return nil, fmt.Errorf("metrics record %d: %w", i+1, err)
		}
	}
	return recs, nil
}

// SetThreads is compute.SetThreads: it makes the program compute on n
// threads (0: all CPUs), setting Go's GOMAXPROCS and the worker pool's
// size for the whole process, and returns the number and a function
// restoring the previous settings.
func SetThreads(n int) (int, func()) { return compute.SetThreads(n) }

// ParseFlags parses args with fs and returns the names of the flags that
// were given; an argument left over is a usage error (every setting of a
// training program is a flag).
func ParseFlags(fs *flag.FlagSet, args []string) (explicit map[string]bool, err error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q (all settings are flags)", fs.Arg(0))
	}
	explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	return explicit, nil
}
