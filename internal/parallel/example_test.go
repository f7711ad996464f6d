package parallel_test

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/parallel"
)

// ExampleFor sums 1..1000 in chunks of 64 with one partial sum per chunk,
// added in chunk order afterwards: the chunks depend only on the length
// and the grain, so the result is the same for every number of workers.
func ExampleFor() {
	const n, grain = 1000, 64
	partial := make([]float64, parallel.Chunks(n, grain))
	parallel.For(n, grain, func(lo, hi int) {
		s := 0.0
		for i := lo; i < hi; i++ {
			s += float64(i + 1)
		}
		partial[lo/grain] = s
	})
	total := 0.0
	for _, s := range partial {
		total += s
	}
	fmt.Println(len(partial), "chunks, sum", total)
	// Output:
	// 16 chunks, sum 500500
}
