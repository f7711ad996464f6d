//go:build !purego

package blas

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPackAsmMatchesGo packs the same blocks with and without the AVX-512
// packing routines and requires identical panels.
func TestPackAsmMatchesGo(t *testing.T) {
	if gatherPack == nil || copyPack == nil {
		t.Skip("no assembly packing on this CPU")
	}
	gp, cp := gatherPack, copyPack
	defer func() { gatherPack, copyPack = gp, cp }()
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
		pack := func(asm bool) (pa, pb []float32) {
			gatherPack, copyPack = nil, nil
			if asm {
				gatherPack, copyPack = gp, cp
			}
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
		ga, gb := pack(false)
		aa, ab := pack(true)
		for i := range ga {
			if math.Float32bits(ga[i]) != math.Float32bits(aa[i]) {
				t.Fatalf("packA trans=%v ld=%d i0=%d mcb=%d pc=%d kcb=%d mr=%d: [%d] = %g with asm, %g in Go", trans, ld, i0, mcb, pc, kcb, mr, i, aa[i], ga[i])
			}
		}
		for i := range gb {
			if math.Float32bits(gb[i]) != math.Float32bits(ab[i]) {
				t.Fatalf("packB trans=%v ld=%d j0=%d ncb=%d pc=%d kcb=%d nr=%d: [%d] = %g with asm, %g in Go", trans, ld, i0, mcb, pc, kcb, nr, i, ab[i], gb[i])
			}
		}
	}
}
