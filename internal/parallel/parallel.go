// Package parallel runs loops over a reusable pool of worker goroutines.
//
// Work is split into chunks whose boundaries depend only on the loop length
// and the grain size, never on the number of workers, so a computation that
// writes each chunk's result to its own slot and then combines the slots in
// chunk order gives bit-identical results for every GOMAXPROCS value.
//
// The pool starts lazily with runtime.GOMAXPROCS(0) workers (the caller of
// For counts as one of them). SetWorkers changes the number of workers used
// by later calls. The pool and its size belong to the process: only
// programs set the size (cmd/internal/compute.SetThreads, with GOMAXPROCS),
// and tests; library code never does, and its results do not depend on
// it. Calls may nest: a nested For that finds no idle worker runs
// its chunks on the calling goroutine, so nesting never deadlocks. An idle
// worker polls for the next call for a short while (spinFor) before it
// parks, so calls in quick succession find their helpers awake. Phases
// runs a sequence of short phases in one call of For, with a barrier
// between phases and each part kept on one worker where it can.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle worker keeps polling for the next call of
// For before it parks, and how long the caller of For polls for its helpers
// to finish before it blocks. Waking a parked goroutine on another core
// takes tens of microseconds (a futex wake of an idle OS thread, more in a
// VM): as long as a small GEMM. Loops that call For back to back, such as
// the time steps of a recurrent network, would otherwise run every call on
// the caller alone while the helper is still waking up.
const spinFor = 50 * time.Microsecond

// job is one call of For shared between the caller and helping workers.
type job struct {
	n, grain int
	chunks   int64
	next     atomic.Int64 // the next chunk to take
	done     atomic.Int64 // chunks finished
	seats    atomic.Int64 // helpers that may still join
	body     func(lo, hi int)
	fin      chan struct{} // closed when the last chunk has finished
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
		if j.done.Add(1) == j.chunks {
			close(j.fin)
		}
	}
}

// join takes one of j's seats for a helper and reports whether it got one.
func (j *job) join() bool {
	for {
		s := j.seats.Load()
		if s <= 0 {
			return false
		}
		if j.seats.CompareAndSwap(s, s-1) {
			return true
		}
	}
}

// open reports whether a helper could still take a chunk of j.
func (j *job) open() bool {
	return j.seats.Load() > 0 && j.next.Load() < j.chunks
}

var (
	mu       sync.Mutex
	started  int // worker goroutines started so far
	limit    atomic.Int64
	requests = make(chan *job)   // hands jobs to parked workers
	offered  atomic.Pointer[job] // the latest job, for polling workers
)

func init() {
	limit.Store(int64(runtime.GOMAXPROCS(0)))
}

// SetWorkers sets the number of goroutines (including the caller) that later
// calls to For may use, in the whole process; n < 1 means
// runtime.GOMAXPROCS(0). It returns the previous value. Results do not
// depend on this setting, only speed does. For programs and tests only
// (see the package documentation).
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
		go worker()
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
	j := &job{n: n, grain: grain, chunks: int64(chunks), body: body, fin: make(chan struct{})}
	j.seats.Store(int64(w - 1))
	offered.Store(j)
	// Hand seats to parked workers while there are any; polling workers
	// take the seats left over.
	for j.join() {
		select {
		case requests <- j:
			continue
		default:
			// No worker is parked: the others are polling or busy
			// (for example in an enclosing For).
			j.seats.Add(1)
		}
		break
	}
	j.run()
	offered.CompareAndSwap(j, nil)
	// Wait for chunks that helpers took: poll first, then block.
	for start, i := time.Now(), 0; j.done.Load() < j.chunks; i++ {
		if i%64 == 63 && time.Since(start) > spinFor {
			<-j.fin
			break
		}
	}
}

// worker is the loop of a pool goroutine: it polls for an offered job for
// spinFor after each job it ran, then parks until For hands it one.
func worker() {
	for {
		j := poll()
		if j == nil {
			j = <-requests
		}
		j.run()
	}
}

