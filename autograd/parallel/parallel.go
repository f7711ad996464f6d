// Package parallel runs loops over a reusable pool of worker goroutines.
//
// Work is split into chunks whose boundaries depend only on the loop length
// and the grain size, never on the number of workers, so a computation that
// writes each chunk's result to its own slot and then combines the slots in
// chunk order gives bit-identical results for every GOMAXPROCS value.
//
// The pool starts lazily with runtime.GOMAXPROCS(0) workers (the caller of
// For counts as one of them). SetWorkers changes the number of workers used
// by later calls. Calls may nest: a nested For that finds no idle worker runs
// its chunks on the calling goroutine, so nesting never deadlocks.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// job is one call of For shared between the caller and helping workers.
type job struct {
	n, grain int
	chunks   int64
	next     atomic.Int64
	body     func(lo, hi int)
	wg       sync.WaitGroup
}

// run takes chunks until none are left.
func (j *job) run() {
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			return
		}
		lo := int(c) * j.grain
		hi := min(lo+j.grain, j.n)
		j.body(lo, hi)
	}
}

var (
	mu       sync.Mutex
	started  int // worker goroutines started so far
	limit    atomic.Int64
	requests = make(chan *job)
)

func init() {
	limit.Store(int64(runtime.GOMAXPROCS(0)))
}

// SetWorkers sets the number of goroutines (including the caller) that later
// calls to For may use; n < 1 means runtime.GOMAXPROCS(0). It returns the
// previous value. Results do not depend on this setting, only speed does.
func SetWorkers(n int) int {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return int(limit.Swap(int64(n)))
}

// Workers reports the number of goroutines For may use.
func Workers() int { return int(limit.Load()) }

// ensure starts worker goroutines so that at least n-1 helpers exist.
func ensure(n int) {
	mu.Lock()
	defer mu.Unlock()
	for started < n-1 {
		started++
		go func() {
			for j := range requests {
				j.run()
				j.wg.Done()
			}
		}()
	}
}

// Chunks returns the number of chunks For(n, grain, ...) splits its range
// into, so callers can size per-chunk partial results.
func Chunks(n, grain int) int {
	if n <= 0 {
		return 0
	}
	if grain < 1 {
		grain = 1
	}
	return (n + grain - 1) / grain
}

// For calls body(lo, hi) for the consecutive ranges [0,grain), [grain,2·grain),
// ... covering [0, n), possibly concurrently, and returns when all calls have
// returned. The ranges depend only on n and grain. body must be safe to call
// from several goroutines at once on disjoint ranges.
func For(n, grain int, body func(lo, hi int)) {
	chunks := Chunks(n, grain)
	if chunks == 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	w := min(Workers(), chunks)
	if w <= 1 {
		for lo := 0; lo < n; lo += grain {
			body(lo, min(lo+grain, n))
		}
		return
	}
	ensure(w)
	j := &job{n: n, grain: grain, chunks: int64(chunks), body: body}
	for i := 0; i < w-1; i++ {
		j.wg.Add(1)
		select {
		case requests <- j:
		default:
			// Every worker is busy (for example in an enclosing For):
			// the caller does the work itself.
			j.wg.Done()
		}
	}
	j.run()
	j.wg.Wait()
}

// Grain returns a grain size that splits n items into about 4 chunks per
// available worker but never below minGrain items per chunk. Because the
// result depends on the worker count, use it only where chunk boundaries do
// not affect results (no cross-chunk reductions).
func Grain(n, minGrain int) int {
	g := (n + 4*Workers() - 1) / (4 * Workers())
	return max(g, minGrain, 1)
}
