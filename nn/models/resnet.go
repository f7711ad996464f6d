package models

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// ShortcutKind selects how a residual block whose shape changes forms its
// shortcut.
type ShortcutKind int

const (
	// ShortcutA subsamples the input with stride 2 (x[:, :, ::2, ::2])
	// and pads the new channels with zeros; it has no parameters. It is
	// the default of akamaster/pytorch_resnet_cifar10.
	ShortcutA ShortcutKind = iota
	// ShortcutB is a 1×1 convolution without bias followed by batch
	// normalisation, named shortcut.0 and shortcut.1. The ProxQuant
	// reference code and kuangliu/pytorch-cifar use it.
	ShortcutB
)

// String returns "A" or "B".
func (k ShortcutKind) String() string {
	switch k {
	case ShortcutA:
		return "A"
	case ShortcutB:
		return "B"
	}
	return fmt.Sprintf("ShortcutKind(%d)", int(k))
}

// BasicBlock is the two-convolution residual block of CIFAR ResNets:
// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
type BasicBlock struct {
	Conv1 *nn.Conv2d      // first 3×3 convolution (stride 2 when downsampling)
	BN1   *nn.BatchNorm2d // its batch normalisation
	Conv2 *nn.Conv2d      // second 3×3 convolution
	BN2   *nn.BatchNorm2d // its batch normalisation
	// Shortcut is nil for the identity, a *PadShortcut for option A or an
	// *nn.Sequential of a 1×1 convolution and batch normalisation for
	// option B.
	Shortcut nn.Module
}

// newBasicBlock returns a block from in to planes channels, inner
// channels between its convolutions, whose first convolution has the
// given stride; pad is the option-A channel map (nil: the reference
// layout).
func newBasicBlock(in, inner, planes, stride int, kind ShortcutKind, pad []int, rng *rand.Rand) *BasicBlock {
	b := &BasicBlock{
		Conv1: nn.NewConv2d(in, inner, 3, nn.ConvOpts{Stride: stride, Padding: 1}, rng),
		BN1:   nn.NewBatchNorm2d(inner),
		Conv2: nn.NewConv2d(inner, planes, 3, nn.ConvOpts{Stride: 1, Padding: 1}, rng),
		BN2:   nn.NewBatchNorm2d(planes),
	}
	if stride != 1 || in != planes {
		switch {
		case kind == ShortcutA && pad != nil:
			b.Shortcut = NewPadShortcutMap(in, planes, pad)
		case kind == ShortcutA:
			b.Shortcut = NewPadShortcut(in, planes)
		default:
			b.Shortcut = nn.NewSequential(
				nn.NewConv2d(in, planes, 1, nn.ConvOpts{Stride: stride}, rng),
				nn.NewBatchNorm2d(planes),
			)
		}
	}
	return b
}

// Forward computes the block's output for x of shape (N, in, H, W).
func (b *BasicBlock) Forward(x *autograd.Tensor) *autograd.Tensor {
	out := b.BN1.ForwardReLU(b.Conv1.Forward(x))
	out = b.Conv2.Forward(out)
	sc := x
	if b.Shortcut != nil {
		sc = b.Shortcut.Forward(x)
	}
	return b.BN2.ForwardAddReLU(out, sc)
}

// Children returns conv1, bn1, conv2, bn2 and, for option B, shortcut.
func (b *BasicBlock) Children() []nn.Child {
	cs := []nn.Child{{Name: "conv1", Module: b.Conv1}, {Name: "bn1", Module: b.BN1},
		{Name: "conv2", Module: b.Conv2}, {Name: "bn2", Module: b.BN2}}
	if b.Shortcut != nil {
		cs = append(cs, nn.Child{Name: "shortcut", Module: b.Shortcut})
	}
	return cs
}

