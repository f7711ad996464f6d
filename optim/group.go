package optim

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/optim/prox"
)

// Group is a set of parameters that share hyperparameters.
type Group struct {
	// Params are updated in place through their Data, using their Grad.
	// A parameter whose Grad is nil is skipped in that step.
	Params []*autograd.Tensor
	// Names optionally names the parameters (used for state entries);
	// when set it must have one unique name per parameter.
	Names []string
	// Reg is the regularizer R of this group; nil means none.
	Reg prox.Regularizer
	// Lambda is the regularization strength λ.
	Lambda float64
	// WeightDecay is ζ: decoupled (ProxGenW, AdamW) or coupled (SGD, Adam)
	// depending on the optimizer.
	WeightDecay float64
	// LR is the base step size α; the optimizer's Schedule derives α_t.
	LR float64
	// Clip, when positive, clamps the parameters to [−Clip, Clip] after
	// each update (ProxQuant, BinaryConnect).
	Clip float64
	// Frozen groups are not updated (ProxQuant freezes the binarised
	// weights after hard quantisation).
	Frozen bool
	// Couplings add per-output-channel companion tensors (for example
	// batch-norm γ and β) to the filter groups of some of Params; Reg
	// must then be a GroupRegularizer grouping ByFilter. See Coupling
	// and Couple.
	Couplings []Coupling
}

// name returns the state name of parameter j of group i.
func (g *Group) name(i, j int) string {
	if g.Names != nil {
		return g.Names[j]
	}
	return fmt.Sprintf("group%d.%d", i, j)
}

// IsWeight reports whether t is a convolution or linear weight (rank 4 or
// rank 2), the tensors the paper regularizes; biases and batch-norm
// parameters are rank 1.
func IsWeight(t *autograd.Tensor) bool {
	r := t.Rank()
	return r == 2 || r == 4
}

// DefaultGroups splits named parameters into the paper's default groups:
// the weights (IsWeight) get reg with strength lambda, every other
// parameter gets no regularizer; both get weight decay wd and step size lr.
// Empty groups are left out. names may be nil.
func DefaultGroups(names []string, params []*autograd.Tensor, reg prox.Regularizer, lambda, wd, lr float64) []*Group {
	return SplitGroups(names, params, func(_ string, t *autograd.Tensor) bool { return IsWeight(t) }, reg, lambda, wd, lr)
}

// SplitGroups is DefaultGroups with a custom choice of which parameters get
// the regularizer (for example all weights except 1×1 shortcut
// convolutions).
func SplitGroups(names []string, params []*autograd.Tensor, regularized func(name string, t *autograd.Tensor) bool, reg prox.Regularizer, lambda, wd, lr float64) []*Group {
	if names != nil && len(names) != len(params) {
		panic(fmt.Sprintf("optim.SplitGroups: %d names for %d parameters", len(names), len(params)))
	}
	w := &Group{Reg: reg, Lambda: lambda, WeightDecay: wd, LR: lr}
	o := &Group{WeightDecay: wd, LR: lr}
	for i, p := range params {
		name := ""
		if names != nil {
			name = names[i]
		}
		g := o
		if regularized(name, p) {
			g = w
		}
		g.Params = append(g.Params, p)
		if names != nil {
			g.Names = append(g.Names, name)
		}
	}
	var out []*Group
	for _, g := range []*Group{w, o} {
		if len(g.Params) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// Penalty returns Σ_groups λ·R(θ) over the groups that have a
// regularizer, accumulated in float64 in a fixed order. Coupled companions
// count in their weight's groups.
func Penalty(groups []*Group) float64 {
	var s float64
	for _, g := range groups {
		if g.Reg == nil || g.Lambda == 0 {
			continue
		}
		for _, p := range g.Params {
			if gr, ok := g.Reg.(prox.GroupRegularizer); ok && len(g.Couplings) > 0 {
				s += g.Lambda * prox.GroupPenalty(gr, p.Data, p.Shape(), coupledData(g, p)...)
				continue
			}
			s += g.Lambda * TensorPenalty(g.Reg, p)
		}
	}
	return s
}

// TensorPenalty returns R(θ) of one parameter: r summed over its
// coordinates, or over its groups for a GroupRegularizer.
func TensorPenalty(r prox.Regularizer, p *autograd.Tensor) float64 {
	if gr, ok := r.(prox.GroupRegularizer); ok {
		return prox.GroupPenalty(gr, p.Data, p.Shape())
	}
	return r.Penalty(p.Data)
}

// Sparsity reports, over the parameters of groups with a regularizer (all
// groups when none has one), the fraction of exact zeros and the fractions
// with |w| < 1e-3 and |w| < 1e-2, as the paper reports sparsity.
func Sparsity(groups []*Group) (zero, below1e3, below1e2 float64) {
	any := false
	for _, g := range groups {
		if g.Reg != nil {
			any = true
		}
	}
	var n, z, a, b int
	for _, g := range groups {
		if any && g.Reg == nil {
			continue
		}
		for _, p := range g.Params {
			for _, v := range p.Data {
				n++
				av := v
				if av < 0 {
					av = -av
				}
				if v == 0 {
					z++
				}
				if av < 1e-3 {
					a++
				}
				if av < 1e-2 {
					b++
				}
			}
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(z) / float64(n), float64(a) / float64(n), float64(b) / float64(n)
}

// Optimizer is the interface every method in this package implements.
type Optimizer interface {
	// Step applies one update from the parameters' current Grad.
	Step()
	// ZeroGrad clears the Grad of every parameter.
	ZeroGrad()
	// Groups returns the parameter groups; their hyperparameters (LR,
	// Lambda, WeightDecay, Frozen) may be changed between steps.
	Groups() []*Group
	// Steps returns the number of updates applied so far.
	Steps() int
	// State returns a deep copy of the optimizer state.
	State() *State
	// LoadState restores a state produced by State on an optimizer built
	// with the same groups; continuing then gives bit-identical results.
	LoadState(s *State) error
}

// zeroGrads clears the gradients of all parameters in groups.
func zeroGrads(groups []*Group) {
	for _, g := range groups {
		for _, p := range g.Params {
			p.ZeroGrad()
		}
	}
}
