package blas

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/internal/parallel"
)

// TestPackedAMatchesSgemm checks, for every kernel, that products with a
// PackedA are bit-identical to Sgemm's and SgemmSerial's with the unpacked
// matrix, on shapes that take every driver path (dot products, B read in
// place, B packed; blocks of K as packed or copied into place), with the
// matrix packed whole and in uneven column ranges, and for 1 and 3
// workers.
func TestPackedAMatchesSgemm(t *testing.T) {
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	forEachKernel(t, func(t *testing.T, e *Engine) {
		kern := e.k
		rng := rand.New(rand.NewPCG(21, 22))
		mBig := kern.inPlaceM + kern.mr + 1 // past the in-place rows
		for _, g := range []gemmCase{
			{transA: true, m: 13, n: 70, k: 600, alpha: 1, beta: 0},
			{transA: true, m: 40, n: 5, k: 1100, alpha: 1, beta: 0},          // n < nr
			{m: 20, n: 33, k: 300, alpha: 2, beta: 1, transB: true},          // dot path for Sgemm
			{m: 100, n: 70, k: 1100, alpha: 1, beta: 0.5, transB: true},      // B packed
			{transA: true, m: mBig, n: 45, k: 700, alpha: 1, beta: 0},        // B packed, kc blocks
			{m: mBig, n: 3, k: 300, alpha: -1, beta: 1, pad: 3},              // B packed, narrow
			{transA: true, m: 7, n: 40, k: 1, alpha: 1, beta: 0, pad: 1},     // one column
			{transA: true, m: 64, n: 300, k: 520, alpha: 1, beta: 0, pad: 2}, // parallel size
		} {
			a, lda, b, ldb, c0, ldc := g.operands(rng)
			want := append([]float32(nil), c0...)
			e.SgemmSerial(g.transA, g.transB, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, want, ldc)
			whole := e.PackA(g.transA, g.m, g.k, a, lda)
			// The same matrix packed in uneven column ranges, in a
			// buffer holding garbage.
			buf := randSlice(rng, e.PackedASize(g.m, g.k))
			parts := e.NewPackedA(g.transA, g.m, g.k, buf)
			for k0 := 0; k0 < g.k; {
				k1 := min(g.k, k0+1+rng.IntN(300))
				off := k0 * lda
				if !g.transA {
					off = k0
				}
				parts.Pack(a[off:], lda, k0, k1)
				k0 = k1
			}
			for _, w := range []int{1, 3} {
				parallel.SetWorkers(w)
				for _, pa := range []*PackedA{whole, parts} {
					for _, serial := range []bool{false, true} {
						c := append([]float32(nil), c0...)
						if serial {
							pa.SgemmSerial(g.transB, g.n, g.alpha, b, ldb, g.beta, c, ldc)
						} else {
							pa.Sgemm(g.transB, g.n, g.alpha, b, ldb, g.beta, c, ldc)
						}
						for i := range c {
							if math.Float32bits(c[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(c[i])) && math.IsNaN(float64(want[i]))) {
								t.Fatalf("%s: workers=%d serial=%v split=%v: c[%d] = %g, Sgemm gives %g", g, w, serial, pa == parts, i, c[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}

func TestPackedAPanics(t *testing.T) {
	s := make([]float32, 12)
	e := Default()
	pa := e.PackA(false, 2, 3, s, 3)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"range", func() { pa.Pack(s, 3, 1, 4) }, "blas.PackedA.Pack: columns [1, 4)"},
		{"lda", func() { pa.Pack(s, 2, 0, 3) }, "lda=2"},
		{"negative", func() { pa.Sgemm(false, -1, 1, s, 2, 0, s, 2) }, "blas.PackedA.Sgemm: negative dimension"},
		{"shortB", func() { pa.SgemmSerial(false, 5, 1, s, 5, 0, s, 5) }, "len(b)=12"},
		{"size", func() { e.PackedASize(-1, 2) }, "blas.PackedASize: negative"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.want, tc.f) })
	}
}

// mustPanic fails the test unless f panics with a message containing want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if r == nil || !strings.Contains(msg, want) {
			t.Fatalf("panic %v, want a message containing %q", r, want)
		}
	}()
	f()
}
