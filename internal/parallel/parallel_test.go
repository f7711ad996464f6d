package parallel

import (
	"fmt"
	"math"
	"sync"
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

// TestForRespectsWorkerLimit starts more pool goroutines than a later
// limit allows and checks that back-to-back calls, which polling workers
// join without being handed the job, never run more bodies at once than
// the limit, and still cover every index once.
func TestForRespectsWorkerLimit(t *testing.T) {
	old := SetWorkers(6)
	defer SetWorkers(old)
	For(6, 1, func(lo, hi int) {}) // starts 5 pool goroutines
	for _, limit := range []int{1, 2, 3} {
		SetWorkers(limit)
		var active, peak atomic.Int32
		var sink atomic.Uint64
		for range 30 {
			hits := make([]atomic.Int32, 64)
			For(len(hits), 1, func(lo, hi int) {
				a := active.Add(1)
				for p := peak.Load(); a > p && !peak.CompareAndSwap(p, a); p = peak.Load() {
				}
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
				s := 0.0
				for i := range 20000 { // long enough for helpers to join
					s += math.Sqrt(float64(i))
				}
				sink.Store(math.Float64bits(s))
				active.Add(-1)
			})
			for i := range hits {
				if n := hits[i].Load(); n != 1 {
					t.Fatalf("limit %d: index %d visited %d times", limit, i, n)
				}
			}
		}
		if p := peak.Load(); p > int32(limit) {
			t.Errorf("limit %d: %d bodies ran at once", limit, p)
		}
	}
}

// TestForFromSeveralGoroutines runs independent For calls from several
// goroutines at once, as concurrent models do: the offered job changes
// under the polling workers, and every call must still cover its range
// once and return only after all of its chunks have finished.
func TestForFromSeveralGoroutines(t *testing.T) {
	old := SetWorkers(4)
	defer SetWorkers(old)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 300 {
				n := 37 + 13*g + it%50
				hits := make([]atomic.Int32, n)
				For(n, 3, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					if hits[i].Load() != 1 {
						errs <- fmt.Sprintf("goroutine %d call %d: index %d visited %d times", g, it, i, hits[i].Load())
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestPhases checks that Phases makes every call once, that no call of a
// phase starts before every call of the earlier phase has returned, and
// that it completes with 1, 2 and 8 workers, nested inside For (no idle
// worker: the caller alone) and with more parts than workers.
func TestPhases(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		old := SetWorkers(workers)
		for _, tc := range []struct{ parts, phases int }{{1, 5}, {2, 40}, {3, 17}, {16, 9}} {
			check := func(t *testing.T) {
				hits := make([]atomic.Int32, tc.parts*tc.phases)
				var finished atomic.Int64 // calls returned
				Phases(tc.parts, tc.phases, func(ph, k int) {
					if n := finished.Load(); n < int64(ph*tc.parts) {
						t.Errorf("phase %d part %d started after %d calls returned, want %d", ph, k, n, ph*tc.parts)
					}
					hits[ph*tc.parts+k].Add(1)
					finished.Add(1)
				})
				for i := range hits {
					if n := hits[i].Load(); n != 1 {
						t.Fatalf("phase %d part %d called %d times", i/tc.parts, i%tc.parts, n)
					}
				}
			}
			t.Run(fmt.Sprintf("workers=%d/parts=%d/phases=%d", workers, tc.parts, tc.phases), check)
			t.Run(fmt.Sprintf("workers=%d/parts=%d/phases=%d/nested", workers, tc.parts, tc.phases), func(t *testing.T) {
				For(workers, 1, func(int, int) { check(t) })
			})
		}
		SetWorkers(old)
	}
}
