// Package compute makes the two settings about computing that belong to a
// whole process, for the programs under cmd/: the number of threads (Go's
// GOMAXPROCS and the size of internal/parallel's worker pool) and the
// GEMM micro-kernel (the engine of blas.Sgemm, from the environment
// variable PROXGEN_GEMM). The libraries never make them: they compute
// with what the program chose, and their results do not depend on the
// thread count.
package compute

import (
	"os"
	"runtime"
	"strings"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/internal/parallel"
)

// SetThreads makes the program compute on n threads (0: all CPUs): Go's
// GOMAXPROCS and the worker pool's size. It returns the number and a
// function restoring the previous settings. Both settings belong to the
// process: call it from a program's main path, once per process.
func SetThreads(n int) (int, func()) {
	if n == 0 {
		n = runtime.NumCPU()
	}
	procs := runtime.GOMAXPROCS(n)
	workers := parallel.SetWorkers(n)
	return n, func() {
		parallel.SetWorkers(workers)
		runtime.GOMAXPROCS(procs)
	}
}

// GEMMEnv is the environment variable that forces a GEMM micro-kernel:
// one of blas.Kernels ("generic", "avx2", "avx512", "neon").
const GEMMEnv = "PROXGEN_GEMM"

// SetGEMM makes the micro-kernel that $PROXGEN_GEMM names the one every
// GEMM of the process runs (blas.SetDefault); unset or blank, the fastest
// this CPU runs stays. It returns a function restoring the previous
// engine, or a *cli.UsageError (exit status cli.ExitUsage) naming the
// variable and the kernels this machine runs if the kernel is unknown or
// this CPU cannot run it. Call it from a program's main path, before any
// product.
func SetGEMM() (restore func(), err error) {
	return setGEMM(os.Getenv(GEMMEnv))
}

// setGEMM is SetGEMM with the variable's value.
func setGEMM(value string) (func(), error) {
	name := strings.TrimSpace(value)
	if name == "" {
		return func() {}, nil
	}
	e, err := blas.NewEngine(name, blas.ChosenBy(GEMMEnv+"="+name))
	if err != nil {
		return nil, cli.Usagef("%s=%q: no such GEMM kernel on this machine (it runs %s)", GEMMEnv, value, strings.Join(blas.Kernels(), ", "))
	}
	prev := blas.SetDefault(e)
	return func() { blas.SetDefault(prev) }, nil
}
