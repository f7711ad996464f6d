package infer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/proxgen/proxgen/internal/impl"
	"github.com/proxgen/proxgen/nn/internal/nntest"
	"github.com/proxgen/proxgen/nn/models"
)

// TestResNetPlanChainsSparseBlocks checks which blocks of a sparse
// ResNet-20 (option-B shortcuts) the compiled plan chains: every block's two
// convolutions (both sparse, stride 1 into stride 1), and the identity blocks
// also in the padded layout; none in the dense network (which runs on
// this plan with nchwc's kernels off). (New runs a network with every
// convolution sparse on planarPlan.)
func TestResNetPlanChainsSparseBlocks(t *testing.T) {
	impl.Select("nchwc", impl.Generic)
	defer impl.Reset("nchwc")
	for _, zeros := range []float64{0, 0.95} {
		spec := models.Spec{Model: "resnet20", Width: 0.5, Shortcut: "B"}
		net, err := spec.Build()
		if err != nil {
			t.Fatal(err)
		}
		nntest.ZeroWeights(net, rand.New(rand.NewPCG(1, 2)), zeros)
		net.SetTraining(false)
		r, _ := network(net)
		sparse := map[string]bool{}
		for _, l := range report(net, prepOptions{MinZeros: 0.9}, true).Layers {
			sparse[l.Name] = l.Sparse
		}
		rp := newResNetPlan(r, sparse)
		for i, b := range rp.blocks {
			sparse := zeros > 0
			// Blocks 3 and 6 open a stage with a strided conv1, which
			// does not chain.
			wantChained := sparse && (i == 0 || i%3 != 0)
			wantPadded := wantChained && b.shortcut == nil
			if b.chained != wantChained || b.padded != wantPadded {
				t.Errorf("zeros %g block %d: chained %v padded %v, want %v %v", zeros, i, b.chained, b.padded, wantChained, wantPadded)
			}
		}
	}
}

// TestTrunkOrder checks trunkOrder on the writers of a trunk of 24
// channels (blocks of 16 and 8) with 1 input channel and tap: filters
// zero in channels 1, 3, …, 15 of one writer are moved into the last
// block, those zero in most writers first, the others kept in order, and
// in that block the channels whose filters are nonzero in a writer first; a
// writer whose zeros fill whole blocks as they are (SIMD-block sparsity)
// keeps the order, where moving would leave more nonzero filter vectors.
func TestTrunkOrder(t *testing.T) {
	writer := func(zero func(o int) bool) *directConv {
		c := &directConv{out: shape{24, 1, 1}, w: make([]float32, 24*2)}
		for o := range 24 {
			for i := range 2 {
				if !zero(o) {
					c.w[o*2+i] = 1
				}
			}
		}
		return c
	}
	odd := writer(func(o int) bool { return o < 16 && o%2 == 1 })
	some := writer(func(o int) bool { return o == 3 || o == 5 })
	// In the last block, the channels that the second writer needs first.
	want := []int{0, 2, 4, 6, 8, 10, 12, 14, 16, 17, 18, 19, 20, 21, 22, 23, 1, 7, 9, 11, 13, 15, 3, 5}
	if got := trunkOrder([]*directConv{odd, some}); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Nine zero filters, eight places: those zero in both writers (3, 5,
	// 15, 17) first, then the first (13 left out).
	nine := writer(func(o int) bool { return o < 18 && o%2 == 1 })
	want = []int{0, 2, 4, 6, 8, 10, 12, 13, 14, 16, 18, 19, 20, 21, 22, 23, 1, 7, 9, 11, 3, 5, 15, 17}
	if got := trunkOrder([]*directConv{nine, writer(func(o int) bool { return o == 3 || o == 5 || o == 15 || o == 17 })}); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Whole blocks zero in three writers: moving the odd channels would
	// mix them.
	blocks := writer(func(o int) bool { return o >= 16 })
	if got := trunkOrder([]*directConv{odd, blocks, blocks, blocks}); got != nil {
		t.Fatalf("order %v, want none", got)
	}
	if got := trunkOrder([]*directConv{writer(func(int) bool { return false })}); got != nil {
		t.Fatalf("dense writers: order %v, want none", got)
	}
}
