package experiment

import (
	"fmt"
	"math"
	"slices"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim"
	"github.com/proxgen/proxgen/optim/prox"
	"github.com/proxgen/proxgen/optim/schedule"
)

// MethodConfig describes a training method: a named optimizer
// (LookupMethod), its regularizer and hyperparameters, and which
// parameters the regularizer acts on.
type MethodConfig struct {
	// Optimizer names the method (MethodNames).
	Optimizer string
	// Reg is the regularizer (nil: none) of the regularized parameters.
	Reg prox.Regularizer
	// Regularized reports whether a parameter is in the regularized (or,
	// for BinaryConnect, binarised; for ℓ0 hard-concrete, gated) set.
	// Those parameters form one group, the others another.
	Regularized func(name string, t *autograd.Tensor) bool
	// Lambda is the per-step λ; with Homotopy, epoch e (from 0) uses
	// λ·e (ProxQuant's homotopy).
	Lambda   float64
	Homotopy bool
	// LambdaWeight, when not nil, multiplies λ for each regularized
	// parameter (for example by the output pixels of its layer, so that a
	// group's penalty is proportional to the multiply-adds it costs);
	// parameters with equal multipliers share an optimizer group. nil
	// weighs every regularized parameter 1.
	LambdaWeight func(name string, t *autograd.Tensor) float64
	// WD is the weight decay and LR the base step size of every group.
	WD, LR float64
	// Hyper holds the Adam moments, δ and SGD's momentum.
	Hyper Hyper
	// Schedule is the step-size schedule (nil: constant); for proxsgd it
	// gives ε_t.
	Schedule schedule.Schedule
	// CoupleBN groups each convolution filter with the γ and β of the
	// batch norm after it for the group regularizers (optim.Couple).
	CoupleBN bool
	// Seed seeds the ℓ0 hard-concrete gates.
	Seed uint64
	// ScaleBinary gives each binarised tensor its own W-shaped
	// regularizer with its wells at ±s instead of ±1 (prox.BinaryWAt), s
	// the tensor's mean |w| at the start of each epoch, so that a network
	// trained at its own weight scale (a warm start, SGD's step sizes)
	// is pulled to ±s per tensor and hard quantisation sets ±s. It needs
	// a W-shaped Reg, except for BinaryConnect methods, which it makes
	// binarise each tensor to ±(the mean |w| of its real weights)
	// (optim.NewScaledBinaryConnect).
	ScaleBinary bool
	// Lazy applies the regularizer's prox lazily (optim.LazyProx): the
	// optimizer steps a real-valued iterate z and the network computes
	// with the prox of λR at z under the step sizes summed so far. It
	// needs a Plain method and no CoupleBN for filter groups; with
	// ScaleBinary each tensor's wells are at ±(the mean |z| of its real
	// iterate).
	Lazy bool
}

// Method is a training method over one model: the optimizer with its
// groups and schedule, the λ schedule, and for ℓ0 hard-concrete the gates
// the network computes with.
type Method struct {
	// Opt is the optimizer over the model's parameters (and the gates).
	Opt optim.Optimizer
	// Schedule is the optimizer's step-size schedule (never nil).
	Schedule schedule.Schedule
	// Regs are the groups of the regularized (or binarised) weights, one
	// per λ multiplier (MethodConfig.LambdaWeight; one group without it);
	// nil when the method has no regularizer.
	Regs []*optim.Group
	// Params are the model's parameters in order (for gradient clipping).
	Params []*autograd.Tensor
	// Weights are the regularized parameters, whose statistics
	// (ComputeWeightStats) metrics report.
	Weights []nn.Param
	// Gates are the ℓ0 hard-concrete gates; nil for other methods.
	Gates *nn.HardConcreteGates

	lambda   float64
	homotopy bool
	weights  []float64 // λ multiplier of each of Regs
	binQ     float64   // the exponent of the W-shaped regularizer, with scaleBinary
	// scaleBinary: each of Regs holds one tensor, pulled to ±(its mean |w|).
	scaleBinary bool
	bc          *optim.BinaryConnect // Opt, for BinaryConnect methods
	lazy        *optim.LazyProx      // Opt, for lazy proximal methods
}

