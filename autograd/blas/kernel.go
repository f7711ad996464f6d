package blas

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// microKernel describes one register-blocked micro-kernel and the cache
// blocking that suits it.
type microKernel struct {
	name string
	// why says when the kernel is available: the CPU features it needs.
	why    string
	mr, nr int // register block: rows of A and columns of B per call
	mc, kc int // cache block sizes; mc is a multiple of mr
	nc     int // column block; a multiple of nr
	// inPlaceM and inPlaceKC: C with at most inPlaceM rows is computed
	// reading B in place (if strided), in blocks of inPlaceKC rows of B.
	inPlaceM, inPlaceKC int
	// run computes C = alpha·Ap·B + beta·C for the top-left rows×cols
	// corner of an mr×nr tile of C at c with row stride ldc. Ap holds kc
	// groups of mr values of A; B holds kc rows of nr values, ldb apart.
	// beta == 0 overwrites C without reading it. kc >= 1. Unless the
	// flags below say otherwise, rows == mr, cols == nr and ldb == nr.
	//
	// pf is where the next panel of B (or other data needed soon) lies;
	// the kernel may prefetch up to 4·kc values from it into the L2 cache.
	run func(rows, cols, kc int, ap, b []float32, ldb int, c []float32, ldc int, alpha, beta float32, pf *float32)
	// partialRows, partialCols: run accepts rows < mr, cols < nr.
	partialRows, partialCols bool
	// strided: run accepts any ldb >= nr, so B can be read in place.
	strided bool
	// dot, if set, stores in out[i*6+j] the dot products of the k values
	// at rows[i] (i < 4) and rows[4+j] (j < 6); see gemmDot.
	dot func(k int, rows *[10]*float32, out *[24]float32)
}

//go:generate go run gen_gokernel.go
//go:generate go run gen_kernels_arm64.go

// generic is the pure-Go kernel, available on every platform.
var generic = &microKernel{
	name: "generic",
	why:  "pure Go, every platform",
	mr:   goMR, nr: goNR,
	mc: 60 * goMR, kc: 256, nc: 512 * goNR,
	run: goKernel,
}

// kernels lists the available kernels, best last.
var kernels = append([]*microKernel{generic}, archKernels()...)

// selection is the kernel in use and how it was chosen.
type selection struct {
	k   *microKernel
	how string
}

var active atomic.Pointer[selection]

func init() {
	best := kernels[len(kernels)-1]
	how := "the fastest of " + strings.Join(Kernels(), ", ") + " on this CPU"
	if env := strings.TrimSpace(os.Getenv("PROXGEN_GEMM")); env != "" {
		if k := lookup(env); k != nil {
			best, how = k, "PROXGEN_GEMM="+env
		} else {
			fmt.Fprintf(os.Stderr, "blas: PROXGEN_GEMM=%q is not available on this machine (have %s); using %s\n",
				env, strings.Join(Kernels(), ", "), best.name)
			how += " (PROXGEN_GEMM=" + env + " is not available)"
		}
	}
	active.Store(&selection{best, how})
}

func lookup(name string) *microKernel {
	for _, k := range kernels {
		if k.name == name {
			return k
		}
	}
	return nil
}

// Kernel names the micro-kernel in use: "generic" (pure Go, every
// platform), "avx2" or "avx512" (amd64) or "neon" (arm64).
func Kernel() string { return active.Load().k.name }

// KernelChoice says how the kernel in use was chosen (by default, by the
// PROXGEN_GEMM environment variable or by SetKernel) and why it can run
// here, for example "the fastest of generic, avx2, avx512 on this CPU;
// avx512: CPU and OS support AVX-512F (CPUID, XGETBV)".
func KernelChoice() string {
	s := active.Load()
	return s.how + "; " + s.k.name + ": " + s.k.why
}

// Kernels lists the names of the micro-kernels this machine can run, the
// default (fastest) last.
func Kernels() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}

// SetKernel selects the micro-kernel named name for later calls and
// returns the name of the previous one. It reports an error, and changes
// nothing, if the kernel is unknown or the CPU cannot run it. It is meant for
// tests and benchmarks; calls running concurrently may use either kernel.
func SetKernel(name string) (prev string, err error) {
	k := lookup(name)
	if k == nil {
		return Kernel(), fmt.Errorf("blas: kernel %q is not available (have %s)", name, strings.Join(Kernels(), ", "))
	}
	return active.Swap(&selection{k, "SetKernel(" + strconv.Quote(name) + ")"}).k.name, nil
}
