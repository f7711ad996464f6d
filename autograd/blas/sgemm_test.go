package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/internal/parallel"
)

// refGemm computes alpha·op(A)·op(B) + beta·C in float64, returning the
// result and, per element, the sum of |terms| used to bound rounding error.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (want, mag []float64) {
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				var x, y float32
				if transA {
					x = a[p*lda+i]
				} else {
					x = a[i*lda+p]
				}
				if transB {
					y = b[j*ldb+p]
				} else {
					y = b[p*ldb+j]
				}
				s += float64(x) * float64(y)
				sa += math.Abs(float64(x) * float64(y))
			}
			v := float64(alpha) * s
			ma := math.Abs(float64(alpha)) * sa
			if beta != 0 {
				v += float64(beta) * float64(c[i*ldc+j])
				ma += math.Abs(float64(beta) * float64(c[i*ldc+j]))
			}
			want[i*n+j] = v
			mag[i*n+j] = ma
		}
	}
	return want, mag
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	pad            int // extra leading-dimension padding
}

func (g gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,m=%d,n=%d,k=%d,alpha=%g,beta=%g,pad=%d", g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.beta, g.pad)
}

// operands builds random A, B and C for g; C's padding holds NaN sentinels
// that must survive, and with beta == 0 C itself starts as NaN.
func (g gemmCase) operands(rng *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ar, ac := g.m, g.k
	if g.transA {
		ar, ac = g.k, g.m
	}
	br, bc := g.k, g.n
	if g.transB {
		br, bc = g.n, g.k
	}
	lda, ldb, ldc = ac+g.pad, bc+g.pad, g.n+g.pad
	a = randSlice(rng, max(0, (ar-1)*lda+ac))
	b = randSlice(rng, max(0, (br-1)*ldb+bc))
	c = randSlice(rng, max(0, (g.m-1)*ldc+g.n))
	for i := 0; i < g.m; i++ {
		for j := g.n; j < ldc && i*ldc+j < len(c); j++ {
			c[i*ldc+j] = float32(math.NaN())
		}
		if g.beta == 0 {
			for j := 0; j < g.n; j++ {
				c[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	return
}

// checkCase runs g through e and compares with the float64 reference.
func checkCase(t *testing.T, e *Engine, rng *rand.Rand, g gemmCase, par bool) {
	t.Helper()
	a, lda, b, ldb, c, ldc := g.operands(rng)
	want, mag := refGemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
	if par {
		e.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
	} else {
		e.SgemmSerial(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
	}
	bad := 0
	for i := 0; i < g.m; i++ {
		for j := 0; j < ldc && i*ldc+j < len(c); j++ {
			got := c[i*ldc+j]
			if j >= g.n {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%s [%s]: padding C[%d][%d] overwritten with %g", g, e.Kernel(), i, j, got)
				}
				continue
			}
			w := want[i*g.n+j]
			tol := 1e-30 + 1.2e-7*float64(g.k+4)*mag[i*g.n+j]
			if d := math.Abs(float64(got) - w); !(d <= tol) {
				if bad++; bad <= 3 {
					t.Errorf("%s [%s]: C[%d][%d] = %g, want %g (tol %g)", g, e.Kernel(), i, j, got, w, tol)
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s [%s]: %d wrong elements", g, e.Kernel(), bad)
	}
}

// forEachKernel runs f once with every kernel this machine supports:
// through impl.ForEach, the Go loops ("generic") alone and then each
// assembly implementation of package blas alone (its micro-kernel and, for
// avx512, its packing routines).
func forEachKernel(t *testing.T, f func(t *testing.T, e *Engine)) {
	impl.ForEach("blas", func(name string) {
		t.Run(name, func(t *testing.T) {
			e, err := NewEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			f(t, e)
		})
	})
}

func TestSgemmSmallShapes(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(1, 2))
		dims := []int{1, 2, 3, 5, 7, 11, 13, 16, 17, 31, 32, 33, 47, 64, 70}
		for trial := 0; trial < 160; trial++ {
			g := gemmCase{
				transA: trial&1 != 0, transB: trial&2 != 0,
				m: dims[rng.IntN(len(dims))], n: dims[rng.IntN(len(dims))], k: dims[rng.IntN(len(dims))],
				alpha: 1, beta: 0, pad: rng.IntN(3),
			}
			if trial%5 == 1 {
				g.m = 1 + rng.IntN(70)
				g.n = 1 + rng.IntN(70)
				g.k = 1 + rng.IntN(70)
			}
			switch trial % 4 {
			case 1:
				g.beta = 1
			case 2:
				g.alpha, g.beta = -0.5, 2
			case 3:
				g.alpha, g.beta = 1.5, 0
			}
			checkCase(t, e, rng, g, trial%2 == 0)
		}
	})
}

func TestSgemmDegenerate(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, s := range [][3]int{{1, 1, 1}, {1, 70, 33}, {70, 1, 33}, {33, 45, 1}, {1, 1, 300}, {1, 513, 9}, {200, 1, 150}} {
				checkCase(t, e, rng, gemmCase{transA: tr[0], transB: tr[1], m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0.5}, true)
			}
		}
	})
}

// pathCases hit every code path of the driver for every kernel: the
// packed path (more rows than any kernel's mc), B read in place (few rows)
// and dot products (few rows, transB), with edges in every dimension and
// K longer than the K blocks.
var pathCases = []gemmCase{
	{m: 509, n: 131, k: 600, alpha: 0.75, beta: 0, pad: 3},
	{transA: true, m: 501, n: 70, k: 270, alpha: 1, beta: 1, pad: 1},
	{transB: true, m: 490, n: 45, k: 300, alpha: -1, beta: 0.5},
	{transA: true, transB: true, m: 485, n: 33, k: 280, alpha: 1, beta: 0},
	{m: 131, n: 257, k: 389, alpha: 0.75, beta: 1, pad: 3},
	{transA: true, m: 16, n: 1031, k: 144, alpha: 1, beta: 0, pad: 2},
	{transB: true, m: 61, n: 67, k: 1100, alpha: 2, beta: 1, pad: 5},
	{transB: true, m: 13, n: 150, k: 2100, alpha: 1, beta: 0},
	{transA: true, transB: true, m: 64, n: 4100, k: 27, alpha: 1, beta: 0.25},
}

func TestSgemmPaths(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(5, 6))
		for i, g := range pathCases {
			checkCase(t, e, rng, g, i%2 == 0)
		}
	})
}

