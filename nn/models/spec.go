package models

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/internal/cifarinfo"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// Metadata keys of a model file that describe its network (see Spec).
const (
	KeyModel      = "model"       // a name New accepts, e.g. "resnet20"
	KeyWidth      = "width"       // channel multiplier, e.g. "1" or "0.5"
	KeyShortcut   = "shortcut"    // "A" or "B" (akamaster ResNets)
	KeyNumClasses = "num_classes" // number of outputs, e.g. "10"
	KeyMean       = "mean"        // JSON array of the 3 per-channel means
	KeyStd        = "std"         // JSON array of the 3 per-channel standard deviations
	KeyClasses    = "classes"     // JSON array of the class names
	KeyWidths     = "widths"      // JSON Widths of a compacted network
)

// Spec describes the network of a model file and how its inputs are
// prepared. Files written by cmd/cifar (and by any program that stores
// Spec.Metadata with checkpoint.SaveModel) carry it in their safetensors
// metadata; for files written by PyTorch, the caller gives it to
// nn/infer.Load.
//
// Zero fields mean "not given": nn/infer.Load fills them from the file and
// then from the defaults noted below (Complete).
type Spec struct {
	// Model is the architecture, a name New accepts ("resnet20",
	// "vgg16", ...). There is no default.
	Model string
	// Width is the channel multiplier of WithWidth; default 1.
	Width float64
	// Shortcut is "A" or "B", the shortcut of the akamaster ResNets
	// (WithShortcut); default "A".
	Shortcut string
	// NumClasses is the number of outputs; default 10.
	NumClasses int
	// Mean and Std are the per-channel (R, G, B) normalisation constants
	// of training: each input value is (pixel/255 - Mean[c]) / Std[c].
	// Default the CIFAR-10 constants cmd/cifar trains with (the values
	// of cifar10.DefaultMean and cifar10.DefaultStd in datasets/cifar10).
	Mean, Std []float32
	// Classes names the outputs; default the CIFAR-10 class names
	// (cifar10.ClassNames()) when
	// NumClasses is 10, otherwise the decimal class indices.
	Classes []string
	// Widths gives every layer its channel count (a network compacted by
	// nn/prune.Compact); nil means the widths of Model and Width.
	Widths *Widths
}

// Metadata returns s as model-file metadata under the Key constants
// (zero fields are left out), for checkpoint.SaveModel.
func (s Spec) Metadata() map[string]string {
	m := map[string]string{}
	if s.Model != "" {
		m[KeyModel] = s.Model
	}
	if s.Width != 0 {
		m[KeyWidth] = strconv.FormatFloat(s.Width, 'g', -1, 64)
	}
	if s.Shortcut != "" {
		m[KeyShortcut] = s.Shortcut
	}
	if s.NumClasses != 0 {
		m[KeyNumClasses] = strconv.Itoa(s.NumClasses)
	}
	for key, v := range map[string][]float32{KeyMean: s.Mean, KeyStd: s.Std} {
		if v != nil {
			b, _ := json.Marshal(v) // float32 values always encode
			m[key] = string(b)
		}
	}
	if s.Classes != nil {
		b, _ := json.Marshal(s.Classes)
		m[KeyClasses] = string(b)
	}
	if s.Widths != nil {
		b, _ := json.Marshal(s.Widths)
		m[KeyWidths] = string(b)
	}
	return m
}

// SpecFromMetadata reads the Key entries of model-file metadata; entries
// that are absent leave their field zero. It fails on a malformed entry.
func SpecFromMetadata(meta map[string]string) (Spec, error) {
	var s Spec
	var err error
	bad := func(key string, e error) error {
		return fmt.Errorf("metadata %s=%q: %v", key, meta[key], e)
	}
	s.Model = meta[KeyModel]
	if v, ok := meta[KeyWidth]; ok {
		if s.Width, err = strconv.ParseFloat(v, 64); err != nil {
			return Spec{}, bad(KeyWidth, err)
		}
	}
	s.Shortcut = meta[KeyShortcut]
	if v, ok := meta[KeyNumClasses]; ok {
		if s.NumClasses, err = strconv.Atoi(v); err != nil {
			return Spec{}, bad(KeyNumClasses, err)
		}
	}
	for key, dst := range map[string]*[]float32{KeyMean: &s.Mean, KeyStd: &s.Std} {
		if v, ok := meta[key]; ok {
			if err := json.Unmarshal([]byte(v), dst); err != nil {
				return Spec{}, bad(key, err)
			}
		}
	}
	if v, ok := meta[KeyClasses]; ok {
		if err := json.Unmarshal([]byte(v), &s.Classes); err != nil {
			return Spec{}, bad(KeyClasses, err)
		}
	}
	if v, ok := meta[KeyWidths]; ok {
		s.Widths = new(Widths)
		if err := json.Unmarshal([]byte(v), s.Widths); err != nil {
			return Spec{}, bad(KeyWidths, err)
		}
	}
	return s, nil
}

// Merge returns s with every zero field taken from base.
func (s Spec) Merge(base Spec) Spec {
	if s.Model == "" {
		s.Model = base.Model
	}
	if s.Width == 0 {
		s.Width = base.Width
	}
	if s.Shortcut == "" {
		s.Shortcut = base.Shortcut
	}
	if s.NumClasses == 0 {
		s.NumClasses = base.NumClasses
	}
	if s.Mean == nil {
		s.Mean = base.Mean
	}
	if s.Std == nil {
		s.Std = base.Std
	}
	if s.Classes == nil {
		s.Classes = base.Classes
	}
	if s.Widths == nil {
		s.Widths = base.Widths
	}
	return s
}

