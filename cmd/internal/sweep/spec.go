// Package sweep plans, runs and collects sweeps: grids of training runs of
// one program (cifar or ptb, run in-process through packages cifarrun and
// ptbrun) over values of its flags. A sweep lives in one folder:
//
//	sweep.json     the spec (Spec), as planned
//	manifest.json  the numbered runs with their flags and command lines
//	runs/NNNN/     the run folders (package nn/train keeps them)
//	logs/NNNN.log  output of local runs; logs/NNNN.exit the last exit status
//
// Every run is idempotent (RunIndex): it resumes from its checkpoint when
// it has one and starts otherwise, so the same command after a kill, a
// preemption or a requeue finishes the run with the same bytes as an
// uninterrupted one. That is what lets a scheduler run the points: Slurm
// job arrays (SlurmScript), Kubernetes Indexed Jobs (KubernetesJob), or
// this machine (cmd/sweep local).
package sweep

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/cifarrun"
	"github.com/proxgen/proxgen/cmd/internal/ptbrun"
)

// Program is a training program a sweep can run.
type Program struct {
	// Name is the program's name in a spec.
	Name string
	// Main runs the program with command-line arguments and returns its
	// exit status.
	Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// CheckArgs checks arguments and returns the epochs of the run.
	CheckArgs func(args []string) (int, error)
	// Columns are the keys of the summary (or of the last metrics record)
	// that Collect tabulates; X and Y those of its chart.
	Columns []string
	X, Y    string
}

// programs is the table LookupProgram reads; it is never modified.
var programs = [...]Program{
	{Name: "cifar", Main: cifarrun.Main, CheckArgs: cifarrun.CheckArgs,
		Columns: []string{"test_acc", "best_test_acc", "zero_ratio", "filters", "flops_ratio", "params_ratio", "train_seconds"},
		X:       "zero_ratio", Y: "test_acc"},
	{Name: "ptb", Main: ptbrun.Main, CheckArgs: ptbrun.CheckArgs,
		Columns: []string{"test_ppl", "best_test_ppl", "best_epoch", "zero_ratio", "binary_ratio"},
		X:       "zero_ratio", Y: "test_ppl"},
}

