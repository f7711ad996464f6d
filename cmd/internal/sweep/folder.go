package sweep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/internal/atomicfile"
	"github.com/proxgen/proxgen/nn/train"
)

// Files of a sweep folder.
const (
	SpecFile     = "sweep.json"
	ManifestFile = "manifest.json"
	SummaryFile  = "summary.json" // of a run folder: present once the run is complete
)

// ErrOtherSpec reports a sweep folder planned from another spec.
var ErrOtherSpec = errors.New("the sweep folder belongs to another spec")

// WritePlan writes the spec and its manifest to the sweep folder dir,
// creating it. Planning the same spec again rewrites the same bytes; a
// folder planned from another spec is refused with ErrOtherSpec.
func WritePlan(dir string, s *Spec, m *Manifest) error {
	if old, err := ReadManifest(dir); err == nil {
		if old.Spec != m.Spec {
			return fmt.Errorf("%s: %w (planned from spec %.12s…, this one is %.12s…); plan it into a new folder", dir, ErrOtherSpec, old.Spec, m.Spec)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    any
	}{{SpecFile, s}, {ManifestFile, m}} {
		b, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, f.name), append(b, '\n'), atomicfile.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// ReadManifest reads the manifest of the sweep folder dir.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", filepath.Join(dir, ManifestFile), m.Format, ManifestFormat)
	}
	for i, r := range m.Runs {
		if r.Index != i || filepath.IsAbs(r.Dir) || strings.HasPrefix(filepath.Clean(r.Dir), "..") {
			return nil, fmt.Errorf("%s: run %d: bad index %d or folder %q", filepath.Join(dir, ManifestFile), i, r.Index, r.Dir)
		}
	}
	return &m, nil
}

// Run returns run i of m, or an error for an index out of range.
func (m *Manifest) Run(i int) (Run, error) {
	if i < 0 || i >= len(m.Runs) {
		return Run{}, fmt.Errorf("run %d: the sweep has runs 0 to %d", i, len(m.Runs)-1)
	}
	return m.Runs[i], nil
}

// exitFile is the file that records the last exit status of run i.
func exitFile(dir string, i int) string {
	return filepath.Join(dir, "logs", fmt.Sprintf("%04d.exit", i))
}

// LogFile is the file the output of run i goes to when the sweep runs on
// this machine (cmd/sweep local).
func LogFile(dir string, i int) string {
	return filepath.Join(dir, "logs", fmt.Sprintf("%04d.log", i))
}

// RunArgs returns the program arguments that run (or continue) run r of
// the sweep folder dir: with -resume when its folder holds a checkpoint,
// as a new run otherwise (also when an earlier attempt was killed before
// its first checkpoint). A resumed run gets the point's arguments too, so
// that the settings a resume may change (-progress, -json, ...) stay the
// spec's rather than the program's defaults; the others equal the stored
// ones, as -resume requires. threads > 0 adds -threads.
func RunArgs(dir string, r Run, threads int) (args []string, resume bool) {
	out := filepath.Join(dir, r.Dir)
	args = append(slices.Clone(r.Args), "-out", out)
	if _, err := os.Lstat(filepath.Join(out, train.CheckpointName)); err == nil {
		args, resume = append(args, "-resume"), true
	}
	if threads > 0 {
		args = append(args, "-threads", strconv.Itoa(threads))
	}
	return args, resume
}

// RunIndex runs point i of the sweep folder dir in this process with the
// program's Main, resuming it when it has a checkpoint (RunArgs), and
// records the exit status in logs/NNNN.exit. It returns the program's
// exit status.
func RunIndex(ctx context.Context, dir string, i, threads int, stdout, stderr io.Writer) (int, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return 0, err
	}
	r, err := m.Run(i)
	if err != nil {
		return 0, err
	}
	prog, err := LookupProgram(m.Program)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return 0, err
	}
	args, resume := RunArgs(dir, r, threads)
	waitForLock(ctx, filepath.Join(dir, r.Dir), lockWait)
	what := "starting"
	if resume {
		what = "resuming"
	}
	fmt.Fprintf(stderr, "sweep: run %d (%s): %s %s %s\n", i, r.Label, what, prog.Name, strings.Join(quoteAll(args), " "))
	code := prog.Main(ctx, args, stdout, stderr)
	line := fmt.Sprintf("%d %s\n", code, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(exitFile(dir, i), []byte(line), 0o644); err != nil {
		return code, err
	}
	return code, nil
}

