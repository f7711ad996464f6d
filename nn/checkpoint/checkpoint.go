// Package checkpoint saves and restores models and training runs as
// safetensors files that PyTorch can read.
//
// # Model files
//
// SaveModel writes the state dict of an nn.Module: every parameter and
// buffer under its PyTorch state_dict name (nn.StateDict), float tensors
// as F32 and the batch-norm counters num_batches_tracked as I64 scalars
// (shape []), exactly as torch stores them. Such a file loads into the
// reference PyTorch model with
//
//	model.load_state_dict(tensors, strict=True)
//
// where tensors is the dict read by safetensors.torch.load_file (or by
// testdata/fixturelib.py's load). The model file holds nothing else except
// string metadata, which PyTorch's loader never sees.
//
// LoadModel and LoadStateDict read such files, and also files written by
// PyTorch: float tensors may be F32, F64, F16 or BF16 (converted to
// float32), counters any integer type, and a rank-0 tensor may also be
// given with shape [1], as PyTorch's loader accepts. Loading is strict by
// default (every key of the model present, no extra keys, equal shapes)
// and all-or-nothing: the model is changed only when every tensor passed
// the checks. A NaN or infinite value anywhere, or a negative value in a
// batch-norm running_var, is an error naming the tensor: such a file
// would only produce NaN predictions.
//
// # Compressed files
//
// SaveCompressedModel writes a model file for deployment in which sparse
// tensors are stored as a bitmap or indices plus their nonzero values and
// binary tensors (±scale) as packed sign bits plus the scales, whichever
// is smallest per tensor (Compress; the layout is in
// docs/deploy-format.md). Every loader of this package (LoadModel,
// LoadStateDict, LoadWeights) expands such files transparently and exactly
// (Expand).
//
// # Training checkpoints
//
// The checkpoints of package nn/train hold a model among other tensors,
// under key prefixes defined here so that every reader agrees on them:
//
//	model/<state_dict name>   the model, as in a model file (ModelPrefix)
//	aux/<name>                tensors of the run outside the model (AuxPrefix)
//	optim/<key>, optim_int/<key>   the optimizer's state (OptimPrefix, OptimIntPrefix)
//	__metadata__              "format" (FormatKey) names the checkpoint format
//
// LoadModel and LoadStateDict with LoadOptions.Prefix = ModelPrefix read
// the model out of such a file; PyTorch code keeps the keys that start
// with "model/" and strips that prefix.
//
// # Integrity
//
// Every file this package writes is sealed (safetensors.Sealed: a CRC-32C
// of its header and data in the metadata) and every read verifies the
// seal, so a corrupted file is an error naming it rather than a silently
// different model. Damage to the seal itself is an error too (a renamed
// key, a changed prefix: see safetensors.ChecksumKey); files with no trace
// of a seal (PyTorch's, ones written before seals) load unchecked. All writes are atomic (temporary file, fsync, rename), so a
// crash leaves either the old file or the new one.
package checkpoint

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// File names and key prefixes of checkpoints.
const (
	// ModelFileName is the conventional name of a model file in a run
	// folder.
	ModelFileName = "model.safetensors"
	// FormatKey is the metadata entry naming the format of a training
	// checkpoint; model files have none.
	FormatKey = "format"

	// ModelPrefix, AuxPrefix, OptimPrefix and OptimIntPrefix start the
	// names of the model tensors, auxiliary tensors, optimizer tensors and
	// optimizer integers in a training checkpoint.
	ModelPrefix    = "model/"
	AuxPrefix      = "aux/"
	OptimPrefix    = "optim/"
	OptimIntPrefix = "optim_int/"
)

// StateDict returns the parameters and buffers of m as a safetensors
// file: float32 tensors as F32 with their shapes, counters (nn.Param.Int64)
// as I64 with their shapes, all under their state_dict names, which prefix
// precedes. It panics if m has two tensors of the same name (a bug in the
// module).
func StateDict(m nn.Module, prefix string) *safetensors.File {
	f := &safetensors.File{Tensors: map[string]safetensors.Tensor{}}
	addState(f, m, prefix)
	return f
}