// LookupProgram returns the program called name.
func LookupProgram(name string) (Program, error) {
	var names []string
	for _, p := range programs {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Program{}, fmt.Errorf("unknown program %q (want one of %s)", name, strings.Join(names, ", "))
}

// Spec describes a sweep: a program and the flags of its runs. The runs
// are the points of the grids: for every entry of Grids (one empty entry
// when there is none), every combination of the values of Grid's and the
// entry's axes, with Flags, the entry's Flags and the combination's values
// as the run's flags (later ones win). Axes are taken in the order of
// their names, the last varying fastest. Flags are named without the
// leading dash; a boolean flag takes "true" or "false".
//
// Values may name environment variables, $VAR or ${VAR}, which Expand
// replaces; a grid value that is only a variable expands to the
// variable's whitespace-separated words (LAMBDAS="0.1 1" gives two
// values).
type Spec struct {
	Program string              `json:"program"`
	Flags   map[string]string   `json:"flags,omitempty"`
	Grid    map[string][]string `json:"grid,omitempty"`
	Grids   []Grid              `json:"grids,omitempty"`
}

// Grid is one part of a sweep's grid.
type Grid struct {
	// Name, when set, names the run folders of this part (relative to the
	// sweep folder) instead of runs/NNNN: {flag} stands for the value of
	// that flag without ':' and '/' ("proxgen-{reg}-{lambda}").
	Name  string              `json:"name,omitempty"`
	Flags map[string]string   `json:"flags,omitempty"`
	Grid  map[string][]string `json:"grid,omitempty"`
}

// Expand returns s with the environment variables in its values replaced
// by lookup's values (os.LookupEnv for the process's environment); an
// unset variable is an error.
func (s *Spec) Expand(lookup func(string) (string, bool)) (*Spec, error) {
	var missing []string
	expand := func(v string) string {
		return os.Expand(v, func(name string) string {
			val, ok := lookup(name)
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
	}
	flags := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range m {
			out[k] = expand(v)
		}
		return out
	}
	grid := func(m map[string][]string) map[string][]string {
		if m == nil {
			return nil
		}
		out := map[string][]string{}
		for k, vs := range m {
			out[k] = []string{}
			for _, v := range vs {
				e := expand(v)
				if strings.HasPrefix(v, "$") && os.Expand(v, func(string) string { return "" }) == "" {
					out[k] = append(out[k], strings.Fields(e)...)
				} else {
					out[k] = append(out[k], e)
				}
			}
		}
		return out
	}
	x := &Spec{Program: s.Program, Flags: flags(s.Flags), Grid: grid(s.Grid)}
	for _, g := range s.Grids {
		x.Grids = append(x.Grids, Grid{Name: g.Name, Flags: flags(g.Flags), Grid: grid(g.Grid)})
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("the spec uses unset environment variables: %s", strings.Join(slices.Compact(missing), ", "))
	}
	return x, nil
}

// reserved are the flags the sweep sets itself.
var reserved = []string{"out", "resume"}

// ParseSpec decodes a spec (JSON; unknown fields are errors).
func ParseSpec(b []byte) (*Spec, error) {
	var s Spec
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if d.More() {
		return nil, errors.New("spec: data after the JSON object")
	}
	return &s, nil
}

// ReadSpec reads the spec file at path.
func ReadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Hash returns the SHA-256 of the spec's canonical JSON (object keys
// sorted), which names the spec a sweep folder belongs to.
func (s *Spec) Hash() string {
	b, _ := json.Marshal(s)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Manifest lists the runs of a planned sweep.
type Manifest struct {
	Format  string `json:"format"`
	Program string `json:"program"`
	// Spec is the SHA-256 of the spec (Spec.Hash).
	Spec string `json:"spec_sha256"`
	Runs []Run  `json:"runs"`
}

// ManifestFormat is the Format of manifests this package writes.
const ManifestFormat = "proxgen-sweep-v1"

// Run is one point of a sweep.
type Run struct {
	Index int `json:"index"`
	// Dir is the run folder, relative to the sweep folder.
	Dir string `json:"dir"`
	// Label names the point by its grid values ("reg=l1 seed=2").
	Label string `json:"label"`
	// Flags are all flags of the run; Args the program's arguments made
	// from them (without -out, which RunIndex adds).
	Flags map[string]string `json:"flags"`
	Args  []string          `json:"args"`
	// Command is the run's command line from the sweep folder.
	Command string `json:"command"`
	// Epochs is the number of epochs the run trains.
	Epochs int `json:"epochs"`
}

// Plan expands s into its numbered runs and checks each run's flags with
// the program, refusing unknown programs, unknown or reserved flags,
// invalid values, empty grids and duplicate points.
func Plan(s *Spec) (*Manifest, error) {
	prog, err := LookupProgram(s.Program)
	if err != nil {
		return nil, err
	}
	if len(s.Grid) == 0 && len(s.Grids) == 0 {
		return nil, errors.New("the spec has an empty grid (neither grid nor grids)")
	}
	grids := s.Grids
	if len(grids) == 0 {
		grids = []Grid{{}}
	}
	m := &Manifest{Format: ManifestFormat, Program: s.Program, Spec: s.Hash()}
	seen, dirs := map[string]int{}, map[string]int{}
	for gi, g := range grids {
		axes := map[string][]string{}
		for k, v := range s.Grid {
			axes[k] = v
		}
		for k, v := range g.Grid {
			axes[k] = v
		}
		names := make([]string, 0, len(axes))
		for k, v := range axes {
			if len(v) == 0 {
				return nil, fmt.Errorf("grid %d: axis %q has no values", gi+1, k)
			}
			names = append(names, k)
		}
		sort.Strings(names)
		pos := make([]int, len(names))
		for {
			flags := map[string]string{}
			for k, v := range s.Flags {
				flags[k] = v
			}
			for k, v := range g.Flags {
				flags[k] = v
			}
			var label []string
			for i, k := range names {
				flags[k] = axes[k][pos[i]]
				label = append(label, k+"="+axes[k][pos[i]])
			}
			r, err := newRun(prog, len(m.Runs), flags, strings.Join(label, " "), g.Name)
			if err != nil {
				return nil, err
			}
			if j, ok := dirs[r.Dir]; ok {
				return nil, fmt.Errorf("runs %d and %d have the same folder %s", j, r.Index, r.Dir)
			}
			dirs[r.Dir] = r.Index
			key := strings.Join(r.Args, "\x00")
			if j, ok := seen[key]; ok {
				return nil, fmt.Errorf("runs %d and %d are the same point (%s)", j, r.Index, strings.Join(r.Args, " "))
			}
			seen[key] = r.Index
			m.Runs = append(m.Runs, r)
			// The next combination, the last axis fastest.
			i := len(pos) - 1
			for ; i >= 0; i-- {
				if pos[i]++; pos[i] < len(axes[names[i]]) {
					break
				}
				pos[i] = 0
			}
			if i < 0 {
				break
			}
		}
	}
	return m, nil
}

// newRun makes run index of prog from its flags and checks them.
func newRun(prog Program, index int, flags map[string]string, label, name string) (Run, error) {
	r := Run{Index: index, Dir: filepath.Join("runs", fmt.Sprintf("%04d", index)), Label: label, Flags: flags}
	if name != "" {
		r.Dir = filepath.Clean(regexp.MustCompile(`\{[^{}]*\}`).ReplaceAllStringFunc(name, func(p string) string {
			return strings.NewReplacer(":", "", "/", "").Replace(flags[p[1:len(p)-1]])
		}))
		if r.Dir == "." || filepath.IsAbs(r.Dir) || strings.HasPrefix(r.Dir, "..") || slices.Contains([]string{"logs", SpecFile, ManifestFile}, r.Dir) {
			return r, fmt.Errorf("run %d: name %q gives the folder %q, which is not a new folder inside the sweep folder", index, name, r.Dir)
		}
	}
	names := make([]string, 0, len(flags))
	for k := range flags {
		if k == "" || strings.HasPrefix(k, "-") {
			return r, fmt.Errorf("run %d: flag %q: name flags without the dash", index, k)
		}
		if slices.Contains(reserved, k) {
			return r, fmt.Errorf("run %d: the sweep sets -%s itself", index, k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		r.Args = append(r.Args, "-"+k+"="+flags[k])
	}
	epochs, err := prog.CheckArgs(append(slices.Clone(r.Args), "-out", r.Dir))
	if err != nil {
		return r, fmt.Errorf("run %d (%s): %w", index, label, err)
	}
	r.Epochs = epochs
	r.Command = prog.Name + " " + strings.Join(quoteAll(r.Args), " ") + " -out " + r.Dir
	return r, nil
}

// quoteAll quotes the arguments that a shell would split.
func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
