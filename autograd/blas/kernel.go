package blas

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
	// gather, if set, is run with B read in place from a Gathered matrix:
	// row p of the tile's B is the 16 values at src[b0+offs[p]:] followed
	// by the 16 at src[b1+offs[p]:] (nr == 32). It accepts partial rows
	// and columns. Without it, SgemmGather packs the panels of B.
	gather func(rows, cols, kc int, ap, src []float32, offs []int32, b0, b1 int, c []float32, ldc int, alpha, beta float32)
	// dotGather, if set, is dot for rows of B gathered in runs of 16:
	// element t of row j is at rows[4+j][offs[t/16]+t%16] (see
	// SgemmGatherT).
	dotGather func(n int, offs *int32, rows *[10]*float32, out *[24]float32)
}

//go:generate go run gen_gokernel.go
//go:generate go run gen_kernels_arm64.go

// generic is the pure-Go kernel, available on every platform. A kc of 512
// halves the calls per product against 256 (2 % faster at 1024³): its
// panel of B (8 KiB) stays in L1 and the block of A (240 KiB) in L2.
var generic = &microKernel{
	name: "generic",
	why:  "pure Go, every platform",
	mr:   goMR, nr: goNR,
	mc: 60 * goMR, kc: 512, nc: 1024,
	run: goKernel,
}

// kernels lists the available kernels, best last.
var kernels = append([]*microKernel{generic}, archKernels()...)

// Engine computes single-precision GEMMs with one micro-kernel. Sgemm and
// SgemmSerial use the engine chosen at start-up (Default); NewEngine gives
// one with another kernel, for tests and benchmarks that compare kernels.
// An Engine never changes, so one value serves any number of goroutines.
type Engine struct {
	k   *microKernel
	how string // how the kernel was chosen
}

// defaultEngine is the fastest kernel this CPU runs, or the one
// PROXGEN_GEMM names; it is fixed at start-up.
var defaultEngine = chooseEngine()

func chooseEngine() *Engine {
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
	return &Engine{best, how}
}

// Default returns the engine of Sgemm and SgemmSerial.
func Default() *Engine { return defaultEngine }

// NewEngine returns an engine with the micro-kernel named name. It reports
// an error if the kernel is unknown or the CPU cannot run it.
func NewEngine(name string) (*Engine, error) {
	k := lookup(name)
	if k == nil {
		return nil, fmt.Errorf("blas: kernel %q is not available (have %s)", name, strings.Join(Kernels(), ", "))
	}
	return &Engine{k, "NewEngine(" + strconv.Quote(name) + ")"}, nil
}

// Kernel names the engine's micro-kernel: "generic" (pure Go, every
// platform), "avx2" or "avx512" (amd64) or "neon" (arm64).
func (e *Engine) Kernel() string { return e.k.name }

// KernelChoice says how the engine's kernel was chosen (by default, by the
// PROXGEN_GEMM environment variable or by NewEngine) and why it can run
// here, for example "the fastest of generic, avx2, avx512 on this CPU;
// avx512: CPU and OS support AVX-512F (CPUID, XGETBV)".
func (e *Engine) KernelChoice() string { return e.how + "; " + e.k.name + ": " + e.k.why }

func lookup(name string) *microKernel {
	for _, k := range kernels {
		if k.name == name {
			return k
		}
	}
	return nil
}

// Kernel names the micro-kernel of Sgemm (Default().Kernel()).
func Kernel() string { return defaultEngine.Kernel() }

// KernelChoice says how the kernel of Sgemm was chosen
// (Default().KernelChoice()).
func KernelChoice() string { return defaultEngine.KernelChoice() }

// Kernels lists the names of the micro-kernels this machine can run, the
// default (fastest) last.
func Kernels() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}
