package sweep

import (
	"strings"
	"testing"
	"time"
)

func TestPlanOrderAndExpand(t *testing.T) {
	env := map[string]string{"LAMBDAS": " 0.1\t1 ", "WD": "0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := ParseSpec([]byte(`{"program": "cifar", "flags": {"epochs": "2", "wd": "${WD}"},
	  "grid": {"seed": ["1", "2"], "lambda": ["$LAMBDAS"]},
	  "grids": [{"flags": {"optimizer": "proxgen"}}, {"name": "sgd-{seed}", "flags": {"optimizer": "sgd"}, "grid": {"lambda": ["0"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	x, err := s.Expand(lookup)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Plan(x)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range m.Runs {
		got = append(got, r.Dir+" "+r.Label)
	}
	want := []string{
		"runs/0000 lambda=0.1 seed=1", "runs/0001 lambda=0.1 seed=2", "runs/0002 lambda=1 seed=1", "runs/0003 lambda=1 seed=2",
		"sgd-1 lambda=0 seed=1", "sgd-2 lambda=0 seed=2",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("runs\n%q\nwant\n%q", got, want)
	}
	if r := m.Runs[1]; r.Flags["wd"] != "0" || r.Epochs != 2 || strings.Join(r.Args, " ") != "-epochs=2 -lambda=0.1 -optimizer=proxgen -seed=2 -wd=0" {
		t.Errorf("run 1: %+v", r)
	}
	if m2, _ := Plan(x); m2.Spec != m.Spec || s.Hash() == x.Hash() {
		t.Error("the hash names the expanded spec")
	}
	if _, err := s.Expand(func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "LAMBDAS, WD") {
		t.Errorf("unset variables: %v", err)
	}
}

func TestSchedulerSettings(t *testing.T) {
	bad := []Slurm{
		{Sweep: "sweep", Dir: "/s", Runs: 2, CPUs: 1},
		{Sweep: "/bin/sweep", Dir: "/s", Runs: 0, CPUs: 1},
		{Sweep: "/bin/sweep", Dir: "/s", Runs: 2, CPUs: 1, Indexes: []int{2}},
	}
	for _, s := range bad {
		if _, err := s.Script(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	s, err := Slurm{Sweep: "/bin/my sweep", Dir: "/s", Runs: 3, CPUs: 2, Name: "x"}.Script()
	if err != nil || !strings.Contains(s, "#SBATCH --array=0-2\n") || strings.Contains(s, "#SBATCH --signal") || !strings.Contains(s, "'/bin/my sweep' run -dir /s") {
		t.Errorf("script (%v):\n%s", err, s)
	}
	k := Kubernetes{Name: "x", Image: "i", Claim: "c", MountPath: "/sweep", Sweep: "/sweep-bin", Runs: 3, Parallelism: 1, CPUs: 1, Grace: time.Minute}
	if _, err := k.Job(); err != nil {
		t.Fatal(err)
	}
	k.Grace = 0
	if _, err := k.Job(); err == nil {
		t.Error("no grace period accepted")
	}
}
