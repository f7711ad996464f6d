package models

import (
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// vgg16Config is kuangliu's cfg['VGG16']; 0 stands for 'M' (max pooling).
var vgg16Config = []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}

// VGG is the CIFAR VGG network of kuangliu/pytorch-cifar: a Sequential of
// [Conv2d(3×3, padding 1, bias), BatchNorm2d, ReLU] per configuration
// entry and MaxPool2d(2, 2) per 'M', ending in AvgPool2d(1, 1), then a
// single linear classifier.
type VGG struct {
	Features   *nn.Sequential // convolution stages, "features.<i>"
	Classifier *nn.Linear     // the linear classifier, "classifier"
}

// newVGG builds a VGG for the configuration cfg (0 = max pooling) with
// PyTorch's default initialisation.
func newVGG(cfg []int, numClasses int, rng *rand.Rand) *VGG {
	features := nn.NewSequential()
	in := 3
	for _, c := range cfg {
		if c == 0 {
			features.Layers = append(features.Layers, nn.MaxPool2d{Kernel: 2, Stride: 2})
			continue
		}
		features.Layers = append(features.Layers,
			nn.NewConv2d(in, c, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng),
			nn.NewBatchNorm2d(c),
			nn.ReLU{},
		)
		in = c
	}
	features.Layers = append(features.Layers, nn.AvgPool2d{Kernel: 1, Stride: 1})
	return &VGG{Features: features, Classifier: nn.NewLinear(in, numClasses, true, rng)}
}

// Forward maps images of shape (N, 3, 32, 32) to logits (N, classes).
func (v *VGG) Forward(x *autograd.Tensor) *autograd.Tensor {
	return v.Classifier.Forward(autograd.Flatten(v.Features.Forward(x)))
}

// Children returns features and classifier.
func (v *VGG) Children() []nn.Child {
	return []nn.Child{{Name: "features", Module: v.Features}, {Name: "classifier", Module: v.Classifier}}
}

// Params returns the network's parameters in PyTorch's order.
func (v *VGG) Params() []nn.Param { return nn.ChildParams(v.Children()) }

// Buffers returns the network's batch-norm buffers in PyTorch's order.
func (v *VGG) Buffers() []nn.Param { return nn.ChildBuffers(v.Children()) }

// SetTraining sets the mode of every layer.
func (v *VGG) SetTraining(training bool) { nn.SetChildrenTraining(v.Children(), training) }
