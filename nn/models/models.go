package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

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

// Names lists the model names New accepts besides other akamaster depths
// 6n+2.
var Names = []string{"vgg16", "resnet20", "resnet32", "resnet44", "resnet56", "resnet18", "resnet34"}

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
	o := options{shortcut: ShortcutA, width: 1}
	for _, f := range opts {
		f(&o)
	}
	if numClasses < 1 {
		return nil, fmt.Errorf("models.New(%q): number of classes must be positive, got %d", name, numClasses)
	}
	if !(o.width > 0) || math.IsInf(o.width, 0) {
		return nil, fmt.Errorf("models.New(%q): width multiplier must be positive, got %g", name, o.width)
	}
	if o.shortcut != ShortcutA && o.shortcut != ShortcutB {
		return nil, fmt.Errorf("models.New(%q): unknown shortcut kind %v", name, o.shortcut)
	}
	scale := func(ws ...int) []int {
		out := make([]int, len(ws))
		for i, w := range ws {
			out[i] = max(1, int(math.Round(float64(w)*o.width)))
		}
		return out
	}
	switch name {
	case "vgg16":
		if o.widths != nil {
			if err := o.widths.checkVGG(vgg16Config); err != nil {
				return nil, fmt.Errorf("models.New(%q): %v", name, err)
			}
			return newVGG(o.widths.Features, numClasses, rng), nil
		}
		cfg := make([]int, len(vgg16Config))
		for i, c := range vgg16Config {
			if c != 0 {
				cfg[i] = scale(c)[0]
			}
		}
		return newVGG(cfg, numClasses, rng), nil
	case "resnet18", "resnet34":
		blocks := []int{2, 2, 2, 2}
		if name == "resnet34" {
			blocks = []int{3, 4, 6, 3}
		}
		return o.resnet(name, scale(64, 128, 256, 512), resnetConfig{blocks: blocks, kind: ShortcutB, poolKernel: 4}, numClasses, rng)
	}
	if d, ok := strings.CutPrefix(name, "resnet"); ok {
		depth, err := strconv.Atoi(d)
		if err == nil && depth >= 8 && (depth-2)%6 == 0 {
			n := (depth - 2) / 6
			cfg := resnetConfig{blocks: []int{n, n, n}, kind: o.shortcut, kaiming: true}
			return o.resnet(name, scale(16, 32, 64), cfg, numClasses, rng)
		}
	}
	return nil, fmt.Errorf("models.New: unknown model %q (known: %s, or resnet<6n+2>)", name, strings.Join(Names, ", "))
}

// resnet builds the ResNet cfg with the per-layer widths of o if given,
// else with stage[s] channels throughout stage s.
func (o *options) resnet(name string, stage []int, cfg resnetConfig, numClasses int, rng *rand.Rand) (nn.Module, error) {
	if o.widths != nil {
		if err := o.widths.checkResNet(cfg.blocks, cfg.kind); err != nil {
			return nil, fmt.Errorf("models.New(%q): %v", name, err)
		}
		cfg.widths = o.widths
	} else {
		cfg.widths = uniformWidths(stage, cfg.blocks)
	}
	return newResNet(cfg, numClasses, rng), nil
}
