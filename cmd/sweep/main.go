// Command sweep plans a grid of cifar or ptb training runs, runs its
// points on this machine or hands them to Slurm or Kubernetes, and
// watches and collects them.
//
// Usage:
//
//	sweep plan -spec SPEC.json -dir DIR     expand the grid into DIR/manifest.json
//	sweep run -dir DIR [-threads N] INDEX   run (or resume) one point in-process (INDEX: number or run folder)
//	sweep local -dir DIR [-j N]             run the points here, N at a time
//	sweep slurm -dir DIR [-submit] ...      write (and submit) a Slurm job array
//	sweep k8s -dir DIR -image IMG -claim PVC ...  write a Kubernetes Indexed Job
//	sweep status -dir DIR                   one line per run
//	sweep collect -dir DIR                  table (CSV, Markdown) and chart of finished runs
//
// A spec names the program and its flags (cmd/internal/sweep.Spec):
//
//	{"program": "cifar",
//	 "flags": {"data": "/data/cifar10", "epochs": "30"},
//	 "grid": {"reg": ["l12", "l1"], "lambda": ["0.1", "1"], "seed": ["1", "2"]}}
//
// Values may use environment variables ($DATA, ${LAMBDAS}), expanded
// when the sweep is planned.
//
// "run" is idempotent: it resumes its point when the run folder holds a
// checkpoint and starts it otherwise, so a killed, preempted or requeued
// point is finished by the same command, with the same bytes as an
// uninterrupted run. Bad input (an unknown program, a flag the program
// does not have, an invalid value, an empty grid, duplicate points, a
// folder planned from another spec) exits 2 before anything runs or is
// submitted; docs/sweeps.md has the details and the cluster recipes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/cmd/internal/compute"
	"github.com/proxgen/proxgen/cmd/internal/sweep"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn/train"
)

func main() {
	// The GEMM kernel of the whole process: $PROXGEN_GEMM, else the fastest.
	if _, err := compute.SetGEMM(); err != nil {
		fmt.Fprintf(os.Stderr, "sweep: %v\n", err)
		os.Exit(cli.ExitCode(err))
	}
	// Training runs in-process (sweep run): the signals stay caught until
	// the process exits, so that any number of them during a checkpoint
	// save still ends in a consistent checkpoint and exit 130.
	os.Exit(run(train.CatchInterrupts(), os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks bad input (exit status 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

const usage = `usage: sweep plan|run|local|slurm|k8s|status|collect [flags]; sweep COMMAND -h for its flags`

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "sweep: plans a grid of cifar or ptb training runs, runs them here or on Slurm or Kubernetes, and collects them (docs/sweeps.md)\n\n%s\n", usage)
		return cli.ExitOK
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) (int, error){
		"plan": plan, "run": runPoint, "local": local, "slurm": slurm, "k8s": k8s, "status": status, "collect": collect,
	}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sweep: unknown command %q\n%s\n", args[0], usage)
		return cli.ExitUsage
	}
	code, err := f(ctx, args[1:], stdout, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cli.ExitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "sweep %s: %v\n", args[0], err)
		return cli.ExitUsage
	case err != nil:
		fmt.Fprintf(stderr, "sweep %s: %v\n", args[0], err)
		return cli.ExitError
	}
	return code
}

// commands are the usage lines and descriptions of the commands.
var commands = map[string][2]string{
	"plan":    {"sweep plan -spec SPEC.json -dir DIR", "expands the grid of a sweep spec into DIR/manifest.json"},
	"run":     {"sweep run -dir DIR [-threads N] INDEX", "runs (or resumes) one point of a planned sweep in this process (INDEX: number or run folder)"},
	"local":   {"sweep local -dir DIR [-j N]", "runs the points of a planned sweep on this machine, N at a time"},
	"slurm":   {"sweep slurm -dir DIR [-submit] [flags]", "writes (and submits) a Slurm job array for a planned sweep"},
	"k8s":     {"sweep k8s -dir DIR -image IMG -claim PVC [flags]", "writes a Kubernetes Indexed Job for a planned sweep"},
	"status":  {"sweep status -dir DIR", "prints one line per run of a planned sweep"},
	"collect": {"sweep collect -dir DIR", "tabulates (CSV, Markdown) and charts the finished runs of a sweep"},
}

// flags returns the flag set of a command with its -dir flag.
func flags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := cli.NewFlagSet("sweep "+name, commands[name][0], commands[name][1], stderr)
	return fs, fs.String("dir", "", "the sweep folder")
}