// TestKernelsAgree checks each assembly kernel, with the packing routines
// of its implementation (impl.ForEach), against the Go loops on the same
// operands, element by element.
func TestKernelsAgree(t *testing.T) {
	if names, _ := impl.List("blas"); len(names) == 0 {
		t.Skip("only the generic kernel is available")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	cases := append([]gemmCase{
		{m: 37, n: 45, k: 61, alpha: 1, beta: 0},
		{transA: true, transB: true, m: 7, n: 3, k: 2, alpha: 1, beta: 1},
	}, pathCases...)
	for _, g := range cases {
		a, lda, b, ldb, c0, ldc := g.operands(rng)
		_, mag := refGemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c0, ldc)
		var want []float32
		impl.ForEach("blas", func(name string) {
			e, err := NewEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			got := append([]float32(nil), c0...)
			e.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, got, ldc)
			if name == impl.Generic {
				want = got
				return
			}
			for r := 0; r < g.m; r++ {
				for j := 0; j < g.n; j++ {
					x, y := want[r*ldc+j], got[r*ldc+j]
					tol := 1e-30 + 2.4e-7*float64(g.k+4)*mag[r*g.n+j]
					if d := math.Abs(float64(x) - float64(y)); !(d <= tol) {
						t.Fatalf("%s: C[%d][%d] is %g with generic but %g with %s", g, r, j, x, y, name)
					}
				}
			}
		})
	}
}

