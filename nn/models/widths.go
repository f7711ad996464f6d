package models

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

// Widths gives every layer of a CIFAR network its own channel count, as
// compaction (package nn/prune) leaves it. It is stored as JSON in the
// metadata of a compacted model file, so its field names are part of the
// file format (docs/compact.md).
//
// A VGG has Features; a ResNet has Stem and Stages.
type Widths struct {
	// Features is the VGG configuration: the output channels of each
	// convolution, 0 for each max pooling, in the order of the reference
	// configuration.
	Features []int `json:"features,omitempty"`
	// Stem is the number of output channels of the stem convolution of a
	// ResNet (the residual stream of its first stage).
	Stem int `json:"stem,omitempty"`
	// Stages lists the blocks of every stage.
	Stages [][]BlockWidths `json:"stages,omitempty"`
}

// BlockWidths gives the channels of one BasicBlock.
type BlockWidths struct {
	// Inner is the number of output channels of conv1 (and input
	// channels of conv2).
	Inner int `json:"inner"`
	// Out is the number of output channels of conv2 and of the block:
	// the residual stream after it. A block without a shortcut module
	// (stride 1, identity) has as many as it reads.
	Out int `json:"out"`
	// Pad, for an option-A shortcut, is the output channel that each
	// input channel is copied to (−1: dropped); the other output channels
	// are zero. Nil means the reference layout (Out/4 zero channels
	// first). Option-B shortcuts have no Pad.
	Pad []int `json:"pad,omitempty"`
}

// WithWidths builds the network with the channel counts of w instead of
// the reference widths (and instead of WithWidth). The layer structure
// and the parameter names stay those of the named model; New fails when
// w does not fit it.
func WithWidths(w *Widths) Option { return func(o *options) { o.widths = w } }

// checkVGG checks w against the VGG configuration ref.
func (w *Widths) checkVGG(ref []int) error {
	if len(w.Features) != len(ref) || w.Stem != 0 || w.Stages != nil {
		return fmt.Errorf("widths: a VGG needs %d features entries and nothing else", len(ref))
	}
	for i, c := range w.Features {
		if (c == 0) != (ref[i] == 0) || c < 0 {
			return fmt.Errorf("widths: features[%d] = %d: want %s", i, c, map[bool]string{true: "0 (max pooling)", false: "a positive width"}[ref[i] == 0])
		}
	}
	return nil
}

// checkResNet checks w against a ResNet with the given blocks per stage
// and shortcut kind.
func (w *Widths) checkResNet(blocks []int, kind ShortcutKind) error {
	if w.Features != nil || w.Stem < 1 || len(w.Stages) != len(blocks) {
		return fmt.Errorf("widths: a ResNet needs a positive stem and %d stages", len(blocks))
	}
	in := w.Stem
	for s, st := range w.Stages {
		if len(st) != blocks[s] {
			return fmt.Errorf("widths: stage %d has %d blocks, want %d", s+1, len(st), blocks[s])
		}
		for b, bw := range st {
			where := fmt.Sprintf("widths: layer%d.%d", s+1, b)
			if bw.Inner < 1 || bw.Out < 1 {
				return fmt.Errorf("%s: widths %d, %d must be positive", where, bw.Inner, bw.Out)
			}
			shortcut := (s > 0 && b == 0) || in != bw.Out
			switch {
			case bw.Pad != nil && (!shortcut || kind != ShortcutA):
				return fmt.Errorf("%s: pad given for a block without an option-A shortcut", where)
			case bw.Pad != nil:
				if err := checkPad(bw.Pad, in, bw.Out); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			case shortcut && kind == ShortcutA && in+bw.Out/4 > bw.Out:
				return fmt.Errorf("%s: cannot pad %d channels to %d without a pad map", where, in, bw.Out)
			}
			in = bw.Out
		}
	}
	return nil
}

