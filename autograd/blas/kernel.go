package blas

import (
	"fmt"
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

// kernels returns the kernels this machine runs, best last: generic and
// the assembly kernels whose internal/impl flags are set, which is what
// the CPU supports unless a test selected one implementation
// (impl.Select, impl.ForEach).
func kernels() []*microKernel {
	return append([]*microKernel{generic}, archKernels()...)
}

// Engine computes single-precision GEMMs with one micro-kernel, chosen
// when the engine is made: Default is the fastest this CPU runs, NewEngine
// gives one with a named kernel. Sgemm and SgemmSerial use Default. An
// Engine never changes, so one value serves any number of goroutines.
type Engine struct {
	k   *microKernel
	how string // how the kernel was chosen
}

// defaultEngine is the engine of Sgemm and SgemmSerial: the fastest kernel
// at start-up, or the engine a program gave SetDefault.
var defaultEngine atomic.Pointer[Engine]

func init() {
	ks := kernels()
	defaultEngine.Store(&Engine{ks[len(ks)-1], "the fastest of " + strings.Join(Kernels(), ", ") + " on this CPU"})
}

// Default returns the engine of Sgemm and SgemmSerial, which also computes
// every product of package autograd: the fastest kernel this CPU runs,
// unless the program chose another with SetDefault.
func Default() *Engine { return defaultEngine.Load() }

// SetDefault makes e the engine of Sgemm, SgemmSerial and Default, and so
// of every product in the process that does not name its engine, and
// returns the previous one. It changes process-wide state: it is for
// programs, which choose the kernel of their whole process (the programs
// of this repository from PROXGEN_GEMM, in cmd/internal/compute); a
// library takes an *Engine from its caller instead. Products already
// running finish with the engine they started with. It panics if e is
// nil.
func SetDefault(e *Engine) *Engine {
	if e == nil {
		panic("blas.SetDefault: nil engine")
	}
	return defaultEngine.Swap(e)
}

// An Option adjusts the engine NewEngine returns.
type Option func(*Engine)

// ChosenBy records how the engine's kernel was chosen, for KernelChoice,
// instead of NewEngine's name: for example "PROXGEN_GEMM=avx2".
func ChosenBy(how string) Option { return func(e *Engine) { e.how = how } }

// NewEngine returns an engine with the micro-kernel named name, one of
// Kernels. It reports an error if the kernel is unknown or the CPU cannot
// run it. The kernel is chosen here, once: the products of the engine
// call it directly.
func NewEngine(name string, opts ...Option) (*Engine, error) {
	k := lookup(name)
	if k == nil {
		return nil, fmt.Errorf("blas: kernel %q is not available (have %s)", name, strings.Join(Kernels(), ", "))
	}
	e := &Engine{k, "NewEngine(" + strconv.Quote(name) + ")"}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Kernel names the engine's micro-kernel: "generic" (pure Go, every
// platform), "avx2" or "avx512" (amd64) or "neon" (arm64).
func (e *Engine) Kernel() string { return e.k.name }

// DotProducts reports whether e computes C = A·Bᵀ with few rows of C
// (at most 64) as dot products of the rows of A and B read where they lie
// (the AVX-512 kernel), for Sgemm and for SgemmGatherT, which otherwise
// copy or pack both operands: the products of convolutions' weight
// gradients, whose fastest algorithm depends on it.
func (e *Engine) DotProducts() bool { return e.k.dot != nil && e.k.dotGather != nil }

// KernelChoice says how the engine's kernel was chosen (by default, by
// NewEngine, or as ChosenBy recorded, for example from the PROXGEN_GEMM
// environment variable) and why it can run here, for example "the fastest
// of generic, avx2, avx512 on this CPU; avx512: CPU and OS support
// AVX-512F (CPUID, XGETBV)".
func (e *Engine) KernelChoice() string { return e.how + "; " + e.k.name + ": " + e.k.why }

// lookup returns the kernel named name among kernels(), or nil.
func lookup(name string) *microKernel {
	for _, k := range kernels() {
		if k.name == name {
			return k
		}
	}
	return nil
}

// Kernel names the micro-kernel of Sgemm (Default().Kernel()).
func Kernel() string { return Default().Kernel() }

// KernelChoice says how the kernel of Sgemm was chosen
// (Default().KernelChoice()).
func KernelChoice() string { return Default().KernelChoice() }

// Kernels lists the names of the micro-kernels this machine can run, the
// fastest last. Each assembly kernel is an implementation of package
// "blas" in internal/impl, under the same name; "generic" is the Go loop.
func Kernels() []string {
	ks := kernels()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.name
	}
	return names
}
