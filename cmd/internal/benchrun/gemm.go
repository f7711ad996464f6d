package benchrun

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// GemmConfig describes a GEMM benchmark: C = op(A)·op(B) for random
// row-major float32 matrices, op(A) M×K and op(B) K×N.
type GemmConfig struct {
	M, N, K        int
	TransA, TransB bool          // A stored K×M, B stored N×K
	Reps           int           // timed repetitions, at least 1
	Warmup         int           // untimed repetitions before timing, at least
	WarmupTime     time.Duration // keep warming up until this much time has passed, so the CPU clock settles
}

// maxGemmElements bounds M·K + K·N + M·N, the float32 elements of the
// three matrices (8 GiB).
const maxGemmElements = 1 << 31

// GemmResult is what Gemm measured; its JSON keys are those of
// bench gemm -json.
type GemmResult struct {
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

// WriteTable prints r as a readable table, as bench gemm does without
// -json.
func (r *GemmResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "kernel %s, chosen as %s\n", r.Kernel, r.KernelChoice)
	fmt.Fprintf(w, "%-7s %6s %6s %6s %6s %6s %7s %12s %10s %12s %10s %10s\n",
		"kernel", "m", "n", "k", "transA", "transB", "threads", "best_s", "best_GF/s", "median_s", "median_GF/s", "cpu_GF/s")
	_, err := fmt.Fprintf(w, "%-7s %6d %6d %6d %6v %6v %7d %12.6f %10.1f %12.6f %10.1f %10.1f\n",
		r.Kernel, r.M, r.N, r.K, r.TransA, r.TransB, r.Threads, r.Seconds, r.GFLOPS, r.MedianSeconds, r.MedianGFLOPS, r.CPUGFLOPS)
	return err
}

// Check reports a configuration that Gemm cannot run: a size below 1,
// matrices of more than 8 GiB, no timed repetition, or a
// negative warm-up. The error names the setting by the name of bench
// gemm's flag for it.
func (c *GemmConfig) Check() error {
	switch {
	case c.M < 1 || c.N < 1 || c.K < 1:
		return fmt.Errorf("m, n and k must be positive, got m=%d n=%d k=%d", c.M, c.N, c.K)
	case c.Reps < 1:
		return fmt.Errorf("reps must be at least 1, got %d", c.Reps)
	case c.Warmup < 0 || c.WarmupTime < 0:
		return fmt.Errorf("warmup and warmup-time must not be negative, got %d and %v", c.Warmup, c.WarmupTime)
	case float64(c.M)*float64(c.K)+float64(c.K)*float64(c.N)+float64(c.M)*float64(c.N) > maxGemmElements:
		return fmt.Errorf("matrices of m=%d n=%d k=%d need more than 8 GiB", c.M, c.N, c.K)
	}
	return nil
}

// Gemm times eng.Sgemm on the matrices c describes, filled with uniform
// random numbers in [-1, 1) from a fixed seed: the best and the median
// wall time of c.Reps repetitions after the warm-up, and the least
// process CPU time of one. It runs on the worker pool the program sized
// (parallel.Workers, reported as Threads) and returns an error, having
// run nothing, if Check rejects c.
func Gemm(eng *blas.Engine, c GemmConfig) (*GemmResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.Float64()*2 - 1)
		}
		return s
	}
	a, b, out := fill(c.M*c.K), fill(c.K*c.N), make([]float32, c.M*c.N)
	lda, ldb := c.K, c.N
	if c.TransA {
		lda = c.M
	}
	if c.TransB {
		ldb = c.K
	}
	gemm := func() {
		eng.Sgemm(c.TransA, c.TransB, c.M, c.N, c.K, 1, a, lda, b, ldb, 0, out, c.N)
	}
	for i, t0 := 0, time.Now(); i < c.Warmup || time.Since(t0) < c.WarmupTime; i++ {
		gemm()
	}
	times := make([]float64, c.Reps)
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
	flops := 2 * float64(c.M) * float64(c.N) * float64(c.K)
	r := &GemmResult{
		Op: "sgemm", M: c.M, N: c.N, K: c.K, TransA: c.TransA, TransB: c.TransB,
		Threads: parallel.Workers(), Kernel: eng.Kernel(), KernelChoice: eng.KernelChoice(), Reps: c.Reps, Stat: "best",
		Seconds: times[0], GFLOPS: flops / times[0] / 1e9,
		MedianSeconds: median, MedianGFLOPS: flops / median / 1e9,
	}
	if cpuBest > 0 && !math.IsInf(cpuBest, 1) {
		r.CPUSeconds, r.CPUGFLOPS = cpuBest, flops/cpuBest/1e9
	}
	return r, nil
}