func addState(f *safetensors.File, m nn.Module, prefix string) {
	for _, p := range nn.StateDict(m) {
		name := prefix + p.Name
		if _, dup := f.Tensors[name]; dup {
			panic(fmt.Sprintf("checkpoint: the model has two tensors named %q", p.Name))
		}
		shape := slices.Clone(p.T.Shape())
		if p.Int64 {
			v := make([]int64, len(p.T.Data))
			for i, x := range p.T.Data {
				v[i] = int64(x)
			}
			f.Set(name, safetensors.FromInt64(shape, v))
			continue
		}
		f.Set(name, safetensors.FromFloat32(shape, p.T.Data))
	}
}

// SaveModel writes the state dict of m to path atomically, with metadata
// (which may be nil) in the file's "__metadata__" entry.
func SaveModel(path string, m nn.Module, metadata map[string]string) error {
	f := StateDict(m, "")
	if len(metadata) > 0 {
		f.Metadata = maps.Clone(metadata)
	}
	if err := safetensors.WriteFileAtomic(path, f); err != nil {
		return fmt.Errorf("checkpoint: saving model: %w", err)
	}
	return nil
}

// LoadModel reads the model file at path into m strictly and returns the
// file's metadata (nil when it has none).
func LoadModel(path string, m nn.Module) (map[string]string, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := LoadStateDict(f, m, LoadOptions{}); err != nil {
		return nil, fmt.Errorf("checkpoint: loading %s: %w", path, err)
	}
	return f.Metadata, nil
}

// LoadWeights copies the model tensors of f into m strictly (see
// LoadStateDict), whatever wrote f: a model file of this package or of
// PyTorch, a state dict saved from torch.nn.DataParallel (every name
// starting with "module."), or a training checkpoint (its ModelPrefix
// tensors: PyTorch names never hold the "/").
func LoadWeights(f *safetensors.File, m nn.Module) error {
	opt := LoadOptions{}
	if anyPrefixed(f, ModelPrefix) {
		opt.Prefix = ModelPrefix
	} else if allPrefixed(f, "module.") {
		opt.Prefix = "module."
	}
	return LoadStateDict(f, m, opt)
}

// anyPrefixed reports whether some tensor name of f starts with prefix.
func anyPrefixed(f *safetensors.File, prefix string) bool {
	for name := range f.Tensors {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// allPrefixed reports whether every tensor name of f starts with prefix.
func allPrefixed(f *safetensors.File, prefix string) bool {
	for name := range f.Tensors {
		if !strings.HasPrefix(name, prefix) {
			return false
		}
	}
	return len(f.Tensors) > 0
}

// LoadOptions controls LoadStateDict.
type LoadOptions struct {
	// Prefix selects the tensors whose names start with it and strips it
	// (ModelPrefix for a training-state file, "module." for a model saved
	// from torch.nn.DataParallel). Other tensors are ignored.
	Prefix string
	// NonStrict ignores keys of the file the model does not have and
	// leaves model tensors the file does not have unchanged, as
	// load_state_dict(strict=False). Shapes must still match.
	NonStrict bool
}

// LoadStateDict copies the tensors of f into the parameters and buffers of
// m with the same state_dict names (see LoadOptions). It first checks every
// tensor — names, shapes, dtypes and, for counters, whole non-negative
// values — and changes m only when all pass, so on error m is untouched.
// The error lists the missing and unexpected keys or names the first bad
// tensor with both shapes.
func LoadStateDict(f *safetensors.File, m nn.Module, opt LoadOptions) error {
	// Names and shapes are checked before any compressed tensor expands:
	// a tensor the model does not have is never expanded, and one it has
	// expands to the model's own shape at most.
	encs, err := encodings(f)
	if err != nil {
		return err
	}
	compressed := map[string]bool{} // the names (without Prefix) in the file
	for name := range f.Tensors {
		if i := strings.LastIndex(name, PartSeparator); i >= 0 {
			if _, ok := encs[name[:i]]; ok {
				continue // a part, checked when its tensor expands
			}
		}
		if rest, ok := strings.CutPrefix(name, opt.Prefix); ok {
			compressed[rest] = false
		}
	}
	for name := range encs {
		if rest, ok := strings.CutPrefix(name, opt.Prefix); ok {
			compressed[rest] = true
		}
	}
	state := nn.StateDict(m)
	var missing []string
	want := map[string]nn.Param{}
	for _, p := range state {
		want[p.Name] = p
		if _, ok := compressed[p.Name]; !ok {
			missing = append(missing, p.Name)
		}
	}
	var unexpected []string
	for name := range compressed {
		if _, ok := want[name]; !ok {
			unexpected = append(unexpected, opt.Prefix+name)
		}
	}
	slices.Sort(unexpected)
	if !opt.NonStrict && (len(missing) > 0 || len(unexpected) > 0) {
		return fmt.Errorf("state dict does not match the model: %s", keyReport(missing, unexpected))
	}
	for _, p := range state {
		if compressed[p.Name] {
			if err := checkShape(p, encs[opt.Prefix+p.Name].Shape); err != nil {
				return fmt.Errorf("tensor %q: %w", opt.Prefix+p.Name, err)
			}
		}
	}
	f, err = expand(f, encs, func(name string) bool {
		rest, ok := strings.CutPrefix(name, opt.Prefix)
		_, wanted := want[rest]
		return ok && wanted
	})
	if err != nil {
		return err
	}
	have := map[string]safetensors.Tensor{}
	for name, t := range f.Tensors {
		if rest, ok := strings.CutPrefix(name, opt.Prefix); ok {
			have[rest] = t
		}
	}

	values := make([][]float32, len(state))
	for i, p := range state {
		t, ok := have[p.Name]
		if !ok {
			continue
		}
		v, err := convert(p, t)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", opt.Prefix+p.Name, err)
		}
		values[i] = v
	}
	for i, p := range state {
		if values[i] != nil {
			copy(p.T.Data, values[i])
		}
	}
	return nil
}

// keyReport formats missing and unexpected keys, at most eight of each.
func keyReport(missing, unexpected []string) string {
	list := func(keys []string) string {
		const most = 8
		if len(keys) <= most {
			return strings.Join(keys, ", ")
		}
		return strings.Join(keys[:most], ", ") + fmt.Sprintf(" and %d more", len(keys)-most)
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d missing keys (%s)", len(missing), list(missing)))
	}
	if len(unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("%d unexpected keys (%s)", len(unexpected), list(unexpected)))
	}
	return strings.Join(parts, "; ")
}

