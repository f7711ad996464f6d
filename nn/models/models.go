package models

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/nn"
)

// Option changes how New builds a model.
type Option func(*options)

type options struct {
	shortcut ShortcutKind
	width    float64
	widths   *Widths
}

// WithShortcut selects the shortcut of the akamaster ResNets (resnet20,
// resnet32, ...); the default is ShortcutA. The kuangliu ResNets always
// use option B, and the option does not apply to them.
func WithShortcut(k ShortcutKind) Option { return func(o *options) { o.shortcut = k } }

// WithWidth multiplies every channel count by f (rounded, at least 1); the
// default is 1. Narrow models keep the layer structure and names of the
// full ones, which makes them cheap stand-ins in tests.
func WithWidth(f float64) Option { return func(o *options) { o.width = f } }

// Names returns a new slice of the model names New accepts besides other
// akamaster depths 6n+2.
func Names() []string {
	return []string{"vgg16", "resnet20", "resnet32", "resnet44", "resnet56", "resnet18", "resnet34"}
}

// New returns the CIFAR model called name with numClasses outputs, its
// initial weights drawn from rng:
//
//   - "vgg16": kuangliu VGG('VGG16') with batch normalisation;
//   - "resnet20", "resnet32", "resnet44", "resnet56" (any depth 6n+2):
//     akamaster resnetN, widths 16, 32, 64, kaiming_normal_ weights and
//     option-A shortcuts unless WithShortcut(ShortcutB) is given;
//   - "resnet18", "resnet34": kuangliu ResNet18/ResNet34, widths 64 to
//     512, blocks [2,2,2,2] / [3,4,6,3], option-B shortcuts.
func New(name string, numClasses int, rng *rand.Rand, opts ...Option) (nn.Module, error) {
	a, err := plan(name, numClasses, opts)
	if err != nil {
		return nil, err
	}
	if a.vgg != nil {
		return newVGG(a.vgg, numClasses, rng), nil
	}
	return newResNet(a.resnet, numClasses, rng), nil
}

// arch is the layer structure New builds: a VGG configuration or a
// ResNet configuration with its widths.
type arch struct {
	vgg    []int
	resnet resnetConfig
}

// plan checks the arguments of New against the model's structure and the
// documented maxima (MaxResNetDepth, MaxWidth, MaxClasses, MaxChannels,
// MaxWeights) and returns the structure, allocating nothing in
// proportion to the network.
func plan(name string, numClasses int, opts []Option) (arch, error) {
	o := options{shortcut: ShortcutA, width: 1}
	for _, f := range opts {
		f(&o)
	}
	if numClasses < 1 || numClasses > MaxClasses {
		return arch{}, fmt.Errorf("models.New(%q): number of classes %d: want 1 to %d", name, numClasses, MaxClasses)
	}
	if !(o.width > 0 && o.width <= MaxWidth) {
		return arch{}, fmt.Errorf("models.New(%q): width multiplier %g: want more than 0 and at most %d", name, o.width, MaxWidth)
	}
	if o.shortcut != ShortcutA && o.shortcut != ShortcutB {
		return arch{}, fmt.Errorf("models.New(%q): unknown shortcut kind %v", name, o.shortcut)
	}
	if o.widths != nil {
		if err := o.widths.checkMax(); err != nil {
			return arch{}, fmt.Errorf("models.New(%q): %w", name, err)
		}
	}
	scale := func(ws ...int) []int {
		out := make([]int, len(ws))
		for i, w := range ws {
			out[i] = max(1, int(math.Round(float64(w)*o.width)))
		}
		return out
	}
	var a arch
	switch name {
	case "vgg16":
		if o.widths != nil {
			if err := o.widths.checkVGG(vgg16Config); err != nil {
				return arch{}, fmt.Errorf("models.New(%q): %w", name, err)
			}
			a.vgg = o.widths.Features
			break
		}
		a.vgg = make([]int, len(vgg16Config))
		for i, c := range vgg16Config {
			if c != 0 {
				a.vgg[i] = scale(c)[0]
			}
		}
	case "resnet18", "resnet34":
		blocks := []int{2, 2, 2, 2}
		if name == "resnet34" {
			blocks = []int{3, 4, 6, 3}
		}
		cfg, err := o.resnet(name, scale(64, 128, 256, 512), resnetConfig{blocks: blocks, kind: ShortcutB, poolKernel: 4})
		if err != nil {
			return arch{}, err
		}
		a.resnet = cfg
	default:
		depth, err := resnetDepth(name)
		if err != nil {
			return arch{}, err
		}
		n := (depth - 2) / 6
		cfg, err := o.resnet(name, scale(16, 32, 64), resnetConfig{blocks: []int{n, n, n}, kind: o.shortcut, kaiming: true})
		if err != nil {
			return arch{}, err
		}
		a.resnet = cfg
	}
	if w := a.weights(numClasses); w > MaxWeights {
		return arch{}, fmt.Errorf("models.New(%q): %d weights, more than the maximum %d", name, w, MaxWeights)
	}
	return a, nil
}

// resnet returns the ResNet cfg with the per-layer widths of o if given,
// else with stage[s] channels throughout stage s.
func (o *options) resnet(name string, stage []int, cfg resnetConfig) (resnetConfig, error) {
	if o.widths != nil {
		if err := o.widths.checkResNet(cfg.blocks, cfg.kind); err != nil {
			return resnetConfig{}, fmt.Errorf("models.New(%q): %w", name, err)
		}
		cfg.widths = o.widths
	} else {
		cfg.widths = uniformWidths(stage, cfg.blocks)
	}
	return cfg, nil
}
