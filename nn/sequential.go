package nn

import (
	"strconv"

	"github.com/proxgen/proxgen/autograd"
)

// Sequential applies its layers in order, as torch.nn.Sequential. Layer i
// is named by its index, so its tensors appear as "i.weight" and so on.
type Sequential struct {
	Layers []Module // applied in order; layer i is named "i"
}

// NewSequential returns a Sequential of the given layers.
func NewSequential(layers ...Module) *Sequential {
	return &Sequential{Layers: layers}
}

// Forward feeds x through every layer in turn; an empty Sequential
// returns x, like PyTorch's. A BatchNorm2d directly followed by a ReLU runs
// as one fused op (BatchNorm2d.ForwardReLU), with the same result.
func (s *Sequential) Forward(x *autograd.Tensor) *autograd.Tensor {
	for i := 0; i < len(s.Layers); i++ {
		if bn, ok := s.Layers[i].(*BatchNorm2d); ok && i+1 < len(s.Layers) {
			if _, ok := s.Layers[i+1].(ReLU); ok {
				x = bn.ForwardReLU(x)
				i++
				continue
			}
		}
		x = s.Layers[i].Forward(x)
	}
	return x
}

// Children returns the layers named "0", "1", ....
func (s *Sequential) Children() []Child {
	cs := make([]Child, len(s.Layers))
	for i, l := range s.Layers {
		cs[i] = Child{Name: strconv.Itoa(i), Module: l}
	}
	return cs
}

// Params returns the layers' parameters prefixed by their indices.
func (s *Sequential) Params() []Param { return ChildParams(s.Children()) }

// Buffers returns the layers' buffers prefixed by their indices.
func (s *Sequential) Buffers() []Param { return ChildBuffers(s.Children()) }

// SetTraining sets the mode of every layer.
func (s *Sequential) SetTraining(training bool) { SetChildrenTraining(s.Children(), training) }
