package prox

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/optim/internal/opttest"
	"github.com/proxgen/proxgen/optim/internal/proxk"
)

// TestBlockGroupsPaddingChangesNothing checks that the group maps of a
// last, partial block (8 of 16 channels) give the same result gathered
// with its padding (zeros, with η padded like the group's own) as on the
// existing coordinates alone, for both group regularizers, and that the
// spellings ":block" parse and print.
func TestBlockGroupsPaddingChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shape := []int{24, 5, 3, 3}
	l := proxk.LayoutOf(int(ByBlock), shape)
	n := l.Len()
	z, eta := make([]float32, n), make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
		eta[i] = float32(opttest.LogU(rng, 1e-3, 1))
	}
	for _, name := range []string{"gl0:block", "gl21:block"} {
		r, err := Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		gr := r.(GroupRegularizer)
		if fmt.Sprint(r) != name || gr.GroupBy() != ByBlock {
			t.Fatalf("Parse(%q) = %v grouping %v", name, r, gr.GroupBy())
		}
		zeroed := 0
		for g := l.Count / 2; g < l.Count; g++ { // the last block
			zb, eb := make([]float32, l.Size), make([]float32, l.Size)
			l.Gather(zb, z, g)
			l.Gather(eb, eta, g)
			l.PadLike(eb, g)
			const rows = 8
			want := slices.Clone(zb[:rows])
			for _, lam := range []float32{0.01, 0.5, 3, 100, 1e4} {
				got := slices.Clone(zb)
				r.Prox(got, got, eb, lam)
				r.Prox(want, zb[:rows], eb[:rows], lam)
				if !slices.Equal(got[:rows], want) || slices.ContainsFunc(got[rows:], func(v float32) bool { return v != 0 }) {
					t.Fatalf("%s group %d λ %v: padded %v, alone %v", name, g, lam, got, want)
				}
				if want[0] == 0 {
					zeroed++
				}
			}
		}
		if zeroed == 0 {
			t.Errorf("%s: no group zeroed at any λ: the check saw only kept groups", name)
		}
	}
	if nz, groups := GroupNonZero(ByBlock, z, shape); nz != groups || groups != 2*45 {
		t.Errorf("GroupNonZero = %d of %d, want 90 of 90", nz, groups)
	}
}
