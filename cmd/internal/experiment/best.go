package experiment

import (
	"fmt"
	"slices"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
)

// BestModel is a copy of a model's state dict at its best epoch so far,
// kept in the run's checkpoint (train.State.Tensors) so that the file
// derived from it is as crash-consistent as the rest of the run folder.
// The zero value holds no model.
type BestModel struct {
	weights map[string][]float32
}

// Keep copies the current state dict of m.
func (b *BestModel) Keep(m nn.Module) {
	b.weights = map[string][]float32{}
	for _, p := range nn.StateDict(m) {
		b.weights[p.Name] = slices.Clone(p.T.Data)
	}
}

// Has reports whether a model was kept.
func (b *BestModel) Has() bool { return b.weights != nil }

// AddTo stores the kept tensors in tensors under prefix + their names.
func (b *BestModel) AddTo(tensors map[string][]float32, prefix string) {
	for name, v := range b.weights {
		tensors[prefix+name] = v
	}
}

// LoadFrom restores the tensors AddTo stored for the state dict of m; it
// fails naming a tensor that is missing or of the wrong size.
func (b *BestModel) LoadFrom(tensors map[string][]float32, prefix string, m nn.Module) error {
	w := map[string][]float32{}
	for _, p := range nn.StateDict(m) {
		v, ok := tensors[prefix+p.Name]
		if !ok || len(v) != len(p.T.Data) {
			return fmt.Errorf("bad run state: best model tensor %q missing or of the wrong size", p.Name)
		}
		w[p.Name] = v
	}
	b.weights = w
	return nil
}

// File returns the kept weights as a model file of m's layout (sealed
// safetensors, as train.ModelFile writes) with metadata meta.
func (b *BestModel) File(m nn.Module, meta map[string]string) ([]byte, error) {
	f := checkpoint.StateDict(m, "")
	for _, p := range nn.StateDict(m) {
		f.Set(p.Name, safetensors.FromFloat32(p.T.Shape(), b.weights[p.Name]))
	}
	f.Metadata = meta
	return safetensors.Marshal(safetensors.Sealed(f))
}