// poll returns the offered job once it has a free seat and chunks left,
// having taken a seat, or nil after spinFor without one.
func poll() *job {
	start := time.Now()
	for i := 0; ; i++ {
		if j := offered.Load(); j != nil && j.open() && j.join() {
			return j
		}
		if i%64 == 63 {
			if time.Since(start) > spinFor {
				return nil
			}
			runtime.Gosched()
		}
	}
}

// Grain returns a grain size that splits n items into about 4 chunks per
// available worker but never below minGrain items per chunk. Because the
// result depends on the worker count, use it only where chunk boundaries do
// not affect results (no cross-chunk reductions).
func Grain(n, minGrain int) int {
	g := (n + 4*Workers() - 1) / (4 * Workers())
	return max(g, minGrain, 1)
}

// Phases calls body(phase, part) once for every phase in [0, phases) and
// part in [0, parts), and returns when all calls have returned. Every call
// of a phase returns before any call of the next phase starts (a barrier
// between phases); the parts of one phase run concurrently on up to parts
// workers. Part k of every phase runs on the same worker where it can, so
// that it finds what its earlier phases wrote in that worker's cache: one
// call of For for all the phases, not one per phase, and a barrier that
// costs an atomic counter, not a meeting of the pool. A worker that has
// finished its own part of a phase takes any part of that phase that no
// worker has started (a late or descheduled worker's), so Phases also
// completes on the calling goroutine alone, when no worker is idle (a
// nested call) or the pool has one worker. Which goroutine runs a call
// depends on timing; the calls, their order within a part and the
// barriers do not, so a body whose parts write disjoint results gives the
// same results for every number of workers.
//
// A worker waiting at a barrier polls, and yields to the Go scheduler
// only after spinFor: Phases suits phases of microseconds, where parking
// would cost more than the phase, and two workers that yielded at once
// could trade their goroutines, and so their parts' data, between cores.
func Phases(parts, phases int, body func(phase, part int)) {
	if parts <= 0 || phases <= 0 {
		return
	}
	if parts == 1 || Workers() <= 1 {
		for ph := range phases {
			for k := range parts {
				body(ph, k)
			}
		}
		return
	}
	s := &phaseState{claim: make([]atomic.Int64, parts)}
	For(parts, 1, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			s.run(k, parts, phases, body)
		}
	})
}

// phaseState is the shared state of one call of Phases.
type phaseState struct {
	// claim[k] is the number of phases whose part k a worker has taken:
	// part k of phase ph is taken by the compare-and-swap of claim[k]
	// from ph to ph+1.
	claim []atomic.Int64
	// done counts the calls that have returned. A call of phase ph starts
	// only once every call of the earlier phases has returned, so done ≥
	// ph·parts means exactly that phases [0, ph) are complete.
	done atomic.Int64
}

// run is the loop of the worker that owns part own: phase by phase, its
// own part first, then any part no worker has taken.
func (s *phaseState) run(own, parts, phases int, body func(phase, part int)) {
	for ph := range phases {
		for i := range parts {
			k := (own + i) % parts
			if !s.claim[k].CompareAndSwap(int64(ph), int64(ph)+1) {
				continue
			}
			// Every part of phase ph−1 has been taken (each worker tries
			// them all before it moves on) by a worker that is running it.
			s.wait(int64(ph * parts))
			body(ph, k)
			s.done.Add(1)
		}
	}
}

// wait polls until done reaches n: for spinFor, then yielding to the Go
// scheduler between polls (so that a worker it waits for can run when
// there are fewer threads than workers).
func (s *phaseState) wait(n int64) {
	var start time.Time
	for i := 0; s.done.Load() < n; i++ {
		if i%64 != 63 {
			continue
		}
		switch {
		case start.IsZero():
			start = time.Now()
		case time.Since(start) > spinFor:
			runtime.Gosched()
		}
	}
}
