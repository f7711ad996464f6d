package experiment

import (
	"fmt"
	"strings"

	"github.com/proxgen/proxgen/optim"
)

// Hyper holds the hyperparameters a named method takes besides the
// parameter groups: the Adam family's moment decays and δ, and SGD's
// momentum.
type Hyper struct {
	Beta1, Beta2, Eps float64
	Momentum          float64
}

// MethodKind says how a named method builds its optimizer from its Config.
type MethodKind int

// Kinds of methods.
const (
	// Plain methods are New(groups, Config).
	Plain MethodKind = iota
	// ProxSGDKind is NewProxSGD: the Config is unused, the schedule gives
	// ε_t.
	ProxSGDKind
	// BinaryConnectKind wraps New(groups, Config) in NewBinaryConnect over
	// the regularized group.
	BinaryConnectKind
	// GatedKind is New(groups, Config) over the model's parameters plus
	// ℓ0 hard-concrete gates (nn.HardConcreteGates), which the caller
	// builds: the gates' log α get a group of their own.
	GatedKind
)

// MethodInfo describes a training method known by name (LookupMethod): what it
// builds and which regularizers it takes.
type MethodInfo struct {
	// Name is the method's name, as the programs' -optimizer flag takes it.
	Name string
	// Kind says how the optimizer is built.
	Kind MethodKind
	// TakesReg reports whether the method uses a regularizer (the others
	// train without one).
	TakesReg bool
	// Adam reports whether the method keeps Adam moments (β1, β2, δ).
	Adam bool
	// Doc is a one-line description.
	Doc string
	// config returns the optimizer configuration; nil for ProxSGDKind.
	config func(h Hyper) optim.Config
}

// Config returns the optimizer configuration of m for h (the zero Config
// for ProxSGDKind, which has none).
func (m MethodInfo) Config(h Hyper) optim.Config {
	if m.config == nil {
		return optim.Config{}
	}
	return m.config(h)
}

func methodAdam(h Hyper) optim.Config    { return optim.AdamConfig(h.Beta1, h.Beta2, h.Eps) }
func methodAdamW(h Hyper) optim.Config   { return optim.AdamWConfig(h.Beta1, h.Beta2, h.Eps) }
func methodProxGen(h Hyper) optim.Config { return optim.ProxGenAdam(h.Beta1, h.Beta2, h.Eps) }
func methodSGD(h Hyper) optim.Config     { return optim.SGDConfig(h.Momentum, false) }

// methods is the table LookupMethod reads; it is never modified.
var methods = [...]MethodInfo{
	{Name: "proxgen", TakesReg: true, Adam: true, Doc: "ProxGen with the Adam preconditioner (Algorithm 1)", config: methodProxGen},
	{Name: "proxgenw", TakesReg: true, Adam: true, Doc: "ProxGen with decoupled weight decay", config: methodProxGen},
	{Name: "adam", Adam: true, Doc: "torch.optim.Adam (coupled weight decay)", config: methodAdam},
	{Name: "adamw", Adam: true, Doc: "torch.optim.AdamW (decoupled weight decay)", config: methodAdamW},
	{Name: "sgd", Doc: "torch.optim.SGD with heavy-ball momentum", config: methodSGD},
	{Name: "proxgen-sgd", TakesReg: true, Doc: "ProxGen with heavy-ball momentum and the identity preconditioner: torch.optim.SGD's step (coupled weight decay), then the proximal map of the regularizer", config: func(h Hyper) optim.Config {
		c := methodSGD(h)
		c.RegMode = optim.RegProx
		return c
	}},
	{Name: "subgrad", TakesReg: true, Adam: true, Doc: "AdamW on the loss plus λ·R with R's smoothed subgradient", config: func(h Hyper) optim.Config {
		c := methodAdamW(h)
		c.RegMode = optim.RegSubgradient
		return c
	}},
	{Name: "proxsgd", Kind: ProxSGDKind, TakesReg: true, Doc: "Prox-SGD (Yang et al. 2020)"},
	{Name: "proxquant", TakesReg: true, Adam: true, Doc: "ProxQuant: Adam step, Euclidean prox of a binary regularizer, clip to [−1, 1]", config: func(h Hyper) optim.Config {
		return optim.ProxQuantConfig(h.Beta1, h.Beta2, h.Eps)
	}},
	{Name: "bc", Kind: BinaryConnectKind, Adam: true, Doc: "BinaryConnect over Adam", config: methodAdam},
	{Name: "bc-sgd", Kind: BinaryConnectKind, Doc: "BinaryConnect over torch.optim.SGD with heavy-ball momentum", config: methodSGD},
	{Name: "l0hc", Kind: GatedKind, Adam: true, Doc: "ℓ0 hard-concrete gates (Louizos et al. 2018) trained with Adam", config: methodAdam},
}

// MethodNames returns the names of the known methods in a fixed order.
func MethodNames() []string {
	names := make([]string, len(methods))
	for i, m := range methods {
		names[i] = m.Name
	}
	return names
}

// LookupMethod returns the method called name, or an error naming the
// known ones.
func LookupMethod(name string) (MethodInfo, error) {
	for _, m := range methods {
		if m.Name == name {
			return m, nil
		}
	}
	return MethodInfo{}, fmt.Errorf("unknown method %q (want one of %s)", name, strings.Join(MethodNames(), ", "))
}