// NormPairs implements nn.NormPairer: conv1 feeds bn1 and conv2 feeds
// bn2 (an option-B shortcut is a Sequential, which nn.ConvNorms reads
// itself).
func (b *BasicBlock) NormPairs() [][2]string { return [][2]string{{"conv1", "bn1"}, {"conv2", "bn2"}} }

// Params returns the block's parameters in PyTorch's order.
func (b *BasicBlock) Params() []nn.Param { return nn.ChildParams(b.Children()) }

// Buffers returns the block's batch-norm buffers in PyTorch's order.
func (b *BasicBlock) Buffers() []nn.Param { return nn.ChildBuffers(b.Children()) }

// SetTraining sets the mode of every layer of the block.
func (b *BasicBlock) SetTraining(training bool) { nn.SetChildrenTraining(b.Children(), training) }

// PadShortcut is the parameter-free option-A shortcut of
// akamaster/pytorch_resnet_cifar10,
//
//	F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, planes//4, planes//4))
//
// It keeps every second row and column and places the input channels
// after Lo zero channels, followed by zero channels up to Out.
//
// It is computed as a 1×1 convolution with stride 2 whose fixed 0/1 weight
// maps input channel c to output channel Lo+c; every output element is one
// input element times 1 plus zeros, so the result is exact, and gradients
// flow back to the selected input elements only. A compacted network's
// shortcut (NewPadShortcutMap) copies each input channel to any output
// channel, or drops it.
type PadShortcut struct {
	// In and Out are the input and output channel counts; Lo is the
	// number of zero channels before the copied ones, −1 for a shortcut
	// made by NewPadShortcutMap.
	In, Out, Lo int
	dst         []int            // output channel of each input channel, −1: none
	weight      *autograd.Tensor // (Out, In, 1, 1) selection matrix
}

// NewPadShortcut returns the option-A shortcut from in to out channels,
// padding out/4 channels before the input channels as the reference does.
func NewPadShortcut(in, out int) *PadShortcut {
	lo := out / 4
	if in+lo > out {
		panic(fmt.Sprintf("models.NewPadShortcut: cannot pad %d channels to %d with %d leading zero channels", in, out, lo))
	}
	w := autograd.New(out, in, 1, 1)
	dst := make([]int, in)
	for c := range in {
		w.Data[(lo+c)*in+c] = 1
		dst[c] = lo + c
	}
	return &PadShortcut{In: in, Out: out, Lo: lo, dst: dst, weight: w}
}

// Forward maps x of shape (N, In, H, W) to (N, Out, ⌈H/2⌉, ⌈W/2⌉).
func (p *PadShortcut) Forward(x *autograd.Tensor) *autograd.Tensor {
	if x.Rank() != 4 || x.Dim(1) != p.In {
		panic(fmt.Sprintf("models.PadShortcut: input must have shape (N, %d, H, W), got %v", p.In, x.Shape()))
	}
	return autograd.Conv2d(x, p.weight, nil, 2, 0, 1)
}

// Params returns nil: the shortcut has no parameters.
func (p *PadShortcut) Params() []nn.Param { return nil }

// Buffers returns nil: the shortcut has no buffers.
func (p *PadShortcut) Buffers() []nn.Param { return nil }

// SetTraining does nothing: the shortcut behaves the same in both modes.
func (p *PadShortcut) SetTraining(bool) {}

// ResNet is a CIFAR residual network: a 3×3 stem convolution without bias,
// batch normalisation and ReLU, stages of BasicBlocks (the first block of
// every stage but the first halves the resolution), average pooling and a
// linear classifier.
type ResNet struct {
	Conv1 *nn.Conv2d      // stem convolution, "conv1"
	BN1   *nn.BatchNorm2d // its batch normalisation, "bn1"
	// Stages are layer1, layer2, ...: Sequentials of *BasicBlock.
	Stages []*nn.Sequential
	// PoolKernel is the average-pooling window before the classifier;
	// 0 pools each map over its whole width, as
	// F.avg_pool2d(out, out.size()[3]) does.
	PoolKernel int
	// Linear is the classifier, "linear".
	Linear *nn.Linear
}