// checkShape checks a tensor's shape in the file against the model
// tensor p (a scalar may be stored as [1]).
func checkShape(p nn.Param, shape []int) error {
	have := p.T.Shape()
	if !slices.Equal(have, shape) && !(len(have) == 0 && slices.Equal(shape, []int{1})) {
		return fmt.Errorf("shape %v in the file, the model has %v", shape, have)
	}
	return nil
}

// convert checks t against the model tensor p and returns its elements as
// float32.
func convert(p nn.Param, t safetensors.Tensor) ([]float32, error) {
	if err := checkShape(p, t.Shape); err != nil {
		return nil, err
	}
	if p.Int64 {
		var v []int64
		var err error
		if isFloat(t.DType) {
			v, err = integral(t)
		} else {
			v, err = t.Int64()
		}
		if err != nil {
			return nil, err
		}
		out := make([]float32, len(v))
		for i, x := range v {
			if x < 0 {
				return nil, fmt.Errorf("counter value %d is negative", x)
			}
			out[i] = float32(x)
		}
		return out, nil
	}
	if !isFloat(t.DType) {
		return nil, fmt.Errorf("dtype %s: a floating-point tensor (F32, F64, F16 or BF16) is needed", t.DType)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, err
	}
	variance := strings.HasSuffix(p.Name, "running_var")
	for i, x := range v {
		if x != x || x-x != 0 {
			return nil, fmt.Errorf("element %d is %v: weights must be finite", i, x)
		}
		if variance && x < 0 {
			return nil, fmt.Errorf("element %d is %v: a running variance must not be negative", i, x)
		}
	}
	return v, nil
}

func isFloat(d safetensors.DType) bool {
	switch d {
	case safetensors.F32, safetensors.F64, safetensors.F16, safetensors.BF16:
		return true
	}
	return false
}

// integral returns the elements of the floating-point tensor t as integers,
// failing if one is not a whole number.
func integral(t safetensors.Tensor) ([]int64, error) {
	f, err := t.Float64()
	if err != nil {
		return nil, err
	}
	v := make([]int64, len(f))
	for i, x := range f {
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return nil, fmt.Errorf("counter element %d is %v, not a whole number", i, x)
		}
		v[i] = int64(x)
	}
	return v, nil
}