// NewMethod builds the method c over the parameters of model.
func NewMethod(model nn.Module, c MethodConfig) (*Method, error) {
	desc, err := LookupMethod(c.Optimizer)
	if err != nil {
		return nil, err
	}
	m := &Method{Schedule: c.Schedule, lambda: c.Lambda, homotopy: c.Homotopy, scaleBinary: c.ScaleBinary}
	if c.ScaleBinary && desc.Kind != BinaryConnectKind {
		if !prox.IsBinary(c.Reg) {
			return nil, fmt.Errorf("binary weights at ±(mean |w|) need a W-shaped binary regularizer, not %v", c.Reg)
		}
		m.binQ = c.Reg.(interface{ Q() float64 }).Q()
	}
	if m.Schedule == nil {
		m.Schedule = schedule.Constant{}
	}
	names, params := nn.SplitParams(model.Params())
	m.Params = params
	for _, p := range model.Params() {
		if c.Regularized(p.Name, p.T) {
			m.Weights = append(m.Weights, p)
		}
	}
	groups := optim.SplitGroups(names, params, c.Regularized, c.Reg, c.Lambda, c.WD, c.LR)
	for i, g := range groups {
		if len(g.Params) > 0 && c.Regularized(g.Names[0], g.Params[0]) {
			// The group of the regularized (binarised) weights.
			m.Regs, m.weights = splitByWeight(g, c.LambdaWeight)
			if c.ScaleBinary && desc.Kind != BinaryConnectKind {
				m.Regs, m.weights = splitPerTensor(m.Regs, m.weights)
			}
			groups = slices.Replace(groups, i, i+1, m.Regs...)
			break
		}
	}
	if c.CoupleBN {
		// Only filter-grouped regularizers take the coupling.
		for _, p := range nn.ConvNorms(model) {
			optim.Couple(groups, p.Weight.T, p.Gamma.T, p.Beta.T)
		}
	}
	if desc.Kind == GatedKind {
		if m.Gates, err = nn.NewHardConcreteGates(model, c.Regularized, c.Lambda, c.Seed); err != nil {
			return nil, err
		}
		g := &optim.Group{LR: c.LR}
		g.Names, g.Params = nn.SplitParams(m.Gates.Params())
		groups = append(groups, g)
	}
	if c.Optimizer == "proxquant" {
		for _, g := range m.Regs {
			g.Clip = 1
		}
	}
	cfg := desc.Config(c.Hyper)
	cfg.Schedule = c.Schedule
	if c.Lazy && (desc.Kind != Plain || !desc.TakesReg || cfg.RegMode != optim.RegProx) {
		return nil, fmt.Errorf("-optimizer %s: a lazy prox needs a proximal method (proxgen, proxgenw, proxgen-sgd, proxquant)", c.Optimizer)
	}
	for _, g := range m.Regs {
		if c.Lazy && len(g.Couplings) > 0 {
			return nil, fmt.Errorf("a lazy prox takes no batch-norm couplings (the filters of %v are coupled with their γ and β)", c.Reg)
		}
	}
	switch desc.Kind {
	case ProxSGDKind:
		m.Opt = optim.NewProxSGD(groups, optim.ProxSGDConfig{Eps: c.Schedule})
	case BinaryConnectKind:
		if len(m.Regs) != 1 {
			return nil, fmt.Errorf("-optimizer %s: want one group of weights to binarise, have %d", c.Optimizer, len(m.Regs))
		}
		if c.ScaleBinary {
			m.bc = optim.NewScaledBinaryConnect(optim.New(groups, cfg), m.Regs[0])
		} else {
			m.bc = optim.NewBinaryConnect(optim.New(groups, cfg), m.Regs[0])
		}
		m.Opt = m.bc
	default:
		m.Opt = optim.New(groups, cfg)
		if c.Lazy {
			m.lazy = optim.NewLazyProx(m.Opt.(*optim.ProxGen), m.Regs...)
			m.Opt = m.lazy
		}
	}
	if c.Reg == nil && desc.Kind != BinaryConnectKind {
		m.Regs, m.weights = nil, nil // no regularizer: nothing to anneal or quantise
	}
	m.SetEpoch(0)
	return m, nil
}