// TestSgemmAllocs checks that the packing buffers are reused: a call
// allocates at most a little bookkeeping, never a buffer. How many workers
// run at once depends on the scheduler, so a call may be the first to need
// a second workspace of its size; a measurement is therefore repeated, and
// only one that allocates in every attempt fails.
func TestSgemmAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, g := range pathCases {
		a, lda, b, ldb, c, ldc := g.operands(rng)
		f := func() { Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, 0, c, ldc) }
		f()
		const calls, attempts = 20, 3
		var perCall uint64
		for range attempts {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range calls {
				f()
			}
			runtime.ReadMemStats(&after)
			if perCall = (after.TotalAlloc - before.TotalAlloc) / calls; perCall <= 4096 {
				break
			}
		}
		if perCall > 4096 {
			t.Errorf("%s: %d bytes allocated per call", g, perCall)
		}
	}
}

func TestKernelSelection(t *testing.T) {
	names := Kernels()
	if names[0] != "generic" {
		t.Errorf("Kernels() = %v, want generic first", names)
	}
	if _, err := NewEngine("nosuch"); err == nil {
		t.Error("NewEngine(nosuch) succeeded")
	}
	for _, name := range names {
		e, err := NewEngine(name)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kernel() != name {
			t.Errorf("NewEngine(%q).Kernel() = %q", name, e.Kernel())
		}
		if c, want := e.KernelChoice(), fmt.Sprintf("NewEngine(%q); %s: %s", name, name, lookup(name).why); c != want {
			t.Errorf("NewEngine(%q).KernelChoice() = %q, want %q", name, c, want)
		}
	}
	if Default().Kernel() != Kernel() || Default().KernelChoice() != KernelChoice() {
		t.Errorf("Default() = %q, package-level %q", Default().KernelChoice(), KernelChoice())
	}
	// The assembly kernels are the implementations of "blas" in
	// internal/impl, and selecting one leaves it alone beside generic.
	implNames, supported := impl.List("blas")
	want := []string{"generic"}
	for i, n := range implNames {
		if supported[i] {
			want = append(want, n)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("Kernels() = %v, want generic and the supported implementations %v", names, want)
	}
	impl.ForEach("blas", func(name string) {
		got := Kernels()
		if got[len(got)-1] != name || len(got) > 2 {
			t.Errorf("with %s selected, Kernels() = %v", name, got)
		}
		for _, other := range names[1:] {
			if _, err := NewEngine(other); (err == nil) != (other == name) {
				t.Errorf("with %s selected, NewEngine(%q): error %v", name, other, err)
			}
		}
	})
}

// TestSetDefault checks that SetDefault changes the engine of Sgemm and
// Default, and that ChosenBy replaces how NewEngine says it chose.
func TestSetDefault(t *testing.T) {
	e, err := NewEngine("generic", ChosenBy("PROXGEN_GEMM=generic"))
	if err != nil {
		t.Fatal(err)
	}
	if c, want := e.KernelChoice(), "PROXGEN_GEMM=generic; generic: "+generic.why; c != want {
		t.Errorf("KernelChoice() = %q, want %q", c, want)
	}
	prev := SetDefault(e)
	if Default() != e || Kernel() != "generic" || KernelChoice() != e.KernelChoice() {
		t.Errorf("after SetDefault: Default() = %q", Default().KernelChoice())
	}
	if got := SetDefault(prev); got != e || Default() != prev {
		t.Error("SetDefault did not return the engine it replaced")
	}
	names := Kernels()
	if want := "the fastest of " + strings.Join(names, ", ") + " on this CPU; " + names[len(names)-1] + ": "; !strings.HasPrefix(KernelChoice(), want) {
		t.Errorf("KernelChoice() = %q, want the prefix %q", KernelChoice(), want)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "blas.SetDefault") {
			t.Errorf("SetDefault(nil): panic %v", r)
		}
	}()
	SetDefault(nil)
}

func TestSgemmZeroAlphaAndK(t *testing.T) {
	c := []float32{float32(math.NaN()), 2, 3, 4}
	Sgemm(false, false, 2, 2, 0, 1, nil, 0, nil, 2, 0, c, 2)
	for i, v := range c {
		if v != 0 {
			t.Fatalf("k=0, beta=0: c[%d] = %g, want 0", i, v)
		}
	}
	c = []float32{1, 2, 3, 4}
	nan := float32(math.NaN())
	a := []float32{nan, nan, nan, nan}
	Sgemm(false, false, 2, 2, 2, 0, a, 2, a, 2, 3, c, 2)
	for i, v := range c {
		if v != float32(3*(i+1)) {
			t.Fatalf("alpha=0: c[%d] = %g, want %d", i, v, 3*(i+1))
		}
	}
	Sgemm(false, false, 0, 5, 5, 1, nil, 5, make([]float32, 25), 5, 0, nil, 5)
}

