package cifarrun

import (
	"fmt"
	"strings"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/nn"
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
	return experiment.NewMethod(model, experiment.MethodConfig{
		Optimizer:   c.Optimizer,
		Reg:         reg,
		Regularized: func(name string, t *autograd.Tensor) bool { return regularized(c, name, t) },
		Lambda:      perStepLambda(c, nTrain),
		Homotopy:    c.Homotopy == "on",
		WD:          c.WD,
		LR:          c.LR,
		Hyper:       experiment.Hyper{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Momentum: c.Momentum},
		Schedule:    sched,
		CoupleBN:    !c.NoCoupleBN,
		Seed:        c.Seed,
	})
}