// parse parses args and checks -dir and the number of arguments.
func parse(fs *flag.FlagSet, dir *string, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *dir == "" {
		return usagef("-dir is required")
	}
	if fs.NArg() != nargs {
		return usagef("want %d arguments after the flags, got %q", nargs, fs.Args())
	}
	return nil
}

// manifest reads the manifest of dir; a folder without one is bad input.
func manifest(dir string) (*sweep.Manifest, error) {
	m, err := sweep.ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("%s holds no planned sweep (run sweep plan first)", dir)
	}
	return m, err
}

func plan(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("plan", stderr)
	specPath := fs.String("spec", "", "the sweep spec (JSON)")
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	if *specPath == "" {
		return 0, usagef("-spec is required")
	}
	m, s, err := planSpec(*specPath)
	if err != nil {
		return 0, err
	}
	if err := sweep.WritePlan(*dir, s, m); err != nil {
		if errors.Is(err, sweep.ErrOtherSpec) {
			return 0, usageError{err}
		}
		return 0, err
	}
	for _, r := range m.Runs {
		fmt.Fprintf(stdout, "%4d  %s\n", r.Index, r.Command)
	}
	fmt.Fprintf(stdout, "%d runs of %s planned in %s\n", len(m.Runs), m.Program, filepath.Join(*dir, sweep.ManifestFile))
	return 0, nil
}

