package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/internal/jsonschema"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestKubernetesGolden compares the Indexed Job of a planned sweep with
// testdata/job.json.
func TestKubernetesGolden(t *testing.T) {
	dir := planned(t, tinySpec("/sweep/data/ptb"))
	code, out, stderr := runSweep("k8s", "-dir", dir, "-image", "registry.example/proxgen-sweep:1", "-claim", "sweeps", "-name", "sweep-ptb", "-o", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden := filepath.Join("testdata", "job.json")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("the Job differs from %s (go test -update rewrites it):\n%s", golden, out)
	}
}

// TestKubernetesStructure checks what makes the Job work: an Indexed Job
// with one completion per point, the index wired into the command, the
// sweep folder's volume mounted where the command looks, a failure
// policy that retries preempted pods, and a grace period long enough for
// a checkpoint.
func TestKubernetesStructure(t *testing.T) {
	dir := planned(t, tinySpec("/sweep/data/ptb"))
	code, out, stderr := runSweep("k8s", "-dir", dir, "-image", "img", "-claim", "pvc", "-mount", "/data/sweep", "-grace", "90s", "-cpus", "3", "-parallelism", "2", "-o", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var job struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			CompletionMode           string
			Completions, Parallelism int
			BackoffLimit             *int
			BackoffLimitPerIndex     *int
			PodFailurePolicy         struct {
				Rules []struct {
					Action          string
					OnPodConditions []struct{ Type, Status string }
					OnExitCodes     *struct {
						ContainerName, Operator string
						Values                  []int
					}
				}
			}
			Template struct {
				Spec struct {
					RestartPolicy                 string
					TerminationGracePeriodSeconds int
					Containers                    []struct {
						Name, Image string
						Command     []string
						Env         []struct {
							Name      string
							ValueFrom struct{ FieldRef struct{ FieldPath string } }
						}
						VolumeMounts []struct{ Name, MountPath string }
						Resources    struct{ Requests, Limits map[string]string }
					}
					Volumes []struct {
						Name                  string
						PersistentVolumeClaim struct{ ClaimName string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if job.APIVersion != "batch/v1" || job.Kind != "Job" || job.Metadata.Name != "sweep-sweep" || s.CompletionMode != "Indexed" || s.Completions != 4 || s.Parallelism != 2 || s.BackoffLimit != nil || s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex != 3 {
		t.Fatalf("job %+v", job)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != "Never" || len(ps.Containers) != 1 || len(ps.Volumes) != 1 {
		t.Fatalf("pod spec %+v", ps)
	}
	// -grace sets the period a pod has to save its checkpoint.
	if ps.TerminationGracePeriodSeconds != 90 {
		t.Errorf("grace %d s", ps.TerminationGracePeriodSeconds)
	}
	c := ps.Containers[0]
	cmd := strings.Join(c.Command, " ")
	if len(c.Env) != 1 || c.Env[0].Name != "SWEEP_INDEX" || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("the index is not wired into the container: env %+v", c.Env)
	}
	if !strings.HasSuffix(cmd, " run -dir /data/sweep -threads 3 $(SWEEP_INDEX)") || c.Image != "img" || c.Resources.Requests["cpu"] != "3" || c.Resources.Limits["cpu"] != "3" {
		t.Errorf("container %+v", c)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data/sweep" || c.VolumeMounts[0].Name != ps.Volumes[0].Name || ps.Volumes[0].PersistentVolumeClaim.ClaimName != "pvc" {
		t.Errorf("volume %+v, mounts %+v", ps.Volumes, c.VolumeMounts)
	}
	var disruption, saved, badFlags bool
	for _, r := range s.PodFailurePolicy.Rules {
		for _, pc := range r.OnPodConditions {
			disruption = disruption || (pc.Type == "DisruptionTarget" && pc.Status == "True" && r.Action == "Ignore")
		}
		if e := r.OnExitCodes; e != nil && e.ContainerName == c.Name && e.Operator == "In" {
			saved = saved || (r.Action == "Ignore" && len(e.Values) == 1 && e.Values[0] == 130)
			badFlags = badFlags || (r.Action == "FailJob" && len(e.Values) == 1 && e.Values[0] == 2)
		}
	}
	if !disruption || !saved || !badFlags {
		t.Errorf("pod failure policy %+v", s.PodFailurePolicy)
	}
	if code, _, _ := runSweep("k8s", "-dir", dir, "-claim", "pvc", "-o", "-"); code != 2 {
		t.Errorf("no -image: exit %d, want 2", code)
	}
}

// TestSlurmScript checks the job-array script: one task per point with a
// throttle, requeue, the early signal, and the run of the task's index.
func TestSlurmScript(t *testing.T) {
	dir := planned(t, tinySpec("/data/ptb"))
	code, _, stderr := runSweep("slurm", "-dir", dir, "-cpus", "3", "-throttle", "2", "-time", "1:00:00", "-partition", "cpu", "-signal-before", "2m", "-sweep", "/opt/bin/sweep")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{"#!/bin/bash\n", "#SBATCH --array=0-3%2\n", "#SBATCH --requeue\n", "#SBATCH --cpus-per-task=3\n", "#SBATCH --time=1:00:00\n",
		"#SBATCH --partition=cpu\n", "#SBATCH --signal=B:USR1@120\n", `/opt/bin/sweep run -dir ` + abs + ` -threads "$SLURM_CPUS_PER_TASK" "$SLURM_ARRAY_TASK_ID" &`,
		`scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("script lacks %q:\n%s", want, b)
		}
	}
	if code, _, _ := runSweep("slurm", "-dir", dir, "-runs", "1,3", "-sweep", "/opt/bin/sweep"); code != 0 {
		t.Fatal("-runs")
	}
	// A resubmission of some points gets its own script; sweep.sbatch
	// stays the whole array (issue 35: -runs overwrote it).
	if b, _ := os.ReadFile(filepath.Join(dir, "sweep-runs-1,3.sbatch")); !strings.Contains(string(b), "#SBATCH --array=1,3\n") {
		t.Errorf("-runs 1,3:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sweep.sbatch")); !strings.Contains(string(b), "#SBATCH --array=0-3%2\n") {
		t.Errorf("sweep.sbatch after -runs 1,3:\n%s", b)
	}
	if code, _, _ := runSweep("slurm", "-dir", dir, "-runs", "7"); code != 2 {
		t.Errorf("-runs 7 of 4: exit %d, want 2", code)
	}
	if code, _, stderr := runSweep("slurm", "-dir", dir, "-runs", "1,1"); code != 2 || !strings.Contains(stderr, "run 1 is given twice") {
		t.Errorf("-runs 1,1: exit %d (%s), want 2", code, stderr)
	}
}

// TestKubernetesJobSchema validates the Jobs that sweep k8s writes
// strictly against the batch/v1 Job schema (testdata/batch-v1-job.schema.json,
// from Kubernetes' own OpenAPI document) and checks the name rules the
// API server applies: the default names of awkward folder names are valid
// DNS-1123 labels of at most 63 characters, and an invalid -name is
// refused. Before issue 35 the Job lacked onPodConditions' required
// status and named itself sweep-gl21_small.
func TestKubernetesJobSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "batch-v1-job.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defs, err := jsonschema.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, folder := range []string{"sweep", "gl21_small", "My Sweep.v2", strings.Repeat("long_name", 10), "__"} {
		dir := filepath.Join(t.TempDir(), folder)
		spec := writeFile(t, t.TempDir(), "spec.json", tinySpec("/data/ptb"))
		if code, _, stderr := runSweep("plan", "-spec", spec, "-dir", dir); code != 0 {
			t.Fatalf("plan: %s", stderr)
		}
		code, out, stderr := runSweep("k8s", "-dir", dir, "-image", "img", "-claim", "pvc", "-o", "-")
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", folder, code, stderr)
		}
		if err := defs.Validate("io.k8s.api.batch.v1.Job", []byte(out)); err != nil {
			t.Errorf("%q: %v", folder, err)
		}
		var job struct{ Metadata struct{ Name string } }
		json.Unmarshal([]byte(out), &job)
		if n := job.Metadata.Name; len(n) > 63 || !label.MatchString(n) {
			t.Errorf("folder %q: Job name %q is not a DNS-1123 label of at most 63 characters", folder, n)
		}
	}
	dir := planned(t, tinySpec("/data/ptb"))
	for _, name := range []string{"Sweep", "sweep_1", "-sweep", strings.Repeat("a", 64)} {
		if code, _, _ := runSweep("k8s", "-dir", dir, "-image", "img", "-claim", "pvc", "-name", name, "-o", "-"); code != 2 {
			t.Errorf("-name %q: exit %d, want 2", name, code)
		}
	}
}