// lockWait is how long RunIndex waits for a run folder's lock that
// another process holds: a runner killed an instant ago, or its child
// saving its checkpoint after its parent-death signal, holds it for a
// moment, and the same command run again at once must not fail for that.
const lockWait = 15 * time.Second

// waitForLock waits up to wait (or until ctx ends) for the lock of the run
// folder out to be free; it takes nothing. A folder that does not exist
// yet is free. If the lock stays held, the program reports its holder.
func waitForLock(ctx context.Context, out string, wait time.Duration) {
	if _, err := os.Stat(out); err != nil {
		return
	}
	deadline := time.Now().Add(wait)
	for {
		l, err := train.LockDir(out)
		if err == nil {
			l.Release()
			return
		}
		var held *train.LockedError
		if !errors.As(err, &held) || !time.Now().Before(deadline) || ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// Status describes one run of a sweep as its folder shows it.
type Status struct {
	Run
	// State is "pending" (nothing written yet), "partial" (a checkpoint
	// or metrics, not complete), "done" (summary written) or "failed"
	// (the last attempt exited with an error and left no complete run).
	State string
	// Epoch is the number of finished epochs; Step the steps done in the
	// next one.
	Epoch, Step int
	// Last is the last metrics record (nil when none).
	Last map[string]any
	// Exit is the last recorded exit status (-1 when none).
	Exit int
	// ETA estimates the remaining time from the mean time of the finished
	// epochs (0 when unknown or done).
	ETA time.Duration
}

// ReadStatus reads the state of every run of the sweep folder dir.
func ReadStatus(dir string, m *Manifest) []Status {
	out := make([]Status, len(m.Runs))
	for i, r := range m.Runs {
		out[i] = runStatus(dir, r)
	}
	return out
}

func runStatus(dir string, r Run) Status {
	s := Status{Run: r, State: "pending", Exit: -1}
	rd := filepath.Join(dir, r.Dir)
	if b, err := os.ReadFile(exitFile(dir, r.Index)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				s.Exit = v
			}
		}
	}
	recs := readRecords(filepath.Join(rd, train.MetricsName))
	if len(recs) > 0 {
		s.Last = recs[len(recs)-1]
		s.Epoch = len(recs)
		s.State = "partial"
	}
	if ck, err := train.ReadCheckpoint(rd); err == nil {
		s.Epoch, s.Step, s.State = ck.Epoch(), ck.Step(), "partial"
	}
	switch _, err := os.Stat(filepath.Join(rd, SummaryFile)); {
	case err == nil:
		s.State = "done"
	case s.Exit > 0 && s.Exit != 130:
		s.State = "failed"
	}
	if s.State == "partial" && len(recs) > 0 && r.Epochs > s.Epoch {
		var sec float64
		for _, rec := range recs {
			for _, k := range []string{"seconds", "train_seconds", "eval_seconds"} {
				if v, ok := rec[k].(float64); ok {
					sec += v
				}
			}
		}
		s.ETA = time.Duration(sec / float64(len(recs)) * float64(r.Epochs-s.Epoch) * float64(time.Second)).Round(time.Second)
	}
	return s
}

// readRecords returns the JSON objects of a metrics.jsonl file (none when
// it is missing; a torn last line is left out).
func readRecords(path string) []map[string]any {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var recs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			recs = append(recs, r)
		}
	}
	return recs
}

// ToDo returns the indexes of the runs to run: those not done (all of them
// with all) whose folder matches match.
func ToDo(st []Status, all bool, match *regexp.Regexp) []int {
	var todo []int
	for _, s := range st {
		if (all || s.State != "done") && match.MatchString(s.Dir) {
			todo = append(todo, s.Index)
		}
	}
	return todo
}

// ParseIndexes reads a comma-separated list of run indexes ("" is none).
func ParseIndexes(s string) ([]int, error) {
	var ix []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a run index", f)
		}
		if slices.Contains(ix, i) {
			return nil, fmt.Errorf("run %d is given twice", i)
		}
		ix = append(ix, i)
	}
	return ix, nil
}
