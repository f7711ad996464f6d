package main

import (
	"fmt"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim"
)

// method is a training method: an optimizer over the model's parameters
// plus what the method does around the forward and backward pass.
type method struct {
	opt   optim.Optimizer
	sched optim.Schedule
	// reg is the group of regularized (or binarised) weights; nil when the
	// method has none.
	reg *optim.Group
	// lambda is the per-step λ before the homotopy.
	lambda   float64
	homotopy bool
	// weights are the tensors whose statistics metrics report: the
	// regularized set (conv and linear weights, without 1×1 shortcut
	// convolutions in binary runs).
	weights []namedTensor
	// hc holds the gates of the ℓ0 hard-concrete baseline.
	hc *hardConcrete
}

// regularized reports whether the parameter name/t is in the regularized
// (or binarised) set: convolution and linear weights, except the 1×1
// shortcut convolutions of binary runs, which the ProxQuant reference
// keeps in full precision.
func regularized(c *config, name string, t *autograd.Tensor) bool {
	if !optim.IsWeight(t) {
		return false
	}
	return !(c.binary() && strings.Contains(name, "shortcut"))
}

// perStepLambda returns the λ the optimizer uses for one update, from
// -lambda and -lambda-scale.
func perStepLambda(c *config, nTrain int) float64 {
	if c.LambdaScale == "n" {
		return c.Lambda / float64(nTrain)
	}
	return c.Lambda
}

// newMethod builds the method of c for model, training on nTrain images in
// perEpoch updates per epoch.
func newMethod(c *config, model nn.Module, nTrain, perEpoch int) (*method, error) {
	sp, err := parseSchedule(c.Schedule)
	if err != nil {
		return nil, err
	}
	sched, err := sp.Build(perEpoch, c.Epochs)
	if err != nil {
		return nil, fmt.Errorf("-schedule: %w", err)
	}
	reg, err := parseReg(c.Reg)
	if err != nil {
		return nil, err
	}
	m := &method{
		sched:    sched,
		lambda:   perStepLambda(c, nTrain),
		homotopy: c.Homotopy == "on",
	}
	var names []string
	var params []*autograd.Tensor
	for _, p := range model.Params() {
		names = append(names, p.Name)
		params = append(params, p.T)
		if regularized(c, p.Name, p.T) {
			m.weights = append(m.weights, namedTensor{p.Name, p.T})
		}
	}
	isReg := func(name string, t *autograd.Tensor) bool { return regularized(c, name, t) }
	groups := optim.SplitGroups(names, params, isReg, reg, m.lambda, c.WD, c.LR)
	if !c.NoCoupleBN {
		// Only filter-grouped regularizers take the coupling.
		for _, p := range nn.ConvNorms(model) {
			optim.Couple(groups, p.Weight.T, p.Gamma.T, p.Beta.T)
		}
	}
	if c.Optimizer == "l0hc" {
		if m.hc, err = newHardConcrete(model, isReg, m.lambda, c.Seed); err != nil {
			return nil, err
		}
		g := &optim.Group{LR: c.LR}
		for _, p := range m.hc.gates() {
			g.Params = append(g.Params, p.T)
			g.Names = append(g.Names, p.Name)
		}
		groups = append(groups, g)
	}
	var ocfg optim.Config
	switch c.Optimizer {
	case "proxgen", "proxgenw":
		ocfg = optim.ProxGenAdam(c.Beta1, c.Beta2, c.Eps)
	case "adam", "bc", "l0hc":
		ocfg = optim.AdamConfig(c.Beta1, c.Beta2, c.Eps)
	case "adamw":
		ocfg = optim.AdamWConfig(c.Beta1, c.Beta2, c.Eps)
	case "sgd":
		ocfg = optim.SGDConfig(c.Momentum, false)
	case "subgrad":
		ocfg = optim.AdamWConfig(c.Beta1, c.Beta2, c.Eps)
		ocfg.RegMode = optim.RegSubgradient
	case "proxquant":
		ocfg = optim.ProxQuantConfig(c.Beta1, c.Beta2, c.Eps)
	case "proxsgd":
	default:
		return nil, fmt.Errorf("-optimizer %s is not available in this build", c.Optimizer)
	}
	ocfg.Schedule = m.sched
	for _, g := range groups {
		if len(g.Params) > 0 && isReg(g.Names[0], g.Params[0]) {
			m.reg = g // the group of the regularized (binarised) weights
		}
	}
	if c.Optimizer == "proxquant" && m.reg != nil {
		m.reg.Clip = 1
	}
	switch c.Optimizer {
	case "proxsgd":
		m.opt = optim.NewProxSGD(groups, optim.ProxSGDConfig{Eps: m.sched})
	case "bc":
		if m.reg == nil {
			return nil, fmt.Errorf("-optimizer bc: the model has no weights to binarise")
		}
		m.opt = optim.NewBinaryConnect(optim.New(groups, ocfg), m.reg)
	default:
		m.opt = optim.New(groups, ocfg)
	}
	if m.reg != nil && m.reg.Reg == nil && c.Optimizer != "bc" {
		m.reg = nil // no regularizer: nothing to anneal or quantise
	}
	return m, nil
}

