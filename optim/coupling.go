package optim

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim/internal/proxk"
	"github.com/proxgen/proxgen/optim/prox"
)

// Coupling makes per-output-channel companion tensors members of the
// filter groups of a weight: coordinate c of every companion joins output
// filter c of Weight in one group of the weight's GroupRegularizer, so the
// group's proximal map (or subgradient) sees the filter's coordinates and
// the companions' coordinate c together, each with its own step size η
// under the same diagonal metric, and the penalty and the non-zero count
// treat them as one group.
//
// The typical companions are the batch-norm γ and β of the channel the
// filter produces: a zeroed filter alone leaves the channel at the
// constant β − γμ/σ, while a zero group (filter c, γ[c], β[c]) makes the
// channel exactly zero in training and evaluation mode (nn.ConvNorms finds
// these triples in a network).
//
// The weight must belong to a Group whose Reg is a GroupRegularizer that
// groups ByFilter; the companions have one element per output filter
// (Weight.Shape()[0]) and may belong to any Group of the same optimizer
// whose Reg is nil (typically the unregularized group of biases and
// batch-norm parameters). A companion takes its gradient step with its own
// group's hyperparameters (step size, weight decay); the group proximal
// map then uses the weight group's λ, and each member is clamped to its
// own group's Clip. A tensor is a companion of at most one weight. In a
// step where a companion is frozen or has no gradient, the weight's
// groups are proximal-mapped without it; when the weight is frozen or has
// no gradient, its companions take plain steps.
type Coupling struct {
	// Weight is the convolution or linear weight whose filter groups
	// grow.
	Weight *autograd.Tensor
	// Companions each hold one coordinate per output filter.
	Companions []*autograd.Tensor
}

// Couple adds the Coupling of weight with companions to the group of
// groups that holds weight, and reports whether it did: false when no
// group holds weight or the group's regularizer is not a GroupRegularizer
// grouping ByFilter (so callers can couple every candidate and let the
// regularizer decide).
func Couple(groups []*Group, weight *autograd.Tensor, companions ...*autograd.Tensor) bool {
	for _, g := range groups {
		for _, p := range g.Params {
			if p != weight {
				continue
			}
			gr, ok := g.Reg.(prox.GroupRegularizer)
			if !ok || gr.GroupBy() != prox.ByFilter {
				return false
			}
			g.Couplings = append(g.Couplings, Coupling{Weight: weight, Companions: companions})
			return true
		}
	}
	return false
}

// companionsOf returns the companions coupled with p in g, or nil.
func (g *Group) companionsOf(p *autograd.Tensor) []*autograd.Tensor {
	for _, c := range g.Couplings {
		if c.Weight == p {
			return c.Companions
		}
	}
	return nil
}

// linkCouplings validates the couplings of groups against the slots built
// from them and records them: each companion slot's owner is the slot of
// its weight, and each group work item of a coupled weight lists the
// companion slots (with gather space for them). op names the caller in
// panics.
func linkCouplings(op string, groups []*Group, slots []slot, ws []groupWork) {
	index := map[*autograd.Tensor]int{}
	for i := range slots {
		index[slots[i].p] = i
	}
	comps := map[int][]int{}
	for gi, g := range groups {
		for _, c := range g.Couplings {
			wi, ok := index[c.Weight]
			if !ok || slots[wi].group != gi {
				panic(fmt.Sprintf("%s: group %d couples a weight that is not one of its parameters", op, gi))
			}
			gr, ok := g.Reg.(prox.GroupRegularizer)
			if !ok || gr.GroupBy() != prox.ByFilter {
				panic(fmt.Sprintf("%s: group %d couples %q but its regularizer %v does not group by filter", op, gi, slots[wi].name, g.Reg))
			}
			if _, dup := comps[wi]; dup {
				panic(fmt.Sprintf("%s: weight %q is coupled twice", op, slots[wi].name))
			}
			if !slots[wi].grouped {
				// The optimizer ignores the regularizer.
				comps[wi] = nil
				continue
			}
			count := proxk.LayoutOf(proxk.GroupFilter, c.Weight.Shape()).Count
			var list []int
			for _, t := range c.Companions {
				ci, ok := index[t]
				if !ok {
					panic(fmt.Sprintf("%s: a companion of %q is not a parameter of the optimizer", op, slots[wi].name))
				}
				cs := &slots[ci]
				if cs.n != count {
					panic(fmt.Sprintf("%s: companion %q of %q has %d elements, want one per output filter (%d)", op, cs.name, slots[wi].name, cs.n, count))
				}
				if groups[cs.group].Reg != nil {
					panic(fmt.Sprintf("%s: companion %q of %q is in a group with regularizer %v", op, cs.name, slots[wi].name, groups[cs.group].Reg))
				}
				if cs.owner != 0 {
					panic(fmt.Sprintf("%s: %q is a companion twice", op, cs.name))
				}
				cs.owner = wi + 1
				list = append(list, ci)
			}
			comps[wi] = list
		}
	}
	for i := range ws {
		w := &ws[i]
		if list := comps[w.slot]; len(list) > 0 {
			w.comps = list
			w.buf = make([]float32, 2*(w.layout.Size+len(list)))
			w.mem = make([]member, 0, len(list))
		}
	}
}

// member is one companion of a group work item in one step: its values x
// (θ, or z before the proximal map), its η or subgradient output y, and
// its clamp bound (0 for none).
type member struct {
	x, y []float32
	clip float64
}

// members returns the companions of w that take part in this step, with
// view giving each one's vectors; it reuses w's storage.
func (w *groupWork) members(slots []slot, view func(sl *slot) (member, bool)) []member {
	w.mem = w.mem[:0]
	for _, ci := range w.comps {
		if m, ok := view(&slots[ci]); ok {
			w.mem = append(w.mem, m)
		}
	}
	return w.mem
}

// coupledData returns the data of the companions coupled with p in g.
func coupledData(g *Group, p *autograd.Tensor) [][]float32 {
	cs := g.companionsOf(p)
	if len(cs) == 0 {
		return nil
	}
	out := make([][]float32, len(cs))
	for i, c := range cs {
		out[i] = c.Data
	}
	return out
}
