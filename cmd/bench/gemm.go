package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// gemmResult is what bench gemm reports; with -json it is printed as one
// JSON object.
type gemmResult struct {
	Op      string `json:"op"`
	M       int    `json:"m"`
	N       int    `json:"n"`
	K       int    `json:"k"`
	TransA  bool   `json:"transa"`
	TransB  bool   `json:"transb"`
	Threads int    `json:"threads"`
	Kernel  string `json:"kernel"`
	// KernelChoice says how the kernel was chosen (blas.Engine.KernelChoice).
	KernelChoice string `json:"kernel_choice"`
	Reps         int    `json:"reps"`
	// Stat says which repetition Seconds and GFLOPS describe: "best".
	Stat          string  `json:"stat"`
	Seconds       float64 `json:"seconds"`
	GFLOPS        float64 `json:"gflops"`
	MedianSeconds float64 `json:"median_seconds"`
	MedianGFLOPS  float64 `json:"median_gflops"`
	// CPUSeconds is the least process CPU time (all threads) of a
	// repetition and CPUGFLOPS the rate per CPU second it gives. On a
	// shared machine they vary much less than the wall time; with several
	// threads they measure the work done, not the speed-up. Zero where
	// CPU time cannot be read.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUGFLOPS  float64 `json:"cpu_gflops"`
}

// runGemm runs the gemm subcommand with the given arguments (without the
// subcommand name), printing the result to stdout and usage to stderr.
func runGemm(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench gemm", "bench gemm [flags]", "times C = op(A)·op(B) for random row-major float32 matrices: the best and the median wall time of -reps repetitions, and the least process CPU time of one, which a busy machine disturbs less", stderr)
	m := fs.Int("m", 1024, "rows of op(A) and C")
	n := fs.Int("n", 1024, "columns of op(B) and C")
	k := fs.Int("k", 1024, "columns of op(A), rows of op(B)")
	transA := fs.Bool("transa", false, "store A transposed (k×m)")
	transB := fs.Bool("transb", false, "store B transposed (n×k)")
	threads := fs.Int("threads", 1, "worker goroutines (internal/parallel)")
	kernel := fs.String("kernel", "", "micro-kernel: "+strings.Join(blas.Kernels(), ", ")+" on this machine (default: the fastest, or $PROXGEN_GEMM)")
	reps := fs.Int("reps", 10, "timed repetitions")
	warmup := fs.Int("warmup", 2, "untimed repetitions before timing (at least)")
	warmupTime := fs.Duration("warmup-time", 200*time.Millisecond, "keep warming up until this much time has passed, so the CPU clock settles")
	asJSON := fs.Bool("json", false, "print the result as a JSON object on the last line")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case *m < 1 || *n < 1 || *k < 1:
		return cli.Usagef("-m, -n and -k must be positive, got m=%d n=%d k=%d", *m, *n, *k)
	case *threads < 1:
		return cli.Usagef("-threads must be at least 1, got %d", *threads)
	case *reps < 1:
		return cli.Usagef("-reps must be at least 1, got %d", *reps)
	case *warmup < 0 || *warmupTime < 0:
		return cli.Usagef("-warmup and -warmup-time must not be negative, got %d and %v", *warmup, *warmupTime)
	case float64(*m)*float64(*k)+float64(*k)*float64(*n)+float64(*m)*float64(*n) > 1<<31:
		return cli.Usagef("matrices of m=%d n=%d k=%d need more than 8 GiB", *m, *n, *k)
	}
	eng := blas.Default()
	if *kernel != "" {
		var err error
		if eng, err = blas.NewEngine(*kernel); err != nil {
			return &cli.UsageError{Err: err}
		}
	}
	defer parallel.SetWorkers(parallel.SetWorkers(*threads))

	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.Float64()*2 - 1)
		}
		return s
	}
	a, b, c := fill(*m**k), fill(*k**n), make([]float32, *m**n)
	lda, ldb := *k, *n
	if *transA {
		lda = *m
	}
	if *transB {
		ldb = *k
	}
	gemm := func() {
		eng.Sgemm(*transA, *transB, *m, *n, *k, 1, a, lda, b, ldb, 0, c, *n)
	}
	for i, t0 := 0, time.Now(); i < *warmup || time.Since(t0) < *warmupTime; i++ {
		gemm()
	}
	times := make([]float64, *reps)
	cpuBest := math.Inf(1)
	for i := range times {
		c0, cpuOK := procstat.CPUTime()
		t0 := time.Now()
		gemm()
		times[i] = time.Since(t0).Seconds()
		if c1, ok := procstat.CPUTime(); ok && cpuOK {
			cpuBest = min(cpuBest, (c1 - c0).Seconds())
		}
	}
	slices.Sort(times)
	median := times[len(times)/2]
	if len(times)%2 == 0 {
		median = (times[len(times)/2-1] + times[len(times)/2]) / 2
	}
	flops := 2 * float64(*m) * float64(*n) * float64(*k)
	r := gemmResult{
		Op: "sgemm", M: *m, N: *n, K: *k, TransA: *transA, TransB: *transB,
		Threads: *threads, Kernel: eng.Kernel(), KernelChoice: eng.KernelChoice(), Reps: *reps, Stat: "best",
		Seconds: times[0], GFLOPS: flops / times[0] / 1e9,
		MedianSeconds: median, MedianGFLOPS: flops / median / 1e9,
	}
	if cpuBest > 0 && !math.IsInf(cpuBest, 1) {
		r.CPUSeconds, r.CPUGFLOPS = cpuBest, flops/cpuBest/1e9
	}
	if *asJSON {
		out, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	fmt.Fprintf(stdout, "kernel %s, chosen as %s\n", r.Kernel, r.KernelChoice)
	fmt.Fprintf(stdout, "%-7s %6s %6s %6s %6s %6s %7s %12s %10s %12s %10s %10s\n",
		"kernel", "m", "n", "k", "transA", "transB", "threads", "best_s", "best_GF/s", "median_s", "median_GF/s", "cpu_GF/s")
	_, err := fmt.Fprintf(stdout, "%-7s %6d %6d %6d %6v %6v %7d %12.6f %10.1f %12.6f %10.1f %10.1f\n",
		r.Kernel, r.M, r.N, r.K, r.TransA, r.TransB, r.Threads, r.Seconds, r.GFLOPS, r.MedianSeconds, r.MedianGFLOPS, r.CPUGFLOPS)
	return err
}