// TestSgemmWorkersDeterministic checks that results are bit-identical for
// any number of workers and between Sgemm and SgemmSerial.
func TestSgemmWorkersDeterministic(t *testing.T) {
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	forEachKernel(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, g := range []gemmCase{
			{m: 300, n: 517, k: 700, alpha: 1, beta: 0.5},
			{m: 600, n: 300, k: 300, alpha: 1, beta: 0},
			{transA: true, m: 16, n: 3000, k: 144, alpha: 1, beta: 0},
			{transB: true, m: 1000, n: 40, k: 300, alpha: 2, beta: 1},
			{transB: true, m: 40, n: 500, k: 2000, alpha: 1, beta: 0},
		} {
			a, lda, b, ldb, c0, ldc := g.operands(rng)
			var ref []float32
			workers := []int{1, 2, 3, 8}
			if testing.Short() {
				workers = []int{1, 3}
			}
			for _, w := range workers {
				parallel.SetWorkers(w)
				for _, serial := range []bool{false, true} {
					c := append([]float32(nil), c0...)
					if serial {
						e.SgemmSerial(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
					} else {
						e.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
					}
					if ref == nil {
						ref = c
						continue
					}
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(ref[i]) {
							t.Fatalf("%s: workers=%d serial=%v: c[%d] = %g, differs from %g", g, w, serial, i, c[i], ref[i])
						}
					}
				}
			}
		}
	})
}

func TestSgemmPanics(t *testing.T) {
	s := make([]float32, 12)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"negative", func() { Sgemm(false, false, -1, 2, 2, 1, s, 2, s, 2, 0, s, 2) }, "negative dimension"},
		{"lda", func() { Sgemm(false, false, 2, 2, 3, 1, s, 2, s, 2, 0, s, 2) }, "lda=2"},
		{"ldaTrans", func() { Sgemm(true, false, 4, 2, 2, 1, s, 3, s, 2, 0, s, 4) }, "lda=3"},
		{"ldb", func() { Sgemm(false, true, 2, 2, 3, 1, s, 3, s, 2, 0, s, 2) }, "ldb=2"},
		{"ldc", func() { Sgemm(false, false, 2, 3, 2, 1, s, 2, s, 3, 0, s, 2) }, "ldc=2"},
		{"shortA", func() { Sgemm(false, false, 4, 2, 4, 1, s, 4, s, 2, 0, s, 2) }, "len(a)=12"},
		{"shortB", func() { Sgemm(false, false, 2, 5, 3, 1, s, 3, s, 5, 0, s, 5) }, "len(b)=12"},
		{"shortC", func() { Sgemm(false, false, 5, 3, 1, 1, s, 1, s, 3, 0, s, 3) }, "len(c)=12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "blas.Sgemm") {
					t.Fatalf("panic %v, want a blas.Sgemm message containing %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

// TestSgemmEdgeShapes runs every kernel on every m up to two register
// blocks and one more row, every n likewise, in all four layouts, so that
// each kind of edge tile (rows, columns, both) meets every kernel and
// every driver path.
func TestSgemmEdgeShapes(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		kern := e.k
		rng := rand.New(rand.NewPCG(15, 16))
		ks := []int{1, 3, 4, 5, 17}
		if testing.Short() {
			ks = []int{1, 5, 17}
		}
		for m := 1; m <= 2*kern.mr+1; m++ {
			for n := 1; n <= 2*kern.nr+1; n++ {
				for i, k := range ks {
					tr := (m + n + i) % 4
					g := gemmCase{transA: tr&1 != 0, transB: tr&2 != 0, m: m, n: n, k: k, alpha: 1, beta: 0, pad: (m + k) % 3}
					if (m+n)%3 == 0 {
						g.alpha, g.beta = -1.5, 0.5
					}
					checkCase(t, e, rng, g, false)
				}
			}
		}
	})
}
