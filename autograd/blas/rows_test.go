package blas

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSgemmRows checks SgemmRows against Sgemm on the gathered matrix B,
// which must give identical bits (the same kernel code reads the same
// values), and against the float64 reference, for every kernel, shapes on
// every path (in place, gathered, edge panels, m above inPlaceM) and rows
// that overlap as in an im2col view.
func TestSgemmRows(t *testing.T) {
	cases := []struct {
		m, n, k int
		transA  bool
		beta    float32
	}{
		{1, 1, 1, false, 0}, {5, 33, 7, false, 1}, {12, 64, 9, true, 0.5},
		{16, 1088, 144, true, 0}, {37, 100, 50, false, 0}, {64, 80, 576, true, 1},
		{13, 31, 3, true, 0}, {500, 70, 20, true, 0}, {3, 200, 600, false, 0},
	}
	forEachKernel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for i, tc := range cases {
			base := randSlice(rng, tc.n+tc.k*3+50)
			rowOff := make([]int, tc.k)
			for p := range rowOff {
				rowOff[p] = rng.IntN(len(base) - tc.n + 1)
			}
			g := make([]float32, tc.k*tc.n)
			for p, off := range rowOff {
				copy(g[p*tc.n:(p+1)*tc.n], base[off:])
			}
			ar, ac := tc.m, tc.k
			if tc.transA {
				ar, ac = tc.k, tc.m
			}
			lda := ac + 2
			a := randSlice(rng, ar*lda)
			ldc := tc.n + 1
			c0 := randSlice(rng, tc.m*ldc)
			want := slices.Clone(c0)
			Sgemm(tc.transA, false, tc.m, tc.n, tc.k, 1.5, a, lda, g, tc.n, tc.beta, want, ldc)
			got := slices.Clone(c0)
			if i%2 == 0 {
				SgemmRows(tc.transA, tc.m, tc.n, tc.k, 1.5, a, lda, base, rowOff, tc.beta, got, ldc)
			} else {
				SgemmRowsSerial(tc.transA, tc.m, tc.n, tc.k, 1.5, a, lda, base, rowOff, tc.beta, got, ldc)
			}
			ref, mag := refGemm(tc.transA, false, tc.m, tc.n, tc.k, 1.5, a, lda, g, tc.n, tc.beta, c0, ldc)
			for r := 0; r < tc.m; r++ {
				for j := 0; j < ldc; j++ {
					x, y := got[r*ldc+j], want[r*ldc+j]
					if math.Float32bits(x) != math.Float32bits(y) {
						t.Fatalf("case %d %+v: C[%d][%d] = %g, Sgemm on the gathered B gives %g", i, tc, r, j, x, y)
					}
					if j < tc.n {
						tol := 1e-30 + 1.2e-7*float64(tc.k+4)*mag[r*tc.n+j]
						if d := math.Abs(float64(x) - ref[r*tc.n+j]); !(d <= tol) {
							t.Fatalf("case %d %+v: C[%d][%d] = %g, reference %g", i, tc, r, j, x, ref[r*tc.n+j])
						}
					}
				}
			}
		}
	})
}

func TestSgemmRowsPanics(t *testing.T) {
	b := make([]float32, 10)
	c := make([]float32, 8)
	a := make([]float32, 8)
	for _, tc := range []struct {
		rowOff []int
		want   string
	}{
		{[]int{0}, "1 row offsets for the 2 rows"},
		{[]int{0, 7}, "row 1 of B at offset 7 with 4 columns does not fit len(b)=10"},
		{[]int{-1, 0}, "row 0 of B at offset -1"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) || !strings.Contains(s, "blas.SgemmRows") {
					t.Errorf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			SgemmRows(false, 2, 4, 2, 1, a, 2, b, tc.rowOff, 0, c, 4)
		}()
	}
}