// checkPad checks an option-A channel map from in to out channels.
func checkPad(pad []int, in, out int) error {
	if len(pad) != in {
		return fmt.Errorf("pad maps %d channels, the block reads %d", len(pad), in)
	}
	seen := make([]bool, out)
	for i, d := range pad {
		if d < -1 || d >= out || (d >= 0 && seen[d]) {
			return fmt.Errorf("pad[%d] = %d: want −1 or an unused channel below %d", i, d, out)
		}
		if d >= 0 {
			seen[d] = true
		}
	}
	return nil
}

// WidthsOf returns the channel counts of a VGG or ResNet of this package
// (with Pad filled in for every option-A shortcut).
func WidthsOf(m nn.Module) (*Widths, error) {
	switch m := m.(type) {
	case *VGG:
		w := &Widths{}
		for _, l := range m.Features.Layers {
			switch l := l.(type) {
			case *nn.Conv2d:
				w.Features = append(w.Features, l.Weight.Dim(0))
			case nn.MaxPool2d:
				w.Features = append(w.Features, 0)
			}
		}
		return w, nil
	case *ResNet:
		w := &Widths{Stem: m.Conv1.Weight.Dim(0)}
		for s, st := range m.Stages {
			var bs []BlockWidths
			for b, l := range st.Layers {
				blk, ok := l.(*BasicBlock)
				if !ok {
					return nil, fmt.Errorf("models.WidthsOf: layer%d.%d is a %T", s+1, b, l)
				}
				bw := BlockWidths{Inner: blk.Conv1.Weight.Dim(0), Out: blk.Conv2.Weight.Dim(0)}
				if p, ok := blk.Shortcut.(*PadShortcut); ok {
					bw.Pad = p.Targets()
				}
				bs = append(bs, bw)
			}
			w.Stages = append(w.Stages, bs)
		}
		return w, nil
	}
	return nil, fmt.Errorf("models.WidthsOf: %T is not a VGG or ResNet", m)
}

// NewLike returns a network of the same kind as m (a VGG or ResNet of
// this package: the same classes, shortcut kind and pooling) with the
// channel counts of w, its weights drawn from rng as New draws them.
func NewLike(m nn.Module, w *Widths, rng *rand.Rand) (nn.Module, error) {
	ref, err := WidthsOf(m)
	if err != nil {
		return nil, fmt.Errorf("models.NewLike: %T is not a VGG or ResNet", m)
	}
	switch m := m.(type) {
	case *VGG:
		if err := w.checkVGG(ref.Features); err != nil {
			return nil, err
		}
		return newVGG(w.Features, m.Classifier.Weight.Dim(0), rng), nil
	case *ResNet:
		cfg := resnetConfig{widths: w, kind: ShortcutB, poolKernel: m.PoolKernel}
		for _, st := range ref.Stages {
			cfg.blocks = append(cfg.blocks, len(st))
			for _, bw := range st {
				if bw.Pad != nil {
					cfg.kind = ShortcutA
				}
			}
		}
		if err := w.checkResNet(cfg.blocks, cfg.kind); err != nil {
			return nil, err
		}
		return newResNet(cfg, m.Linear.Weight.Dim(0), rng), nil
	}
	return nil, fmt.Errorf("models.NewLike: %T is not a VGG or ResNet", m)
}

// NewPadShortcutMap returns an option-A shortcut from in to out channels
// that copies input channel i to output channel dst[i] (none when
// dst[i] = −1), as compaction leaves one. It panics on a bad map.
func NewPadShortcutMap(in, out int, dst []int) *PadShortcut {
	if err := checkPad(dst, in, out); err != nil {
		panic("models.NewPadShortcutMap: " + err.Error())
	}
	w := autograd.New(out, in, 1, 1)
	for c, d := range dst {
		if d >= 0 {
			w.Data[d*in+c] = 1
		}
	}
	return &PadShortcut{In: in, Out: out, Lo: -1, dst: slices.Clone(dst), weight: w}
}
