package parallel

import (
	"math"
	"sync/atomic"
	"testing"
)

func TestForCoversRangeOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		old := SetWorkers(workers)
		for _, n := range []int{0, 1, 7, 1000, 4097} {
			hits := make([]atomic.Int32, n)
			For(n, 64, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if hits[i].Load() != 1 {
					t.Fatalf("workers=%d n=%d: index %d visited %d times", workers, n, i, hits[i].Load())
				}
			}
		}
		SetWorkers(old)
	}
}

func TestChunkedReductionIndependentOfWorkers(t *testing.T) {
	data := make([]float32, 100003)
	for i := range data {
		data[i] = float32(math.Sin(float64(i))) * 1e3
	}
	sum := func() float32 {
		const grain = 1000
		partial := make([]float32, Chunks(len(data), grain))
		For(len(data), grain, func(lo, hi int) {
			var s float32
			for _, v := range data[lo:hi] {
				s += v
			}
			partial[lo/grain] = s
		})
		var s float32
		for _, p := range partial {
			s += p
		}
		return s
	}
	old := SetWorkers(1)
	want := sum()
	for _, w := range []int{2, 3, 8} {
		SetWorkers(w)
		if got := sum(); got != want {
			t.Errorf("workers=%d: sum %v, want %v", w, got, want)
		}
	}
	SetWorkers(old)
}

func TestNestedForDoesNotDeadlock(t *testing.T) {
	old := SetWorkers(4)
	defer SetWorkers(old)
	var total atomic.Int64
	For(16, 1, func(lo, hi int) {
		For(100, 10, func(lo, hi int) { total.Add(int64(hi - lo)) })
	})
	if total.Load() != 1600 {
		t.Fatalf("nested total %d, want 1600", total.Load())
	}
}
