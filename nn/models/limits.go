package models

import (
	"fmt"
	"strconv"
	"strings"
)

// Documented maxima of New. They bound what a model file's metadata, a
// stored run configuration or a flag can ask for, so that no such value
// makes a program allocate without bound; New (and Check) refuse larger
// values with an error.
const (
	// MaxResNetDepth is the deepest akamaster ResNet, resnet1202 (He et
	// al., 2016, the deepest CIFAR network of the paper).
	MaxResNetDepth = 1202
	// MaxWidth is the largest channel multiplier of WithWidth.
	MaxWidth = 16
	// MaxClasses is the largest number of outputs.
	MaxClasses = 100_000
	// MaxChannels is the largest channel count of one layer in Widths
	// (resnet18's 512 channels at MaxWidth).
	MaxChannels = 512 * MaxWidth
	// MaxLMSize is the largest embedding and hidden size of a
	// LanguageModel, and MaxLMLayers its largest number of LSTM layers.
	MaxLMSize   = 4096
	MaxLMLayers = 16
	// MaxBatch is the largest batch of images or token streams the
	// training programs accept, and MaxBPTT the longest truncated
	// backpropagation length; MaxStepTokens bounds their product (the
	// tokens of one language-model step).
	MaxBatch      = 4096
	MaxBPTT       = 4096
	MaxStepTokens = 1 << 16
	// MaxWeights is the largest number of convolution and linear weights
	// of a network New builds (4 GiB of float32).
	MaxWeights = 1 << 30
)

// resnetDepth returns the depth of an akamaster ResNet name
// "resnet<6n+2>", at least 8 and at most MaxResNetDepth.
func resnetDepth(name string) (int, error) {
	if d, ok := strings.CutPrefix(name, "resnet"); ok {
		depth, err := strconv.Atoi(d)
		if err == nil && depth >= 8 && depth <= MaxResNetDepth && (depth-2)%6 == 0 {
			return depth, nil
		}
	}
	return 0, fmt.Errorf("models.New: unknown model %q (known: %s, or resnet<6n+2> up to resnet%d)", name, strings.Join(Names(), ", "), MaxResNetDepth)
}

// CheckName reports whether New knows the model name: one of Names or an
// akamaster depth resnet<6n+2> up to MaxResNetDepth.
func CheckName(name string) error {
	for _, n := range Names() {
		if n == name {
			return nil
		}
	}
	_, err := resnetDepth(name)
	return err
}

// Check reports whether New would build the model: the name is known, the
// options fit it and every size is within the documented maxima. It
// allocates nothing in proportion to the network.
func Check(name string, numClasses int, opts ...Option) error {
	_, err := plan(name, numClasses, opts)
	return err
}

// WeightCount returns the number of convolution and linear weights
// (without biases and batch-norm parameters) of the model New builds
// with these arguments, without building it. A model file holds at least
// that many values, which bounds what its metadata may describe.
func WeightCount(name string, numClasses int, opts ...Option) (int64, error) {
	a, err := plan(name, numClasses, opts)
	if err != nil {
		return 0, err
	}
	return a.weights(numClasses), nil
}

// weights returns the number of convolution and linear weights of a.
func (a arch) weights(numClasses int) int64 {
	var n int64
	in := int64(3)
	if a.vgg != nil {
		for _, c := range a.vgg {
			if c != 0 {
				n += 9 * in * int64(c)
				in = int64(c)
			}
		}
		return n + in*int64(numClasses)
	}
	w := a.resnet.widths
	in = int64(w.Stem)
	n = 27 * in
	for _, st := range w.Stages {
		for _, bw := range st {
			inner, out := int64(bw.Inner), int64(bw.Out)
			n += 9*in*inner + 9*inner*out
			in = out
		}
	}
	return n + in*int64(numClasses)
}

// checkMax checks every channel count of w against MaxChannels and the
// number of layers against the deepest model.
func (w *Widths) checkMax() error {
	if len(w.Features) > len(vgg16Config) || len(w.Stages) > 4 {
		return fmt.Errorf("widths: %d features entries and %d stages: more than any model has", len(w.Features), len(w.Stages))
	}
	check := func(where string, c int) error {
		if c > MaxChannels {
			return fmt.Errorf("widths: %s = %d: more than the maximum %d channels", where, c, MaxChannels)
		}
		return nil
	}
	for i, c := range w.Features {
		if err := check(fmt.Sprintf("features[%d]", i), c); err != nil {
			return err
		}
	}
	if err := check("stem", w.Stem); err != nil {
		return err
	}
	for s, st := range w.Stages {
		if len(st) > (MaxResNetDepth-2)/6 {
			return fmt.Errorf("widths: stage %d has %d blocks: more than the deepest model's %d", s+1, len(st), (MaxResNetDepth-2)/6)
		}
		for b, bw := range st {
			where := fmt.Sprintf("layer%d.%d", s+1, b)
			if err := check(where+" inner", bw.Inner); err != nil {
				return err
			}
			if err := check(where+" out", bw.Out); err != nil {
				return err
			}
		}
	}
	return nil
}
