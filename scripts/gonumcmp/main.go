//go:build ignore

// This program times proxgen's pure-Go GEMM kernel against gonum's Sgemm on
// one thread, alternating the two, and prints one line per library. It is
// built by scripts/bench_gonum.sh in a temporary module that requires
// gonum; gonum never enters proxgen's go.mod.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
	gblas "gonum.org/v1/gonum/blas"
	gonum "gonum.org/v1/gonum/blas/gonum"
)

func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	n := flag.Int("n", 1024, "m = n = k")
	reps := flag.Int("reps", 5, "timed repetitions of each library (alternating)")
	kernel := flag.String("kernel", "generic", "proxgen micro-kernel")
	label := flag.String("gonum", "gonum", "label of the gonum build")
	flag.Parse()
	runtime.GOMAXPROCS(1) // gonum's Sgemm uses GOMAXPROCS goroutines
	parallel.SetWorkers(1)
	eng, err := blas.NewEngine(*kernel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.Float64()*2 - 1)
		}
		return s
	}
	m := *n
	a, b := fill(m*m), fill(m*m)
	c1, c2 := make([]float32, m*m), make([]float32, m*m)
	impl := gonum.Implementation{}
	runs := []struct {
		name string
		f    func()
	}{
		{"proxgen-" + *kernel, func() { eng.SgemmSerial(false, false, m, m, m, 1, a, m, b, m, 0, c1, m) }},
		{*label, func() { impl.Sgemm(gblas.NoTrans, gblas.NoTrans, m, m, m, 1, a, m, b, m, 0, c2, m) }},
	}
	wall := make([][]float64, len(runs))
	cpu := make([][]float64, len(runs))
	for _, r := range runs { // warm-up
		r.f()
	}
	for range *reps {
		for i, r := range runs {
			t0, u0 := time.Now(), cpuTime()
			r.f()
			wall[i] = append(wall[i], time.Since(t0).Seconds())
			cpu[i] = append(cpu[i], cpuTime()-u0)
		}
	}
	var maxDiff float64
	for i := range c1 {
		maxDiff = math.Max(maxDiff, math.Abs(float64(c1[i]-c2[i])))
	}
	flops := 2 * float64(m) * float64(m) * float64(m)
	for i, r := range runs {
		slices.Sort(wall[i])
		slices.Sort(cpu[i])
		fmt.Printf("%-16s n=%d best %6.2f GFLOP/s  median %6.2f  cpu-best %6.2f\n", r.name, m,
			flops/wall[i][0]/1e9, flops/wall[i][len(wall[i])/2]/1e9, flops/cpu[i][0]/1e9)
	}
	fmt.Printf("ratio proxgen/%s: best %.2f  cpu %.2f  (max |difference| of C %.2g)\n", *label,
		wall[1][0]/wall[0][0], cpu[1][0]/cpu[0][0], maxDiff)
}