// LambdaAt returns the per-step λ of epoch (counted from 0).
func (m *Method) LambdaAt(epoch int) float64 {
	if m.homotopy {
		return m.lambda * float64(epoch)
	}
	return m.lambda
}

// SetEpoch sets the hyperparameters of epoch (counted from 0) as it
// starts: λ, times each group's multiplier, and with ScaleBinary each
// binarised tensor's wells at ±(its mean |w| now; with Lazy, the mean |z|
// of its real iterate).
func (m *Method) SetEpoch(epoch int) {
	m.ResumeEpoch(epoch)
	for _, g := range m.Regs {
		if g.Reg == nil || !m.scaleBinary || g.Frozen {
			continue
		}
		w := g.Params[0].Data
		if m.lazy != nil {
			if j, ok := m.lazy.Lazy(g.Names[0]); ok {
				w = m.lazy.Real(j)
			}
		}
		if s := optim.MeanAbs(w); s > 0 && !math.IsInf(s, 0) {
			g.Reg = prox.BinaryWAt(m.binQ, s)
		}
	}
}

// ResumeEpoch sets λ of epoch as SetEpoch does but keeps the binary
// scales, for a run resumed inside the epoch: they are those of the
// epoch's start, restored with SetBinaryScales.
func (m *Method) ResumeEpoch(epoch int) {
	for i, g := range m.Regs {
		if g.Reg != nil {
			g.Lambda = m.LambdaAt(epoch) * m.weights[i]
		}
	}
}

// BinaryScales returns, with ScaleBinary, the scale s of each binarised
// tensor's W-shaped regularizer (in the order of Regs), for a checkpoint;
// nil otherwise.
func (m *Method) BinaryScales() []float64 {
	if !m.scaleBinary || m.bc != nil {
		return nil
	}
	s := make([]float64, len(m.Regs))
	for i, g := range m.Regs {
		s[i], _ = prox.BinaryScale(g.Reg)
	}
	return s
}

// SetBinaryScales restores scales returned by BinaryScales.
func (m *Method) SetBinaryScales(s []float64) error {
	if want := len(m.BinaryScales()); len(s) != want {
		return fmt.Errorf("%d binary scales for %d binarised tensors", len(s), want)
	}
	for i, v := range s {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("binary scale %v of tensor %d is not a positive finite number", v, i)
		}
		m.Regs[i].Reg = prox.BinaryWAt(m.binQ, v)
	}
	return nil
}

// BinaryScale returns the magnitude s that the binarised weight named name
// is pulled to (±s): its group's W-shaped regularizer's scale, or
// BinaryConnect's current scale of the tensor; 1 for weights that are not
// binarised.
func (m *Method) BinaryScale(name string) float32 {
	if m.bc != nil {
		if i, ok := m.bc.Binarised(name); ok {
			return m.bc.Scale(i)
		}
		return 1
	}
	for _, g := range m.Regs {
		if slices.Contains(g.Names, name) {
			if s, ok := prox.BinaryScale(g.Reg); ok {
				return float32(s)
			}
		}
	}
	return 1
}

// LR returns the step size of the first group's next update.
func (m *Method) LR() float64 { return m.LRAt(m.Opt.Steps()) }

// LRAt returns the step size of the first group's update after steps
// updates.
func (m *Method) LRAt(steps int) float64 {
	var base float64
	if gs := m.Opt.Groups(); len(gs) > 0 {
		base = gs[0].LR
	}
	return m.Schedule.Rate(base, steps+1)
}

// Plateau returns the schedule's ReduceOnPlateau (also after a warm-up),
// which the caller feeds the validation loss; nil for other schedules.
func (m *Method) Plateau() *schedule.ReduceOnPlateau {
	s := m.Schedule
	if w, ok := s.(schedule.Warmup); ok {
		s = w.Then
	}
	p, _ := s.(*schedule.ReduceOnPlateau)
	return p
}

// Penalty returns λ·R(θ) for the current weights (λ times the expected
// number of open gates for ℓ0 hard-concrete).
func (m *Method) Penalty() float64 {
	if m.Gates != nil {
		return m.Gates.Penalty()
	}
	return optim.Penalty(m.Opt.Groups())
}

