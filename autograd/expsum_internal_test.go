package autograd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sameFloat32 reports whether a and b are equal bit for bit or both NaN.
func sameFloat32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestExpBlocksAVX2MatchesGo checks that the AVX2 kernel of expShiftSum
// stores the same exponentials and the same four lane sums as the Go loop,
// bit for bit, over rows mixing ordinary logits with values that underflow,
// overflow, hit the clamps, subnormal results, infinities and NaN, with
// and without dst, and that expShiftSum agrees with exp32 element by
// element.
func TestExpBlocksAVX2MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	special := []float32{0, float32(math.Copysign(0, -1)), -87.3, -103.9, -149.9, -150, -151, -1e30, 88.7, 89, 89.5, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30}
	for _, n := range []int{4, 8, 36, 1000} {
		for trial := range 20 {
			row := make([]float32, n)
			for i := range row {
				if trial%2 == 1 && rng.IntN(8) == 0 {
					row[i] = special[rng.IntN(len(special))]
				} else {
					row[i] = float32(rng.NormFloat64() * 6)
				}
			}
			m := rowMax(row)
			if trial%3 == 2 {
				m = float32(rng.NormFloat64() * 40) // shifts far from the maximum
			}
			var want [4]float64
			wantDst := make([]float32, n)
			expBlocksGo(wantDst, row, m, &want)
			for i, v := range row {
				if e := exp32(v - m); !sameFloat32(wantDst[i], e) {
					t.Fatalf("n=%d: expBlocksGo element %d = %v, exp32 gives %v", n, i, wantDst[i], e)
				}
			}
			if !haveAVX2 {
				continue
			}
			for _, store := range []bool{true, false} {
				got := [4]float64{1, 2, 3, 4} // both add to s
				wantS := got
				expBlocksGo(nil, row, m, &wantS)
				gotDst := make([]float32, n)
				var d *float32
				if store {
					d = &gotDst[0]
				}
				expBlocksAVX2(d, &row[0], n, m, &got)
				for i := range gotDst {
					want := wantDst[i]
					if !store {
						want = 0
					}
					if !sameFloat32(gotDst[i], want) {
						t.Fatalf("n=%d trial %d store=%v: element %d (x−m = %v) = %v, want %v", n, trial, store, i, row[i]-m, gotDst[i], want)
					}
				}
				for l := range got {
					if math.Float64bits(got[l]) != math.Float64bits(wantS[l]) && !(got[l] != got[l] && wantS[l] != wantS[l]) {
						t.Fatalf("n=%d trial %d store=%v: lane %d sum %v, want %v", n, trial, store, l, got[l], wantS[l])
					}
				}
			}
		}
	}
}

// TestExpShiftSumTail checks expShiftSum on lengths that are not multiples
// of four against the plain sum of exp32 in its documented lane order.
func TestExpShiftSumTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for n := range 23 {
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 3)
		}
		m := rowMax(row)
		var s [4]float64
		want := make([]float32, n)
		for j, v := range row {
			want[j] = exp32(v - m)
			l := j % 4
			if j >= n&^3 {
				l = 0
			}
			s[l] += float64(want[j])
		}
		dst := make([]float32, n)
		if got, w := expShiftSum(dst, row, m), (s[0]+s[1])+(s[2]+s[3]); got != w {
			t.Errorf("n=%d: sum %v, want %v", n, got, w)
		}
		if got, w := expShiftSum(nil, row, m), (s[0]+s[1])+(s[2]+s[3]); got != w {
			t.Errorf("n=%d without dst: sum %v, want %v", n, got, w)
		}
		for j := range dst {
			if dst[j] != want[j] {
				t.Errorf("n=%d: term %d = %v, want %v", n, j, dst[j], want[j])
			}
		}
	}
}