// Complete returns s with the defaults filled in (see Spec) and checks
// it, the normalisation constants included.
func (s Spec) Complete() (Spec, error) {
	if s.Model == "" {
		return Spec{}, fmt.Errorf("no architecture: the file has no %q metadata (written by PyTorch?), so Spec.Model must name it", KeyModel)
	}
	if s.Width == 0 {
		s.Width = 1
	}
	if s.Shortcut == "" {
		s.Shortcut = "A"
	}
	s.Shortcut = strings.ToUpper(s.Shortcut)
	if s.Shortcut != "A" && s.Shortcut != "B" {
		return Spec{}, fmt.Errorf("shortcut %q: want A or B", s.Shortcut)
	}
	if s.NumClasses == 0 {
		s.NumClasses = cifarinfo.NumClasses
	}
	if s.NumClasses < 1 {
		return Spec{}, fmt.Errorf("number of classes %d: want at least 1", s.NumClasses)
	}
	if s.NumClasses > MaxClasses {
		return Spec{}, fmt.Errorf("%s %d: more than the maximum %d", KeyNumClasses, s.NumClasses, MaxClasses)
	}
	if s.Mean == nil {
		s.Mean = cifarinfo.Mean()
	}
	if s.Std == nil {
		s.Std = cifarinfo.Std()
	}
	s.Mean, s.Std = slices.Clone(s.Mean), slices.Clone(s.Std)
	if err := s.checkNorm(); err != nil {
		return Spec{}, err
	}
	switch {
	case s.Classes != nil:
		if len(s.Classes) != s.NumClasses {
			return Spec{}, fmt.Errorf("%d class names for %d classes", len(s.Classes), s.NumClasses)
		}
		s.Classes = slices.Clone(s.Classes)
	case s.NumClasses == cifarinfo.NumClasses:
		s.Classes = cifarinfo.ClassNames()
		s.Classes = slices.Clone(s.Classes)
	default:
		s.Classes = make([]string, s.NumClasses)
		for i := range s.Classes {
			s.Classes[i] = strconv.Itoa(i)
		}
	}
	return s, nil
}

// Options returns the options of the function New that build the
// network of the complete s (see Complete).
func (s Spec) Options() []Option {
	opts := []Option{WithWidth(s.Width)}
	if s.Shortcut == "B" {
		opts = append(opts, WithShortcut(ShortcutB))
	}
	if s.Widths != nil {
		opts = append(opts, WithWidths(s.Widths))
	}
	return opts
}

// Validate checks the complete s (see Complete) before anything
// is built: a known model, the sizes within the documented maxima of
// package models and, when f is not nil, a network of the size the file
// f implies: at most fileSlack times the values f holds plus
// fileMargin (a smaller mismatch reaches checkpoint.LoadWeights, whose
// error names the tensor). Each error names the metadata key at fault.
func (s Spec) Validate(f *safetensors.File) error {
	if err := CheckName(s.Model); err != nil {
		return fmt.Errorf("%s %q: %w", KeyModel, s.Model, err)
	}
	if !(s.Width > 0 && s.Width <= MaxWidth) {
		return fmt.Errorf("%s %g: want more than 0 and at most %d", KeyWidth, s.Width, MaxWidth)
	}
	if !(s.NumClasses >= 1 && s.NumClasses <= MaxClasses) {
		return fmt.Errorf("%s %d: want 1 to %d", KeyNumClasses, s.NumClasses, MaxClasses)
	}
	key := fmt.Sprintf("%s %s, %s %g, %s %d", KeyModel, s.Model, KeyWidth, s.Width, KeyNumClasses, s.NumClasses)
	if s.Widths != nil {
		key += ", " + KeyWidths
	}
	n, err := WeightCount(s.Model, s.NumClasses, s.Options()...)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if f == nil {
		return nil
	}
	var have int64
	for _, t := range f.Tensors {
		have += int64(t.Numel())
	}
	if n > fileSlack*have+fileMargin {
		return fmt.Errorf("%s: the network needs %d weights, the file holds %d values", key, n, have)
	}
	return nil
}

// Build returns the network s describes, with arbitrary (seed 0)
// initial weights that a state dict then replaces.
func (s Spec) Build() (nn.Module, error) {
	return s.New(rand.New(rand.NewPCG(0, 0)))
}

// New returns the network s describes, its initial weights drawn from rng
// as the function New draws them.
func (s Spec) New(rng *rand.Rand) (nn.Module, error) {
	s, err := s.Complete()
	if err != nil {
		return nil, err
	}
	return New(s.Model, s.NumClasses, rng, s.Options()...)
}

// fileSlack and fileMargin bound the network Validate accepts for a
// file: metadata cannot make a small file allocate a large network.
const (
	fileSlack  = 16
	fileMargin = 1 << 20
)

// checkNorm checks the normalisation constants with the normaliser's own
// rule (cifarinfo.CheckNormalization).
func (s Spec) checkNorm() error { return cifarinfo.CheckNormalization(s.Mean, s.Std) }