// GraphTerms runs in the step's context c before the forward pass: for ℓ0
// hard-concrete it draws the gates, makes the layers compute with the
// gated weights and returns the penalty to add to the loss; otherwise it
// returns nil. EndStep undoes it after the backward pass.
func (m *Method) GraphTerms(c *autograd.Context) *autograd.Tensor {
	if m.Gates != nil {
		return m.Gates.Begin(c)
	}
	return nil
}

// EndStep undoes GraphTerms after the backward pass.
func (m *Method) EndStep() {
	if m.Gates != nil {
		m.Gates.End()
	}
}

// Aux returns the tensors of the method that the training state must keep
// besides the model (the gates of ℓ0 hard-concrete).
func (m *Method) Aux() []nn.Param {
	if m.Gates != nil {
		return m.Gates.Params()
	}
	return nil
}

// RNGState returns the state of the method's random stream (nil when it
// has none).
func (m *Method) RNGState() ([]byte, error) {
	if m.Gates == nil {
		return nil, nil
	}
	return m.Gates.MarshalBinary()
}

// SetRNGState restores a state returned by RNGState.
func (m *Method) SetRNGState(b []byte) error {
	if m.Gates == nil {
		if len(b) > 0 {
			return fmt.Errorf("the checkpoint has a random state, but the method uses none")
		}
		return nil
	}
	return m.Gates.UnmarshalBinary(b)
}

// HardQuantize sets the binarised weights to sign(w) (+1 for w = 0) and
// freezes them, as ProxQuant does at its hard-quantisation epoch.
func (m *Method) HardQuantize() {
	for _, g := range m.Regs {
		optim.HardQuantize(g)
	}
}

// Freeze marks the binarised weights frozen (a resumed run that had been
// hard-quantised).
func (m *Method) Freeze() {
	for _, g := range m.Regs {
		g.Frozen = true
	}
}

// UseEffective replaces the weights by the weights the network computes
// with at test time until Restore is called: w ⊙ z_test for ℓ0
// hard-concrete. (BinaryConnect keeps sign(w) in the parameters at all
// times and its real weights in the optimizer state.) It does nothing for
// other methods.
func (m *Method) UseEffective() {
	if m.Gates != nil {
		m.Gates.UseEffective()
	}
}

// Restore puts the trained weights back after UseEffective.
func (m *Method) Restore() {
	if m.Gates != nil {
		m.Gates.Restore()
	}
}

// splitPerTensor splits each group of groups into one group per
// parameter, each keeping its group's λ multiplier.
func splitPerTensor(groups []*optim.Group, ws []float64) ([]*optim.Group, []float64) {
	var out []*optim.Group
	var outW []float64
	for i, g := range groups {
		for j, p := range g.Params {
			out = append(out, &optim.Group{Params: []*autograd.Tensor{p}, Names: []string{g.Names[j]}, Reg: g.Reg, Lambda: g.Lambda, WeightDecay: g.WeightDecay, LR: g.LR, Clip: g.Clip})
			outW = append(outW, ws[i])
		}
	}
	return out, outW
}

// splitByWeight splits the regularized group g into one group per λ
// multiplier that weight gives its parameters, in the order the
// multipliers first appear, each group's λ scaled by its multiplier. With
// a nil weight it returns g alone, with multiplier 1.
func splitByWeight(g *optim.Group, weight func(string, *autograd.Tensor) float64) ([]*optim.Group, []float64) {
	if weight == nil {
		return []*optim.Group{g}, []float64{1}
	}
	var groups []*optim.Group
	var ws []float64
	for j, p := range g.Params {
		w := weight(g.Names[j], p)
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			panic(fmt.Sprintf("experiment: λ multiplier %v of %s is not a finite non-negative number", w, g.Names[j]))
		}
		k := slices.Index(ws, w)
		if k < 0 {
			k = len(ws)
			ws = append(ws, w)
			groups = append(groups, &optim.Group{Reg: g.Reg, Lambda: g.Lambda * w, WeightDecay: g.WeightDecay, LR: g.LR, Clip: g.Clip})
		}
		groups[k].Params = append(groups[k].Params, p)
		groups[k].Names = append(groups[k].Names, g.Names[j])
	}
	return groups, ws
}