// lambdaAt returns the per-step λ of epoch (counted from 0).
func (m *method) lambdaAt(epoch int) float64 {
	if m.homotopy {
		return m.lambda * float64(epoch)
	}
	return m.lambda
}

// setEpoch sets the hyperparameters of epoch (counted from 0).
func (m *method) setEpoch(epoch int) {
	if m.reg != nil && m.reg.Reg != nil {
		m.reg.Lambda = m.lambdaAt(epoch)
	}
}

// lrAt returns the step size of the first group's update after steps
// updates.
func (m *method) lrAt(steps int) float64 {
	var base float64
	if gs := m.opt.Groups(); len(gs) > 0 {
		base = gs[0].LR
	}
	return m.sched.Rate(base, steps+1)
}

// penalty returns λ·R(θ) for the current weights (λ times the expected
// number of open gates for ℓ0 hard-concrete).
func (m *method) penalty() float64 {
	if m.hc != nil {
		return m.hc.penalty()
	}
	return optim.Penalty(m.opt.Groups())
}

// graphTerms runs in the step's context c before the forward pass: for ℓ0
// hard-concrete it draws the gates, makes the layers compute with the
// gated weights and returns the penalty to add to the loss; otherwise it
// returns nil.
func (m *method) graphTerms(c *autograd.Context) *autograd.Tensor {
	if m.hc != nil {
		return m.hc.begin(c)
	}
	return nil
}

// endStep undoes graphTerms after the backward pass.
func (m *method) endStep() {
	if m.hc != nil {
		m.hc.end()
	}
}

// aux returns the tensors of the method that the training state must keep
// besides the model (the gates of ℓ0 hard-concrete).
func (m *method) aux() []nn.Param {
	if m.hc != nil {
		return m.hc.gates()
	}
	return nil
}

// rngState returns the state of the method's random stream (nil when it
// has none).
func (m *method) rngState() ([]byte, error) {
	if m.hc == nil {
		return nil, nil
	}
	return m.hc.pcg.MarshalBinary()
}

// setRNGState restores a state returned by rngState.
func (m *method) setRNGState(b []byte) error {
	if m.hc == nil {
		if len(b) > 0 {
			return fmt.Errorf("the checkpoint has a random state, but the method uses none")
		}
		return nil
	}
	return m.hc.pcg.UnmarshalBinary(b)
}

// hardQuantize sets the binarised weights to sign(w) (+1 for w = 0) and
// freezes them, as ProxQuant does at its hard-quantisation epoch.
func (m *method) hardQuantize() {
	if m.reg != nil {
		optim.HardQuantize(m.reg)
	}
}

// useEffective replaces the weights by the weights the network computes
// with at test time until restore is called: w ⊙ z_test for ℓ0
// hard-concrete. (BinaryConnect keeps sign(w) in the parameters at all
// times and its real weights in the optimizer state.) It does nothing for
// other methods.
func (m *method) useEffective() {
	if m.hc != nil {
		m.hc.useEffective()
	}
}

// restore puts the trained weights back after useEffective.
func (m *method) restore() {
	if m.hc != nil {
		m.hc.restore()
	}
}
