package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/cmd/internal/sweep"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/train/traintest"
)

func TestMain(m *testing.M) {
	traintest.MainIfChild(main)
	os.Exit(m.Run())
}

// tinyPTB writes a PTB-style folder (ptb.valid.txt, ptb.test.txt) of a
// small learnable language.
func tinyPTB(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	text := func(seed uint64, lines int) string {
		rng := rand.New(rand.NewPCG(seed, 7))
		subj, verb, obj := []string{"the cat", "a dog", "the bird"}, []string{"sees", "likes", "chases"}, []string{"the mouse", "a ball", "the tree"}
		var b strings.Builder
		for range lines {
			fmt.Fprintf(&b, "%s %s %s \n", subj[rng.IntN(3)], verb[rng.IntN(3)], obj[rng.IntN(3)])
		}
		return b.String()
	}
	for name, s := range map[string]string{"ptb.valid.txt": text(1, 300), "ptb.test.txt": text(2, 60)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinySpec returns a spec of 4 ptb points of a fraction of a second each,
// checkpointing inside epochs, with a -progress setting that a resumed point
// must keep (issue 35: the summary of a resumed point had the default).
func tinySpec(data string) string {
	return fmt.Sprintf(`{"program": "ptb",
 "flags": {"data": %q, "epochs": "3", "emb": "12", "hidden": "16", "batch": "4", "bptt": "8",
   "eval-batch": "2", "lr": "0.01", "log-every": "0", "save-every": "7", "optimizer": "proxgen", "progress": "none"},
 "grid": {"reg": ["bin-l1", "l1"], "lambda": ["0.001", "0.01"]}}`, data)
}

func writeFile(t testing.TB, dir, name, s string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runSweep(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// planned plans spec in a new sweep folder.
func planned(t testing.TB, spec string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sweep")
	if code, _, stderr := runSweep("plan", "-spec", writeFile(t, t.TempDir(), "spec.json", spec), "-dir", dir); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	return dir
}

func TestPlan(t *testing.T) {
	data := tinyPTB(t)
	dir := planned(t, tinySpec(data))
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range m.Runs {
		labels = append(labels, r.Label)
	}
	if want := "lambda=0.001 reg=bin-l1,lambda=0.001 reg=l1,lambda=0.01 reg=bin-l1,lambda=0.01 reg=l1"; strings.Join(labels, ",") != want {
		t.Errorf("points %q, want %q", labels, want)
	}
	if r := m.Runs[3]; r.Epochs != 3 || r.Dir != filepath.Join("runs", "0003") || !strings.Contains(r.Command, "-reg=l1") || !strings.HasSuffix(r.Command, "-out runs/0003") {
		t.Errorf("run 3: %+v", r)
	}
	// The same spec planned again: the same bytes; in the same folder: fine.
	a, _ := os.ReadFile(filepath.Join(dir, sweep.ManifestFile))
	b, _ := os.ReadFile(filepath.Join(planned(t, tinySpec(data)), sweep.ManifestFile))
	if !bytes.Equal(a, b) {
		t.Error("two plans of one spec differ")
	}
	if code, _, stderr := runSweep("plan", "-spec", writeFile(t, t.TempDir(), "s.json", tinySpec(data)), "-dir", dir); code != 0 {
		t.Errorf("re-planning the same spec: exit %d: %s", code, stderr)
	}
}

func TestPlanErrors(t *testing.T) {
	data := tinyPTB(t)
	good := tinySpec(data)
	for _, tc := range []struct{ name, spec, want string }{
		{"program", `{"program": "mnist", "grid": {"seed": ["1"]}}`, `unknown program "mnist"`},
		{"unknown flag", strings.Replace(good, `"emb"`, `"embedding"`, 1), "flag provided but not defined: -embedding"},
		{"bad value", strings.Replace(good, `"0.01"]`, `"-1"]`, 1), "-lambda = -1"},
		{"bad reg", strings.Replace(good, `"bin-l1"`, `"l3"`, 1), `unknown regularizer "l3"`},
		{"empty grid", `{"program": "ptb", "flags": {"data": "x"}}`, "empty grid"},
		{"empty axis", strings.Replace(good, `["bin-l1", "l1"]`, `[]`, 1), `axis "reg" has no values`},
		{"duplicate", strings.Replace(good, `["0.001", "0.01"]`, `["0.01", "0.01"]`, 1), "are the same point"},
		{"reserved", strings.Replace(good, `"epochs"`, `"out": "x", "epochs"`, 1), "the sweep sets -out itself"},
		{"typo", strings.Replace(good, `"grid"`, `"gird"`, 1), `unknown field "gird"`},
		{"cifar flag", `{"program": "cifar", "grid": {"optimizer": ["proxgen", "sgdx"]}}`, `-optimizer "sgdx"`},
	} {
		dir := filepath.Join(t.TempDir(), "s")
		code, _, stderr := runSweep("plan", "-spec", writeFile(t, t.TempDir(), "spec.json", tc.spec), "-dir", dir)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, code, stderr, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s: the refused plan wrote %s", tc.name, dir)
		}
	}
	dir := planned(t, good)
	other := strings.Replace(good, `"epochs": "3"`, `"epochs": "4"`, 1)
	if code, _, stderr := runSweep("plan", "-spec", writeFile(t, t.TempDir(), "spec.json", other), "-dir", dir); code != 2 || !strings.Contains(stderr, "belongs to another spec") {
		t.Errorf("another spec in the folder: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{{"run", "-dir", dir, "9"}, {"run", "-dir", dir, "x"}, {"status", "-dir", t.TempDir()}, {"frobnicate"}, {"local", "-dir", dir, "-j", "0"}} {
		if code, _, _ := runSweep(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestRunIdempotent kills "sweep run" at many moments of a point's run,
// before and after its first checkpoint, and runs the same command again:
// every point must end with the bytes of an uninterrupted run. The
// uninterrupted reference runs through "sweep local -j 2".
func TestRunIdempotent(t *testing.T) {
	data := tinyPTB(t)
	ref := planned(t, tinySpec(data))
	t.Setenv("PROXGEN_TRAINTEST_CHILD", "1") // the children of local are this test binary as the program
	code, out, stderr := runSweep("local", "-dir", ref, "-j", "2")
	os.Unsetenv("PROXGEN_TRAINTEST_CHILD")
	if code != 0 {
		t.Fatalf("local: exit %d\n%s%s", code, out, stderr)
	}
	for _, crash := range []int{1, 2, 3, 5, 8, 13, 21} {
		dir := planned(t, tinySpec(data))
		r := traintest.Run(t, fmt.Sprintf("crash:%d", crash), "run", "-dir", dir, "2")
		if r.Code == 0 {
			t.Logf("crash:%d: the run ended first", crash)
		}
		for attempt := 0; ; attempt++ {
			r = traintest.Run(t, "", "run", "-dir", dir, "2")
			if r.Code == 0 {
				break
			}
			if attempt == 2 {
				t.Fatalf("crash:%d: the rerun exits %d\n%s", crash, r.Code, r.Stderr)
			}
		}
		for _, f := range []string{checkpoint.ModelFileName, sweep.SummaryFile} {
			traintest.SameBytes(t, filepath.Join(ref, "runs", "0002", f), filepath.Join(dir, "runs", "0002", f))
		}
	}

	// status and collect see every run.
	code, out, _ = runSweep("status", "-dir", ref)
	if code != 0 || strings.Count(out, " done ") != 4 || !strings.Contains(out, "4 runs: 4 done") || !strings.Contains(out, "test_ppl") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	code, out, _ = runSweep("collect", "-dir", ref)
	if code != 0 || strings.Count(out, "| proxgen") != 0 || strings.Count(out, "\n| ") != 5 || !strings.Contains(out, "4 of 4 runs finished") {
		t.Errorf("collect: exit %d\n%s", code, out)
	}
	for _, f := range []string{"collect.csv", "collect.md", "collect.svg"} {
		if b, err := os.ReadFile(filepath.Join(ref, f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestStatusStates checks pending, partial and failed runs.
func TestStatusStates(t *testing.T) {
	dir := planned(t, tinySpec(tinyPTB(t)))
	traintest.Run(t, "crash:40", "run", "-dir", dir, "1")
	if r := traintest.Run(t, "full:1", "run", "-dir", dir, "3"); r.Code != 1 {
		t.Fatalf("full disk: exit %d", r.Code)
	}
	_, out, _ := runSweep("status", "-dir", dir)
	lines := strings.Split(out, "\n")
	for i, want := range []string{"pending", "partial", "pending", "failed (exit 1)"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("run %d: %q, want %s", i, lines[i+1], want)
		}
	}
	var st []sweep.Status
	m, _ := sweep.ReadManifest(dir)
	st = sweep.ReadStatus(dir, m)
	if b, _ := json.Marshal(st[1]); st[1].Epoch == 0 && st[1].Step == 0 {
		t.Errorf("partial run without progress: %s", b)
	}
}

// TestSpecNamesAndVariables checks run-folder names and environment
// variables in a spec.
func TestSpecNamesAndVariables(t *testing.T) {
	data := tinyPTB(t)
	t.Setenv("SWEEP_DATA", data)
	t.Setenv("SWEEP_LAMBDAS", "0.001  0.01")
	spec := `{"program": "ptb", "flags": {"data": "${SWEEP_DATA}", "epochs": "1", "emb": "12", "hidden": "16", "batch": "4",
  "bptt": "8", "eval-batch": "2", "log-every": "0"},
 "grids": [{"name": "proxgen-{reg}-{lambda}", "flags": {"optimizer": "proxgen"}, "grid": {"reg": ["l1/2", "bin-l1"], "lambda": ["$SWEEP_LAMBDAS"]}},
           {"name": "adam", "flags": {"optimizer": "adam"}}]}`
	dir := planned(t, spec)
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, r := range m.Runs {
		dirs = append(dirs, r.Dir)
		if r.Flags["data"] != data {
			t.Errorf("run %d: data %q", r.Index, r.Flags["data"])
		}
	}
	if want := "proxgen-l12-0.001 proxgen-bin-l1-0.001 proxgen-l12-0.01 proxgen-bin-l1-0.01 adam"; strings.Join(dirs, " ") != want {
		t.Errorf("folders %q, want %q", dirs, want)
	}
	for _, tc := range []struct{ spec, want string }{
		{strings.Replace(spec, "${SWEEP_DATA}", "${SWEEP_UNSET}", 1), "unset environment variables: SWEEP_UNSET"},
		{strings.Replace(spec, `"name": "adam"`, `"name": "proxgen-l12-0.01"`, 1), "have the same folder"},
		{strings.Replace(spec, `"name": "adam"`, `"name": "../x"`, 1), "not a new folder inside"},
	} {
		code, _, stderr := runSweep("plan", "-spec", writeFile(t, t.TempDir(), "spec.json", tc.spec), "-dir", filepath.Join(t.TempDir(), "s"))
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("exit %d, %q; want 2 and %q", code, stderr, tc.want)
		}
	}
}
