package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
)

// TestPackMatchesGo packs the same blocks with every implementation of
// internal/impl (on amd64 with AVX-512, the assembly packing routines)
// and requires the panels of the Go loops.
func TestPackMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := 0; trial < 60; trial++ {
		mr, nr := []int{12, 6, 4}[trial%3], []int{32, 16, 4}[trial%3]
		ld := 1 + rng.IntN(90)
		rows := 1 + rng.IntN(70)
		src := randSlice(rng, (rows+ld)*(ld+70))
		i0, pc := rng.IntN(3), rng.IntN(3)
		mcb := 1 + rng.IntN(min(rows, ld-i0+1)+1)
		kcb := 1 + rng.IntN(max(1, ld-pc))
		trans := trial%2 == 0
		if i0+mcb > ld || pc+kcb > ld {
			continue
		}
		pack := func() (pa, pb []float32) {
			pa = make([]float32, roundUp(mcb, mr)*kcb)
			pb = make([]float32, roundUp(mcb, nr)*kcb)
			for i := range pa {
				pa[i] = float32(math.NaN())
			}
			for i := range pb {
				pb[i] = float32(math.NaN())
			}
			packA(trans, src, ld, i0, mcb, pc, kcb, mr, pa)
			packB(trans, src, ld, i0, mcb, pc, kcb, nr, 0, ceilDiv(mcb, nr), pb)
			return pa, pb
		}
		var ga, gb []float32
		impl.ForEach("blas", func(name string) {
			aa, ab := pack()
			if name == impl.Generic {
				ga, gb = aa, ab
				return
			}
			for i := range ga {
				if math.Float32bits(ga[i]) != math.Float32bits(aa[i]) {
					t.Fatalf("packA trans=%v ld=%d i0=%d mcb=%d pc=%d kcb=%d mr=%d: [%d] = %g with %s, %g in Go", trans, ld, i0, mcb, pc, kcb, mr, i, aa[i], name, ga[i])
				}
			}
			for i := range gb {
				if math.Float32bits(gb[i]) != math.Float32bits(ab[i]) {
					t.Fatalf("packB trans=%v ld=%d j0=%d ncb=%d pc=%d kcb=%d nr=%d: [%d] = %g with %s, %g in Go", trans, ld, i0, mcb, pc, kcb, nr, i, ab[i], name, gb[i])
				}
			}
		})
	}
}
