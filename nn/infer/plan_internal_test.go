package infer

import (
	"math/rand/v2"
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