// planSpec reads and plans a spec; every problem of the spec is bad input.
func planSpec(path string) (*sweep.Manifest, *sweep.Spec, error) {
	s, err := sweep.ReadSpec(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if s, err = s.Expand(os.LookupEnv); err != nil {
		return nil, nil, usageError{err}
	}
	m, err := sweep.Plan(s)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return m, s, nil
}

func runPoint(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("run", stderr)
	threads := fs.Int("threads", 0, "worker threads of the run (0: the run's own setting)")
	if err := parse(fs, dir, args, 1); err != nil {
		return 0, err
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	i, err := strconv.Atoi(fs.Arg(0))
	if err != nil {
		// A run may also be named by its folder.
		i = slices.IndexFunc(m.Runs, func(r sweep.Run) bool { return r.Dir == filepath.Clean(fs.Arg(0)) })
		if i < 0 {
			return 0, usagef("INDEX %q is neither a number nor a run folder of the sweep", fs.Arg(0))
		}
	}
	if _, err := m.Run(i); err != nil {
		return 0, usageError{err}
	}
	return sweep.RunIndex(ctx, *dir, i, *threads, stdout, stderr)
}

func local(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("local", stderr)
	jobs := fs.Int("j", 1, "runs at a time")
	threads := fs.Int("threads", 0, "threads per run (0: the CPUs divided among the -j runs)")
	all := fs.Bool("all", false, "also run the points that are done (they re-create their files)")
	match := fs.String("match", "", "run only the points whose folder name matches this regular expression")
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	if *jobs < 1 || *threads < 0 {
		return 0, usagef("-j %d and -threads %d: want -j >= 1 and -threads >= 0", *jobs, *threads)
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		return 0, usagef("-match: %v", err)
	}
	if *threads == 0 {
		*threads = max(1, runtime.NumCPU() / *jobs)
	}
	todo := sweep.ToDo(sweep.ReadStatus(*dir, m), *all, re)
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "%d of %d runs to do, %d at a time with %d threads each; logs in %s\n", len(todo), len(m.Runs), *jobs, *threads, filepath.Join(*dir, "logs"))
	err = sweep.Local(ctx, exe, *dir, todo, *jobs, *threads, os.Environ(), func(i, code int, d time.Duration) {
		fmt.Fprintf(stdout, "run %d: exit %d after %s\n", i, code, d.Round(time.Millisecond))
	})
	if ctx.Err() != nil {
		return cli.ExitInterrupted, nil
	}
	return 0, err
}

func slurm(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("slurm", stderr)
	cpus := fs.Int("cpus", 2, "CPUs per task (the run's -threads)")
	limit := fs.String("time", "", "time limit per task (Slurm syntax, e.g. 4:00:00; empty: the partition's)")
	partition := fs.String("partition", "", "partition (empty: the default one)")
	throttle := fs.Int("throttle", 0, "tasks running at once (the array's %; 0: no limit)")
	before := fs.Duration("signal-before", 5*time.Minute, "signal a task this long before its time limit so that it saves and requeues itself (0: no signal)")
	only := fs.String("runs", "", "comma-separated points to submit (default: all), for resubmitting some")
	submit := fs.Bool("submit", false, "submit the script with sbatch")
	bin := fs.String("sweep", "", "path of the sweep binary on the nodes (default: this binary)")
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	s := sweep.Slurm{Name: "sweep-" + filepath.Base(*dir), Runs: len(m.Runs), Throttle: *throttle, CPUs: *cpus,
		Time: *limit, Partition: *partition, SignalBefore: *before, Sweep: *bin}
	if s.Dir, err = filepath.Abs(*dir); err != nil {
		return 0, err
	}
	if s.Sweep == "" {
		if s.Sweep, err = os.Executable(); err != nil {
			return 0, err
		}
	}
	if s.Indexes, err = sweep.ParseIndexes(*only); err != nil {
		return 0, usagef("-runs: %v", err)
	}
	script, err := s.Script()
	if err != nil {
		return 0, usageError{err}
	}
	// The whole array is sweep.sbatch; a resubmission of some points gets
	// its own script, so that sweep.sbatch stays the whole sweep's.
	name := "sweep.sbatch"
	if len(s.Indexes) > 0 {
		ix := make([]string, len(s.Indexes))
		for k, i := range s.Indexes {
			ix[k] = strconv.Itoa(i)
		}
		name = "sweep-runs-" + strings.Join(ix, ",") + ".sbatch"
	}
	path := filepath.Join(*dir, name)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	if *submit {
		id, err := sweep.Submit(ctx, path)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(stdout, "submitted job %s\n", id)
	}
	return 0, nil
}

func k8s(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("k8s", stderr)
	k := sweep.Kubernetes{}
	fs.StringVar(&k.Image, "image", "", "container image holding the sweep binary (see docs/sweeps.md)")
	fs.StringVar(&k.Claim, "claim", "", "PersistentVolumeClaim holding the sweep folder")
	fs.StringVar(&k.MountPath, "mount", "/sweep", "where the claim is mounted in the pods: the sweep folder's path there")
	fs.StringVar(&k.Sweep, "sweep", "/sweep-bin", "path of the sweep binary in the image")
	fs.StringVar(&k.Name, "name", "", "Job name, a DNS-1123 label of at most 63 characters (default sweep-<folder name> made one)")
	fs.IntVar(&k.Parallelism, "parallelism", 4, "pods running at once")
	fs.IntVar(&k.BackoffLimit, "backoff-limit", 3, "failures of one point, not counting preemptions, before that point fails (the others go on)")
	fs.IntVar(&k.CPUs, "cpus", 2, "CPUs per pod (the run's -threads)")
	fs.StringVar(&k.Memory, "memory", "4Gi", "memory per pod")
	fs.DurationVar(&k.Grace, "grace", 2*time.Minute, "termination grace period: time to save the checkpoint after SIGTERM")
	out := fs.String("o", "", "output file (default DIR/job.json; - for stdout)")
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	k.Runs = len(m.Runs)
	if k.Name == "" {
		k.Name = sweep.JobName(filepath.Base(*dir))
	}
	b, err := k.Job()
	if err != nil {
		return 0, usageError{err}
	}
	if *out == "-" {
		_, err = stdout.Write(b)
		return 0, err
	}
	if *out == "" {
		*out = filepath.Join(*dir, "job.json")
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "wrote %s (kubectl apply -f %s)\n", *out, *out)
	return 0, nil
}

func status(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("status", stderr)
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	prog, err := sweep.LookupProgram(m.Program)
	if err != nil {
		return 0, err
	}
	return 0, sweep.WriteStatus(stdout, prog, sweep.ReadStatus(*dir, m))
}

func collect(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, dir := flags("collect", stderr)
	if err := parse(fs, dir, args, 0); err != nil {
		return 0, err
	}
	m, err := manifest(*dir)
	if err != nil {
		return 0, err
	}
	t, prog, err := sweep.Collect(*dir, m)
	if err != nil {
		return 0, err
	}
	if err := t.WriteFiles(*dir, prog); err != nil {
		return 0, err
	}
	if err := t.WriteMarkdown(stdout); err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "\n%d of %d runs finished; wrote collect.csv, collect.md and collect.svg in %s\n", len(t.Rows), len(m.Runs), *dir)
	return 0, nil
}
