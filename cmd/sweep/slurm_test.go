package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/train"
	"github.com/proxgen/proxgen/nn/train/traintest"
)

// slurmEnv enables TestSlurmCluster; .ci/run sets it.
const slurmEnv = "PROXGEN_SLURM_TEST"

// TestSlurmCluster runs a sweep of 4 points as a job array on a one-node
// Slurm cluster started by scripts/slurm/cluster.sh (which installs
// slurm-wlm and munge with apt when missing): it requeues one running
// task with scontrol requeue, cancels another mid-run and resubmits it,
// and checks that every run's model file is byte-identical to the same
// point run uninterrupted by "sweep local", and that collect lists all
// four. It runs when PROXGEN_SLURM_TEST=1 (as in .ci/run) and skips,
// saying why, when Slurm cannot be installed or started here.
func TestSlurmCluster(t *testing.T) {
	if os.Getenv(slurmEnv) != "1" {
		t.Skipf("set %s=1 to start a one-node Slurm cluster for this test (.ci/run does)", slurmEnv)
	}
	cluster := filepath.Join(t.TempDir(), "slurm")
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "slurm", "cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "start", cluster).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("Slurm cannot run here: %s", bytes.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("cluster.sh start: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(script, "stop", cluster).Run() })
	t.Setenv("SLURM_CONF", filepath.Join(cluster, "slurm.conf"))

	// Points of a few seconds each, checkpointing every few windows.
	data := tinyPTB(t)
	spec := strings.NewReplacer(`"epochs": "3"`, `"epochs": "6"`, `"hidden": "16"`, `"hidden": "48"`, `"save-every": "7"`, `"save-every": "5"`).Replace(tinySpec(data))
	ref := planned(t, spec)
	t.Setenv("PROXGEN_TRAINTEST_CHILD", "1") // the test binary is the sweep program in the children and the tasks
	start := time.Now()
	if code, out, stderr := runSweep("local", "-dir", ref, "-j", "2"); code != 0 {
		t.Fatalf("local: exit %d\n%s%s", code, out, stderr)
	}
	t.Logf("sweep local -j 2: %v", time.Since(start))

	dir := planned(t, spec)
	submit := func(extra ...string) string {
		t.Helper()
		code, out, stderr := runSweep(append([]string{"slurm", "-dir", dir, "-cpus", "1", "-sweep", os.Args[0], "-submit"}, extra...)...)
		m := regexp.MustCompile(`submitted job (\d+)`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("slurm -submit: exit %d\n%s%s", code, out, stderr)
		}
		return m[1]
	}
	job := submit()
	// running returns the array tasks of job in state RUNNING whose run
	// folder holds a checkpoint (the run is past its start).
	running := func() []string {
		b, _ := exec.Command("squeue", "-h", "-j", job, "-t", "R", "-o", "%i").Output()
		var ids []string
		for _, id := range strings.Fields(string(b)) {
			_, task, _ := strings.Cut(id, "_")
			if _, err := os.Stat(filepath.Join(dir, "runs", fmt.Sprintf("%04s", task), train.CheckpointName)); err == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	var requeued, cancelled string
	deadline := time.Now().Add(3 * time.Minute)
	for (requeued == "" || cancelled == "") && time.Now().Before(deadline) {
		for _, id := range running() {
			switch {
			case requeued == "":
				if b, err := exec.Command("scontrol", "requeue", id).CombinedOutput(); err != nil {
					t.Fatalf("scontrol requeue %s: %v %s", id, err, b)
				}
				requeued = id
				// Slurm holds a requeued task back for two minutes; once
				// it is pending again, the test lets it start at once.
				go func(id string) {
					for range 100 {
						time.Sleep(100 * time.Millisecond)
						b, _ := exec.Command("squeue", "-h", "-j", id, "-t", "PD", "-o", "%r").Output()
						if strings.TrimSpace(string(b)) == "BeginTime" {
							exec.Command("scontrol", "update", "JobId="+id, "StartTime=now").Run()
							return
						}
					}
				}(id)
			case cancelled == "" && id != requeued:
				if b, err := exec.Command("scancel", id).CombinedOutput(); err != nil {
					t.Fatalf("scancel %s: %v %s", id, err, b)
				}
				cancelled = id
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if requeued == "" || cancelled == "" {
		t.Fatalf("no running tasks to requeue (%q) and cancel (%q) within 3 minutes", requeued, cancelled)
	}
	t.Logf("requeued %s, cancelled %s", requeued, cancelled)
	waitGone := func(job string) {
		t.Helper()
		for time.Now().Before(deadline) {
			b, err := exec.Command("squeue", "-h", "-j", job, "-o", "%i %T").Output()
			if err != nil || len(bytes.TrimSpace(b)) == 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("job %s still queued after the deadline", job)
	}
	// The cancelled task is gone from the queue, then resubmitted alone.
	for time.Now().Before(deadline) {
		b, _ := exec.Command("squeue", "-h", "-j", cancelled, "-o", "%i").Output()
		if len(bytes.TrimSpace(b)) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, task, _ := strings.Cut(cancelled, "_")
	again := submit("-runs", task)
	waitGone(job)
	waitGone(again)
	t.Logf("the job array and the resubmission finished after %v", time.Since(start))

	for i := range 4 {
		run := fmt.Sprintf("%04d", i)
		traintest.SameBytes(t, filepath.Join(ref, "runs", run, checkpoint.ModelFileName), filepath.Join(dir, "runs", run, checkpoint.ModelFileName))
	}
	code, table, _ := runSweep("collect", "-dir", dir)
	if code != 0 || !strings.Contains(table, "4 of 4 runs finished") {
		t.Errorf("collect: exit %d\n%s", code, table)
	}
	_, status, _ := runSweep("status", "-dir", dir)
	t.Logf("status:\n%s\ncollect:\n%s", status, table)
}
