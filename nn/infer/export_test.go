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
	p := newPlanarPlan(r, false)
	if p == nil {
		return nil, false
	}
	p.whole = whole
	m.plan, m.sparse = p, report(net, prepOptions{MinZeros: minConvZeros(net)}, true)
	m.sparse.Layers[len(m.sparse.Layers)-1].Sparse = false // the classifier
	return m, true
}
