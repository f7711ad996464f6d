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
		kern := e.k
		rng := rand.New(rand.NewPCG(31, 32))
		for _, sh := range []struct{ m, n, k int }{
			{16, 64, 144}, {16, 1024, 144}, {12, 32, 9}, {5, 16, 3}, {13, 48, 300},
			{32, 80, 600}, {1, 17, 1}, {kern.inPlaceM + 3, 40, 70}, {29, 40, 513},
		} {
			m, n, k := sh.m, sh.n, sh.k
			g := randGathered(rng, k, n, 2000, 2000)
			ldb := n + 3 // B stored out, with a row stride past n
			b := storedOut(g, k, n, ldb)
			a := randSlice(rng, m*k)
			pa := e.PackA(true, m, k, a, m)
			ga := e.PackGatherA(true, m, k, a, m, nil)
			for _, beta := range []float32{0, 1} {
				ldc := n + 5
				c0 := cTarget(rng, m*ldc, beta)
				want := append([]float32(nil), c0...)
				pa.SgemmSerial(false, n, 1, b, ldb, beta, want, ldc)
				got := append([]float32(nil), c0...)
				ga.SgemmGather(n, g, beta, got, ldc)
				if i := firstBitDiff(got, want); i >= 0 {
					t.Fatalf("m=%d n=%d k=%d beta=%g: c[%d][%d] = %g, SgemmSerial gives %g", m, n, k, beta, i/ldc, i%ldc, got[i], want[i])
				}
			}
		}
	})
}

// randGathered returns a rows×n gathered matrix with row offsets below
// rowSpan and run offsets below runSpan in a random source.
func randGathered(rng *rand.Rand, rows, n, rowSpan, runSpan int) Gathered {
	g := Gathered{Src: randSlice(rng, rowSpan+runSpan+GatherRun), Rows: make([]int32, rows), Runs: make([]int32, ceilDiv(n, GatherRun))}
	for j := range g.Rows {
		g.Rows[j] = int32(rng.IntN(rowSpan))
	}
	for r := range g.Runs {
		g.Runs[r] = int32(rng.IntN(runSpan))
	}
	return g
}

// storedOut returns the rows×n gathered matrix g stored with row stride ld.
func storedOut(g Gathered, rows, n, ld int) []float32 {
	x := make([]float32, rows*ld)
	for j := 0; j < rows; j++ {
		for q := 0; q < n; q++ {
			x[j*ld+q] = g.Src[int(g.Rows[j])+int(g.Runs[q/GatherRun])+q%GatherRun]
		}
	}
	return x
}

// cTarget returns size random values for C, or NaN where beta == 0 says
// C must not be read.
func cTarget(rng *rand.Rand, size int, beta float32) []float32 {
	c := randSlice(rng, size)
	if beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN())
		}
	}
	return c
}

// firstBitDiff returns the first index where got and want differ in their
// bits (NaNs of any payload being equal), or -1.
func firstBitDiff(got, want []float32) int {
	for i := range got {
		x, y := got[i], want[i]
		if math.Float32bits(x) != math.Float32bits(y) && !(math.IsNaN(float64(x)) && math.IsNaN(float64(y))) {
			return i
		}
	}
	return -1
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
			ga := randGathered(rng, m, n, 1500, 3900)
			if trial%2 == 0 { // A as plain rows of n values, no slack: masked loads
				ga.Src = randSlice(rng, m*n)
				for j := range ga.Rows {
					ga.Rows[j] = int32(j * n)
				}
				for r := range ga.Runs {
					ga.Runs[r] = int32(r * GatherRun)
				}
			}
			gb := randGathered(rng, k, n, 1500, 3900)
			am, bt := storedOut(ga, m, n, n), storedOut(gb, k, n, n)
			for _, beta := range []float32{0, 1} {
				ldc := k + 3
				c0 := cTarget(rng, m*ldc, beta)
				want := append([]float32(nil), c0...)
				e.SgemmSerial(false, true, m, k, n, 1, am, n, bt, n, beta, want, ldc)
				got := append([]float32(nil), c0...)
				e.SgemmGatherT(m, n, k, ga, gb, beta, got, ldc)
				if i := firstBitDiff(got, want); i >= 0 {
					t.Fatalf("m=%d n=%d k=%d beta=%g: c[%d][%d] = %g, SgemmSerial gives %g", m, n, k, beta, i/ldc, i%ldc, got[i], want[i])
				}
			}
		}
	})
}
