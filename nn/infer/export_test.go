package infer

import (
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/models"
)

// NewPlanar is New with every convolution sparse on planarPlan (whole:
// each image of a call with fewer images than workers kept on one), or
// false when the network does not compile there.
func NewPlanar(net nn.Module, spec models.Spec, whole bool) (*Model, bool) {
	m, err := New(net, spec, Dense())
	if err != nil {
		return nil, false
	}
	r, _ := network(net)
	if r == nil {
		return nil, false
	}
	p := newPlanarPlan(r, false, planarDefaults())
	if p == nil {
		return nil, false
	}
	p.whole = whole
	m.plan, m.sparse = p, report(net, prepOptions{MinZeros: minConvZeros(net)}, true)
	m.sparse.Layers[len(m.sparse.Layers)-1].Sparse = false // the classifier
	return m, true
}

// SetBandOnly makes m's planar plan run the single convolutions of a
// split image on band 0 alone (planarPlan.bandOnly).
func SetBandOnly(m *Model) {
	m.plan.(*planarPlan).bandOnly = true
}

// NewDirect is New with the network on the channel-blocked layout's
// direct convolutions alone (no Winograd), or false when it does not
// compile there.
func NewDirect(net nn.Module, spec models.Spec) (*Model, bool) {
	m, err := New(net, spec, Dense())
	if err != nil {
		return nil, false
	}
	r, v := network(net)
	p := newDirectPlan(r, v, map[string]bool{})
	if p == nil {
		return nil, false
	}
	m.plan = p
	return m, true
}

// WithSplit returns m with a call of fewer images than workers split over
// k workers (directPlan.split), or false when m does not run on a
// directPlan.
func WithSplit(m *Model, k int) (*Model, bool) {
	pl := m.plan
	if b, ok := pl.(*byBatch); ok {
		pl = b.small
	}
	dp, ok := pl.(*directPlan)
	if !ok {
		return nil, false
	}
	p := *dp
	p.split = k
	return &Model{net: m.net, spec: m.spec, norm: m.norm, sparse: m.sparse, plan: &p}, true
}

// WinoMACCost and WinoTransformCost are the constants of winoPays.
const (
	WinoMACCost       = winoMACCost
	WinoTransformCost = winoTransformCost
)

// SkippedBlocks returns how many blocks of 16 output channels the
// Winograd convolutions of m's channel-blocked plan skip (zero filters
// alone, nchwc.WinoFilter.ZeroBlocks), at batch 1.
func SkippedBlocks(m *Model) int {
	pl := m.plan
	if b, ok := pl.(*byBatch); ok {
		pl = b.small
	}
	dp, ok := pl.(*directPlan)
	if !ok {
		return 0
	}
	d, ok := dp.net.(*directResNet)
	if !ok {
		return 0
	}
	n := 0
	count := func(c *directConv) {
		if c != nil && c.wf != nil {
			n += c.wf.ZeroBlocks()
		}
	}
	for i := range d.blocks {
		b := &d.blocks[i]
		count(&b.conv1)
		count(&b.conv2)
		count(b.shortcut)
	}
	return n
}
