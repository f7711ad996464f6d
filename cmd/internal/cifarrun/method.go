package cifarrun

import (
	"fmt"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/prune"
	"github.com/proxgen/proxgen/optim"
)

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
func newMethod(c *config, model nn.Module, nTrain, perEpoch int) (*experiment.Method, error) {
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
	weights, err := lambdaWeights(c, model)
	if err != nil {
		return nil, err
	}
	return experiment.NewMethod(model, experiment.MethodConfig{
		Optimizer:    c.Optimizer,
		Reg:          reg,
		Regularized:  func(name string, t *autograd.Tensor) bool { return regularized(c, name, t) },
		Lambda:       perStepLambda(c, nTrain),
		Homotopy:     c.Homotopy == "on",
		LambdaWeight: weights,
		WD:           c.WD,
		LR:           c.LR,
		Hyper:        experiment.Hyper{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Momentum: c.Momentum},
		Schedule:     sched,
		CoupleBN:     !c.NoCoupleBN,
		Seed:         c.Seed,
		ScaleBinary:  c.BinScale == "mean",
		Lazy:         c.Prox == "lazy",
	})
}

// regNote describes -reg-cost and -prox lazy for the run's first line.
func regNote(c *config) string {
	var note string
	if c.RegCost != "" {
		note = " weighted by each layer's output " + c.RegCost
	}
	if c.Prox == "lazy" {
		note += ", prox applied lazily to the accumulated iterate"
	}
	return note
}

// lambdaWeights returns the λ multiplier of each regularized weight that
// -reg-cost asks for, or nil for none. "pixels": the multiply-adds a
// weight costs per image (its layer's output pixels for a convolution, 1
// for a linear layer) over the largest such cost, so the layers on the
// largest images keep λ and a layer on images a quarter the size gets λ/4.
func lambdaWeights(c *config, model nn.Module) (func(string, *autograd.Tensor) float64, error) {
	if c.RegCost != "pixels" {
		return nil, nil
	}
	count, err := prune.CountModel(model, cifarinfo.Height, cifarinfo.Width)
	if err != nil {
		return nil, fmt.Errorf("-reg-cost %s: %w", c.RegCost, err)
	}
	numel := make(map[string]int)
	for _, p := range model.Params() {
		numel[p.Name] = p.T.Numel()
	}
	cost := make(map[string]float64)
	var largest float64
	for _, l := range count.Layers {
		name := l.Name + ".weight"
		if n := numel[name]; n > 0 {
			cost[name] = float64(l.FLOPsTotal) / float64(n)
			largest = max(largest, cost[name])
		}
	}
	return func(name string, _ *autograd.Tensor) float64 {
		v, ok := cost[name]
		if !ok {
			panic(fmt.Sprintf("cifarrun: -reg-cost: %s is regularized but is no convolution or linear weight", name))
		}
		return v / largest
	}, nil
}
