package parallel

import (
	"fmt"
	"testing"
)

var sink float64

// spinWork is about n ns of arithmetic.
func spinWork(n int) float64 {
	s := 0.0
	for i := range n {
		s += float64(i) * 1e-9
	}
	return s
}

// BenchmarkPhases times 19 phases of 2 parts of about work iterations of
// arithmetic each (a ResNet-20's layers split over 2 workers), run by
// Phases (one call of For, a barrier between phases), by one call of For
// per phase, and serially: the cost of a meeting of the workers.
func BenchmarkPhases(b *testing.B) {
	defer SetWorkers(SetWorkers(2))
	for _, work := range []int{0, 1000, 5000} {
		var res [2]float64
		body := func(ph, k int) { res[k] += spinWork(work) }
		b.Run(fmt.Sprintf("phases/work=%d", work), func(b *testing.B) {
			for range b.N {
				Phases(2, 19, body)
			}
		})
		b.Run(fmt.Sprintf("for/work=%d", work), func(b *testing.B) {
			for range b.N {
				for ph := range 19 {
					For(2, 1, func(lo, hi int) {
						for k := lo; k < hi; k++ {
							body(ph, k)
						}
					})
				}
			}
		})
		b.Run(fmt.Sprintf("serial/work=%d", work), func(b *testing.B) {
			for range b.N {
				for ph := range 19 {
					body(ph, 0)
					body(ph, 1)
				}
			}
		})
		sink += res[0] + res[1]
	}
}
