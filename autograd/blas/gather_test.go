package blas

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmGatherMatchesSgemm checks, for every kernel, that SgemmGather is
// bit-identical to SgemmSerial with the gathered matrix stored out, on
// random row and run offsets (overlapping, as an im2col matrix's are),
// partial tiles, several blocks of K, more rows than the in-place limit,
// and beta 0 (C holding NaN) and 1.
func TestSgemmGatherMatchesSgemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		kern := lookup(e.Kernel())
		rng := rand.New(rand.NewPCG(31, 32))
		for _, sh := range []struct{ m, n, k int }{
			{16, 64, 144}, {16, 1024, 144}, {12, 32, 9}, {5, 16, 3}, {13, 48, 300},
			{32, 80, 600}, {1, 17, 1}, {kern.inPlaceM + 3, 40, 70}, {29, 40, 513},
		} {
			m, n, k := sh.m, sh.n, sh.k
			runs := ceilDiv(n, GatherRun)
			src := randSlice(rng, 5000)
			g := Gathered{Src: src, Rows: make([]int32, k), Runs: make([]int32, runs)}
			for p := range g.Rows {
				g.Rows[p] = int32(rng.IntN(2000))
			}
			for r := range g.Runs {
				g.Runs[r] = int32(rng.IntN(2000))
			}
			// B stored out, with a row stride past n.
			ldb := n + 3
			b := make([]float32, k*ldb)
			for p := 0; p < k; p++ {
				for j := 0; j < n; j++ {
					b[p*ldb+j] = src[int(g.Rows[p])+int(g.Runs[j/GatherRun])+j%GatherRun]
				}
			}
			a := randSlice(rng, m*k)
			pa := e.PackA(true, m, k, a, m)
			ga := e.PackGatherA(true, m, k, a, m, nil)
			for _, beta := range []float32{0, 1} {
				ldc := n + 5
				c0 := randSlice(rng, m*ldc)
				if beta == 0 {
					for i := range c0 {
						c0[i] = float32(math.NaN())
					}
				}
				want := append([]float32(nil), c0...)
				pa.SgemmSerial(false, n, 1, b, ldb, beta, want, ldc)
				got := append([]float32(nil), c0...)
				ga.SgemmGather(n, g, beta, got, ldc)
				for i := 0; i < m; i++ {
					for j := 0; j < ldc; j++ {
						x, y := got[i*ldc+j], want[i*ldc+j]
						if math.Float32bits(x) != math.Float32bits(y) && !(math.IsNaN(float64(x)) && math.IsNaN(float64(y))) {
							t.Fatalf("m=%d n=%d k=%d beta=%g: c[%d][%d] = %g, SgemmSerial gives %g", m, n, k, beta, i, j, x, y)
						}
					}
				}
			}
		}
	})
}

func TestSgemmGatherPanics(t *testing.T) {
	e := Default()
	pa := e.PackGatherA(false, 2, 3, make([]float32, 6), 3, nil)
	src := make([]float32, 40)
	c := make([]float32, 64)
	for _, tc := range []struct {
		name string
		g    Gathered
		n    int
		want string
	}{
		{"rows", Gathered{Src: src, Rows: []int32{0, 1}, Runs: []int32{0}}, 16, "needs 3 row offsets"},
		{"runs", Gathered{Src: src, Rows: []int32{0, 1, 2}, Runs: []int32{0}}, 20, "2 run offsets"},
		{"reach", Gathered{Src: src, Rows: []int32{0, 1, 20}, Runs: []int32{5}}, 16, "len(Src) = 40"},
		{"negative", Gathered{Src: src, Rows: []int32{0, -6, 2}, Runs: []int32{5}}, 16, "reach [-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustPanic(t, tc.want, func() { pa.SgemmGather(tc.n, tc.g, 0, c, 32) })
		})
	}
}

// TestSgemmGatherTMatchesSgemm checks, for every kernel, that SgemmGatherT
// is bit-identical to SgemmSerial(false, true, ...) with A and B stored
// out, on random offsets (A contiguous or gathered), partial runs, blocks
// of 4×6 at the edges, n past one block of dot products, and more rows
// than the dot-product limit.
func TestSgemmGatherTMatchesSgemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(33, 34))
		for trial, sh := range []struct{ m, n, k int }{
			{16, 1024, 144}, {16, 256, 288}, {5, 37, 7}, {1, 16, 1}, {13, 2080, 20}, {70, 96, 30}, {4, 9, 6},
			{32, 2048, 288}, {3, 64, 5},
		} {
			m, n, k := sh.m, sh.n, sh.k
			runs := ceilDiv(n, GatherRun)
			// gathered returns a rows×n matrix with random offsets, or,
			// if contiguous, stored as plain rows of n values.
			gathered := func(rows int, contiguous bool) (Gathered, []float32) {
				g := Gathered{Src: randSlice(rng, 1500+3900+GatherRun), Rows: make([]int32, rows), Runs: make([]int32, runs)}
				for j := range g.Rows {
					g.Rows[j] = int32(rng.IntN(1500))
				}
				for r := range g.Runs {
					g.Runs[r] = int32(rng.IntN(3900))
				}
				if contiguous {
					g.Src = randSlice(rng, rows*n) // no slack: masked loads
					for j := range g.Rows {
						g.Rows[j] = int32(j * n)
					}
					for r := range g.Runs {
						g.Runs[r] = int32(r * GatherRun)
					}
				}
				x := make([]float32, rows*n) // stored out
				for j := 0; j < rows; j++ {
					for q := 0; q < n; q++ {
						x[j*n+q] = g.Src[int(g.Rows[j])+int(g.Runs[q/GatherRun])+q%GatherRun]
					}
				}
				return g, x
			}
			ga, am := gathered(m, trial%2 == 0)
			gb, bt := gathered(k, false)
			for _, beta := range []float32{0, 1} {
				ldc := k + 3
				c0 := randSlice(rng, m*ldc)
				if beta == 0 {
					for i := range c0 {
						c0[i] = float32(math.NaN())
					}
				}
				want := append([]float32(nil), c0...)
				e.SgemmSerial(false, true, m, k, n, 1, am, n, bt, n, beta, want, ldc)
				got := append([]float32(nil), c0...)
				e.SgemmGatherT(m, n, k, ga, gb, beta, got, ldc)
				for i := 0; i < m; i++ {
					for j := 0; j < ldc; j++ {
						x, y := got[i*ldc+j], want[i*ldc+j]
						if math.Float32bits(x) != math.Float32bits(y) && !(math.IsNaN(float64(x)) && math.IsNaN(float64(y))) {
							t.Fatalf("m=%d n=%d k=%d beta=%g: c[%d][%d] = %g, SgemmSerial gives %g", m, n, k, beta, i, j, x, y)
						}
					}
				}
			}
		}
	})
}
