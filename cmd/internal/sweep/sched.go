package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Slurm holds the settings of a Slurm job array.
type Slurm struct {
	// Sweep is the absolute path of the cmd/sweep binary on the nodes; Dir
	// the absolute path of the sweep folder there.
	Sweep, Dir string
	// Name is the job name.
	Name string
	// Runs is the number of points; Indexes, when not empty, limits the
	// array to these points (resubmitting some).
	Runs    int
	Indexes []int
	// Throttle (the % of --array) caps the tasks running at once; 0: no cap.
	Throttle int
	// CPUs per task; Time the time limit (Slurm syntax, empty: the
	// partition's); Partition (empty: the default one).
	CPUs      int
	Time      string
	Partition string
	// SignalBefore is how long before the time limit Slurm signals the
	// task (SIGUSR1), so that the run saves a checkpoint and the task is
	// requeued; 0: no signal.
	SignalBefore time.Duration
}

// Script returns the sbatch script of the array: one task per point, each
// running "sweep run" on its index, requeued on preemption and, after a
// SIGUSR1 ahead of the time limit, by itself.
func (s Slurm) Script() (string, error) {
	if !filepath.IsAbs(s.Sweep) || !filepath.IsAbs(s.Dir) {
		return "", errors.New("slurm: the sweep binary and folder must be absolute paths")
	}
	if s.Runs < 1 || s.CPUs < 1 || s.Throttle < 0 {
		return "", fmt.Errorf("slurm: %d runs, %d cpus per task, throttle %d", s.Runs, s.CPUs, s.Throttle)
	}
	array := fmt.Sprintf("0-%d", s.Runs-1)
	if len(s.Indexes) > 0 {
		var ix []string
		for _, i := range s.Indexes {
			if i < 0 || i >= s.Runs {
				return "", fmt.Errorf("slurm: run %d: the sweep has runs 0 to %d", i, s.Runs-1)
			}
			ix = append(ix, strconv.Itoa(i))
		}
		array = strings.Join(ix, ",")
	}
	if s.Throttle > 0 {
		array += "%" + strconv.Itoa(s.Throttle)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# Written by cmd/sweep slurm: one array task per point of the sweep in\n# %s; every task runs (or resumes) its point.\n", s.Dir)
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n#SBATCH --array=%s\n#SBATCH --requeue\n", s.Name, array)
	fmt.Fprintf(&b, "#SBATCH --cpus-per-task=%d\n#SBATCH --ntasks=1\n", s.CPUs)
	if sec := int(s.SignalBefore.Seconds()); sec > 0 {
		fmt.Fprintf(&b, "#SBATCH --signal=B:USR1@%d\n", sec)
	}
	if s.Time != "" {
		fmt.Fprintf(&b, "#SBATCH --time=%s\n", s.Time)
	}
	if s.Partition != "" {
		fmt.Fprintf(&b, "#SBATCH --partition=%s\n", s.Partition)
	}
	fmt.Fprintf(&b, "#SBATCH --output=%s\n#SBATCH --open-mode=append\n", filepath.Join(s.Dir, "logs", "slurm-%A_%a.log"))
	fmt.Fprintf(&b, `
# SIGUSR1 ahead of the time limit (--signal above): the run saves a
# checkpoint and exits 130, and the task requeues itself; the requeued task
# resumes from the checkpoint. SIGTERM (scancel, preemption, scontrol
# requeue) also makes the run save and exit; Slurm requeues preempted
# tasks itself (--requeue).
%s run -dir %s -threads "$SLURM_CPUS_PER_TASK" "$SLURM_ARRAY_TASK_ID" &
pid=$!
requeue=
trap 'requeue=1; kill -TERM $pid' USR1
trap 'kill -TERM $pid' TERM
wait $pid
code=$?
# A trap interrupts wait (status 128 + signal): wait for the run's end.
while { [ $code = 138 ] || [ $code = 143 ]; } && kill -0 $pid 2>/dev/null; do
	wait $pid
	code=$?
done
if [ $code = 138 ] || [ $code = 143 ]; then
	wait $pid
	code=$?
fi
if [ -n "$requeue" ] && [ $code = 130 ]; then
	scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
fi
exit $code
`, shellQuote(s.Sweep), shellQuote(s.Dir))
	return b.String(), nil
}

func shellQuote(s string) string { return quoteAll([]string{s})[0] }

// Submit submits the script at path with sbatch and returns the job id.
func Submit(ctx context.Context, path string) (string, error) {
	out, err := exec.CommandContext(ctx, "sbatch", "--parsable", path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sbatch %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id, nil
}

// Kubernetes holds the settings of an Indexed Job.
type Kubernetes struct {
	Name, Image string
	// Claim is the PersistentVolumeClaim holding the sweep folder, mounted
	// at MountPath (the sweep folder's path in the pods).
	Claim, MountPath string
	// Sweep is the path of the sweep binary in the image.
	Sweep string
	Runs  int
	// Parallelism caps the pods running at once; BackoffLimit the
	// failures of one point (not counting preemptions) before that point
	// fails (backoffLimitPerIndex: the other points go on).
	Parallelism, BackoffLimit int
	// CPUs and Memory (Kubernetes quantity, "4Gi") per pod.
	CPUs   int
	Memory string
	// Grace is the termination grace period: the time a pod has between
	// SIGTERM and SIGKILL to save its checkpoint.
	Grace time.Duration
}

// Job returns the batch/v1 Indexed Job as indented JSON: one completion
// per point, each pod running "sweep run" on its completion index, with a
// pod failure policy that retries preempted or evicted pods without
// counting them and fails the Job on bad flags (exit 2).
func (k Kubernetes) Job() ([]byte, error) {
	if k.Runs < 1 || k.Parallelism < 1 || k.CPUs < 1 || k.Grace < time.Second || k.Image == "" || k.Claim == "" || k.BackoffLimit < 0 {
		return nil, fmt.Errorf("k8s: %d runs, parallelism %d, %d cpus, grace %v, image %q, claim %q and backoff limit %d: all must be set", k.Runs, k.Parallelism, k.CPUs, k.Grace, k.Image, k.Claim, k.BackoffLimit)
	}
	if err := CheckJobName(k.Name); err != nil {
		return nil, err
	}
	type obj = map[string]any
	resources := obj{"cpu": strconv.Itoa(k.CPUs)}
	if k.Memory != "" {
		resources["memory"] = k.Memory
	}
	container := obj{
		"name":    "sweep",
		"image":   k.Image,
		"command": []string{k.Sweep, "run", "-dir", k.MountPath, "-threads", strconv.Itoa(k.CPUs), "$(SWEEP_INDEX)"},
		// The completion index (also in JOB_COMPLETION_INDEX), defined in
		// the container's env so that $(SWEEP_INDEX) above is expanded.
		"env": []obj{{"name": "SWEEP_INDEX", "valueFrom": obj{"fieldRef": obj{
			"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}},
		"resources": obj{
			"requests": resources,
			"limits":   resources,
		},
		"volumeMounts": []obj{{"name": "sweep", "mountPath": k.MountPath}},
	}
	job := obj{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata":   obj{"name": k.Name, "labels": obj{"app.kubernetes.io/name": "proxgen-sweep"}},
		"spec": obj{
			"completionMode": "Indexed",
			"completions":    k.Runs,
			"parallelism":    k.Parallelism,
			// Failures count per point: a point that keeps failing fails
			// alone, the others go on.
			"backoffLimitPerIndex": k.BackoffLimit,
			"podFailurePolicy": obj{"rules": []obj{
				// Preemption, eviction, node drain: retry, not counted.
				{"action": "Ignore", "onPodConditions": []obj{{"type": "DisruptionTarget", "status": "True"}}},
				// Saved after SIGTERM: retry from the checkpoint.
				{"action": "Ignore", "onExitCodes": obj{"containerName": "sweep", "operator": "In", "values": []int{130}}},
				// Bad flags will not get better.
				{"action": "FailJob", "onExitCodes": obj{"containerName": "sweep", "operator": "In", "values": []int{2}}},
			}},
			"template": obj{
				"metadata": obj{"labels": obj{"app.kubernetes.io/name": "proxgen-sweep"}},
				"spec": obj{
					"restartPolicy": "Never",
					// The image runs as distroless's non-root user; the
					// volume's files get its group.
					"securityContext":               obj{"runAsNonRoot": true, "runAsUser": 65532, "fsGroup": 65532},
					"terminationGracePeriodSeconds": int(k.Grace.Seconds()),
					"containers":                    []obj{container},
					"volumes":                       []obj{{"name": "sweep", "persistentVolumeClaim": obj{"claimName": k.Claim}}},
				},
			},
		},
	}
	b, err := json.MarshalIndent(job, "", "  ")
	return append(b, '\n'), err
}

// maxJobName is the longest Job name: the Job controller puts it in the
// pods' job-name label, whose values are at most 63 characters.
const maxJobName = 63

// CheckJobName returns an error unless name is a valid Job name: a
// DNS-1123 label (lower-case letters, digits and '-', starting and ending
// with a letter or digit) of at most 63 characters.
func CheckJobName(name string) error {
	ok := name != "" && len(name) <= maxJobName && name[0] != '-' && name[len(name)-1] != '-'
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	if !ok {
		return fmt.Errorf("k8s: Job name %q: want at most %d lower-case letters, digits and '-', starting and ending with a letter or digit", name, maxJobName)
	}
	return nil
}

// JobName makes a valid Job name (CheckJobName) of "sweep-" and the
// sweep folder's name: lower case, every run of other characters ('_',
// spaces, dots) one '-', cut to 63 characters.
func JobName(folder string) string {
	var b strings.Builder
	b.WriteString("sweep-")
	dash := true
	for _, c := range strings.ToLower(folder) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := b.String()
	if len(name) > maxJobName {
		name = name[:maxJobName]
	}
	return strings.TrimRight(name, "-")
}

// Local runs the given points of the sweep folder dir on this machine,
// jobs at a time, each as a child process exe run -dir DIR -threads
// threads INDEX with its output appended to logs/NNNN.log. Cancelling ctx
// sends the children SIGTERM (they save and exit 130). It calls done after
// each run and returns an error naming the runs that failed.
func Local(ctx context.Context, exe, dir string, indexes []int, jobs, threads int, env []string, done func(i, code int, d time.Duration)) error {
	var mu sync.Mutex
	var failed []string
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				start := time.Now()
				code, err := runChild(ctx, exe, dir, i, threads, env)
				mu.Lock()
				if err != nil || code != 0 {
					failed = append(failed, fmt.Sprintf("%d (exit %d%s)", i, code, errText(err)))
				}
				if done != nil {
					done(i, code, time.Since(start))
				}
				mu.Unlock()
			}
		}()
	}
	for _, i := range indexes {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if len(failed) > 0 {
		return fmt.Errorf("runs failed: %s; see %s", strings.Join(failed, ", "), filepath.Join(dir, "logs"))
	}
	return ctx.Err()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func runChild(ctx context.Context, exe, dir string, i, threads int, env []string) (int, error) {
	log, err := os.OpenFile(LogFile(dir, i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return -1, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, exe, "run", "-dir", dir, "-threads", strconv.Itoa(threads), strconv.Itoa(i))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Minute
	wait, err := startChild(cmd)
	if err == nil {
		err = wait()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
