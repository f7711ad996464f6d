// Package nn builds neural networks from the ops of package autograd:
// layers that own their parameters, containers that name them the way
// PyTorch does, and PyTorch's default initialisations: the building blocks
// of the VGG, ResNet and LSTM networks of the ProxGen paper's experiments
// (Section 4 and Appendix B of arXiv:2007.07484; see package nn/models).
//
// A Module maps an input tensor to an output tensor and lists its tensors
// by name. Parameter and buffer names are the dotted paths PyTorch's
// state_dict uses ("features.0.weight", "layer1.0.bn1.running_mean"), so a
// checkpoint written from StateDict loads into the reference PyTorch model
// with load_state_dict(strict=True) and back.
//
// Layers start in training mode, as PyTorch modules do; call SetTraining(false)
// before evaluation (it switches batch normalisation to its running
// statistics and turns dropout off).
//
// A model made of sub-modules implements Container: Children lists them
// under their PyTorch attribute names, and ChildParams, ChildBuffers and
// SetChildrenTraining implement the rest of Module from that list.
//
// Layers hold their tensors and hyperparameters only: inference
// preparation (sparse weights, folded batch normalisation, compiled plans)
// belongs to package nn/infer, which keeps what it prepares in values of
// its own.
//
// Constructors take a *rand.Rand (math/rand/v2) and draw every initial value
// from it in a fixed order, so the same seed always gives the same network.
package nn

import (
	"strings"

	"github.com/proxgen/proxgen/autograd"
)

// Module is a network or a part of one.
type Module interface {
	// Forward computes the module's output for input x, recording the
	// graph when x or a parameter requires a gradient.
	Forward(x *autograd.Tensor) *autograd.Tensor
	// Params returns the trainable tensors in PyTorch's named_parameters
	// order, named by their dotted path below the module.
	Params() []Param
	// Buffers returns the non-trainable state (batch-norm running
	// statistics) in PyTorch's named_buffers order.
	Buffers() []Param
	// SetTraining switches the module and all its sub-modules between
	// training mode (true) and evaluation mode (false).
	SetTraining(training bool)
}

// Param is a named tensor of a module: a parameter or a buffer.
type Param struct {
	// Name is the dotted path PyTorch's state_dict uses for the tensor,
	// such as "layer1.0.conv1.weight".
	Name string
	// T is the tensor itself; optimizers and checkpoints change T.Data in
	// place.
	T *autograd.Tensor
	// Int64 marks a counter that PyTorch stores as an int64 tensor
	// (num_batches_tracked). T then holds the count as a float32, exact
	// up to 2^24; checkpoints should write it as I64.
	Int64 bool
}

// Child is a named sub-module, as a PyTorch attribute or a Sequential index.
type Child struct {
	Name   string // attribute name or index, the first part of its tensors' names
	Module Module // the sub-module
}

// Container is implemented by modules made of sub-modules. StateDict uses
// Children to order the state the way PyTorch does: a module's own
// parameters, then its own buffers, then each child's state in turn.
type Container interface {
	Module
	// Children returns the direct sub-modules in registration order.
	// Sub-modules without any tensors may be left out.
	Children() []Child
}

// ChildParams returns the parameters of children, each name prefixed by
// its child's name and a dot. Containers use it to implement Params.
func ChildParams(children []Child) []Param {
	var out []Param
	for _, c := range children {
		out = appendPrefixed(out, c.Name, c.Module.Params())
	}
	return out
}

// ChildBuffers returns the buffers of children, each name prefixed by its
// child's name and a dot. Containers use it to implement Buffers.
func ChildBuffers(children []Child) []Param {
	var out []Param
	for _, c := range children {
		out = appendPrefixed(out, c.Name, c.Module.Buffers())
	}
	return out
}

// SetChildrenTraining calls SetTraining on every child.
func SetChildrenTraining(children []Child, training bool) {
	for _, c := range children {
		c.Module.SetTraining(training)
	}
}

func appendPrefixed(out []Param, prefix string, ps []Param) []Param {
	for _, p := range ps {
		p.Name = prefix + "." + p.Name
		out = append(out, p)
	}
	return out
}

// StateDict returns the parameters and buffers of m in the order of
// PyTorch's state_dict: for every module in depth-first order, its own
// parameters, then its own buffers, then its children. For a module that is
// not a Container it returns its parameters followed by its buffers.
func StateDict(m Module) []Param {
	return appendState(nil, m)
}

func appendState(out []Param, m Module) []Param {
	c, ok := m.(Container)
	if !ok {
		out = append(out, m.Params()...)
		return append(out, m.Buffers()...)
	}
	// PyTorch forbids dots in parameter and buffer names, so the entries
	// without a dot belong to the module itself.
	for _, p := range m.Params() {
		if !strings.Contains(p.Name, ".") {
			out = append(out, p)
		}
	}
	for _, p := range m.Buffers() {
		if !strings.Contains(p.Name, ".") {
			out = append(out, p)
		}
	}
	for _, ch := range c.Children() {
		out = appendPrefixed(out, ch.Name, appendState(nil, ch.Module))
	}
	return out
}

// ZeroGrad clears the accumulated gradient of every parameter of m.
func ZeroGrad(m Module) {
	for _, p := range m.Params() {
		p.T.ZeroGrad()
	}
}

// NumParams returns the number of scalar parameters of m (buffers are not
// counted), as sum(p.numel() for p in model.parameters()) does in PyTorch.
func NumParams(m Module) int {
	n := 0
	for _, p := range m.Params() {
		n += p.T.Numel()
	}
	return n
}

// SplitParams returns the names and the tensors of ps, in order (the
// parallel slices optim.Group holds).
func SplitParams(ps []Param) (names []string, tensors []*autograd.Tensor) {
	names = make([]string, len(ps))
	tensors = make([]*autograd.Tensor, len(ps))
	for i, p := range ps {
		names[i], tensors[i] = p.Name, p.T
	}
	return names, tensors
}