// resnetConfig describes a CIFAR ResNet.
type resnetConfig struct {
	// widths gives every layer its width; it fits blocks and kind.
	widths     *Widths
	blocks     []int
	kind       ShortcutKind
	poolKernel int
	kaiming    bool // kaiming_normal_ on conv and linear weights
}

// uniformWidths returns the widths of a ResNet whose stage s has
// blocks[s] blocks of stage[s] channels, its stem stage[0] channels.
func uniformWidths(stage, blocks []int) *Widths {
	w := &Widths{Stem: stage[0]}
	for s, n := range blocks {
		w.Stages = append(w.Stages, slices.Repeat([]BlockWidths{{Inner: stage[s], Out: stage[s]}}, n))
	}
	return w
}

func newResNet(cfg resnetConfig, numClasses int, rng *rand.Rand) *ResNet {
	stem := cfg.widths.Stem
	r := &ResNet{
		Conv1:      nn.NewConv2d(3, stem, 3, nn.ConvOpts{Stride: 1, Padding: 1}, rng),
		BN1:        nn.NewBatchNorm2d(stem),
		PoolKernel: cfg.poolKernel,
	}
	in := stem
	for s, n := range cfg.blocks {
		stage := nn.NewSequential()
		for i := range n {
			stride := 1
			if s > 0 && i == 0 {
				stride = 2
			}
			bw := cfg.widths.Stages[s][i]
			stage.Layers = append(stage.Layers, newBasicBlock(in, bw.Inner, bw.Out, stride, cfg.kind, bw.Pad, rng))
			in = bw.Out
		}
		r.Stages = append(r.Stages, stage)
	}
	r.Linear = nn.NewLinear(in, numClasses, true, rng)
	if cfg.kaiming {
		// akamaster applies kaiming_normal_ to every Conv2d and Linear
		// weight after construction; biases keep their default.
		for _, p := range r.Params() {
			if p.T.Rank() >= 2 {
				nn.KaimingNormal(p.T, rng)
			}
		}
	}
	return r
}

// Forward maps images of shape (N, 3, H, W) to logits (N, classes).
func (r *ResNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	out := r.BN1.ForwardReLU(r.Conv1.Forward(x))
	for _, s := range r.Stages {
		out = s.Forward(out)
	}
	k := r.PoolKernel
	if k == 0 {
		k = out.Dim(3)
	}
	out = autograd.AvgPool2d(out, k, k, 0)
	return r.Linear.Forward(autograd.Flatten(out))
}

// Children returns conv1, bn1, layer1, layer2, ... and linear.
func (r *ResNet) Children() []nn.Child {
	cs := []nn.Child{{Name: "conv1", Module: r.Conv1}, {Name: "bn1", Module: r.BN1}}
	for i, s := range r.Stages {
		cs = append(cs, nn.Child{Name: fmt.Sprintf("layer%d", i+1), Module: s})
	}
	return append(cs, nn.Child{Name: "linear", Module: r.Linear})
}

// NormPairs implements nn.NormPairer: the stem conv1 feeds bn1.
func (r *ResNet) NormPairs() [][2]string { return [][2]string{{"conv1", "bn1"}} }

// Params returns the network's parameters in PyTorch's order.
func (r *ResNet) Params() []nn.Param { return nn.ChildParams(r.Children()) }

// Buffers returns the network's batch-norm buffers in PyTorch's order.
func (r *ResNet) Buffers() []nn.Param { return nn.ChildBuffers(r.Children()) }

// SetTraining sets the mode of every layer.
func (r *ResNet) SetTraining(training bool) { nn.SetChildrenTraining(r.Children(), training) }

// Targets returns, for each input channel, the output channel the
// shortcut copies it to (Lo+i for the reference layout), −1 for none.
func (p *PadShortcut) Targets() []int { return slices.Clone(p.dst) }
