package train

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/optim"
)

// Format is the "format" metadata value of a checkpoint written by Run.
const Format = "proxgen-run-v1"

// Key prefixes of a checkpoint besides checkpoint.ModelPrefix,
// checkpoint.AuxPrefix, checkpoint.OptimPrefix and
// checkpoint.OptimIntPrefix.
const StatePrefix = "state/"

// positionKey is the metadata entry holding the position JSON.
const positionKey = "run"

// Checkpoint is a checkpoint read from a run folder, not yet loaded into
// a model.
type Checkpoint struct {
	// Path is the file it was read from.
	Path string
	file *safetensors.File
	pos  position
}

// User returns the caller's JSON (State.JSON) stored in the checkpoint.
func (c *Checkpoint) User() json.RawMessage { return c.pos.User }

// Epoch returns the number of finished epochs; Step the steps done in the
// next one.
func (c *Checkpoint) Epoch() int { return c.pos.Epoch }

// Step returns the steps done in the epoch after the finished ones.
func (c *Checkpoint) Step() int { return c.pos.Step }

// Generation returns the checkpoint's generation (0: the initial state).
func (c *Checkpoint) Generation() int { return c.pos.Generation }

// IsCheckpoint reports whether the safetensors file f is a checkpoint
// written by Run (its model tensors start with checkpoint.ModelPrefix).
func IsCheckpoint(f *safetensors.File) bool { return f.Metadata[checkpoint.FormatKey] == Format }

// ReadCheckpoint reads and checks the checkpoint of the run folder dir:
// the file's structure, its position metadata and that every
// floating-point tensor is finite. It loads nothing into a model. When
// dir holds no checkpoint the error matches os.ErrNotExist.
func ReadCheckpoint(dir string) (*Checkpoint, error) {
	path := dir + string(os.PathSeparator) + CheckpointName
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, noCheckpointError(dir)
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Path: path, file: f}
	if err := c.decode(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// noCheckpointError is the error of ReadCheckpoint for a folder without
// a checkpoint; it matches os.ErrNotExist.
type noCheckpointError string

func (e noCheckpointError) Error() string {
	return fmt.Sprintf("%s holds no checkpoint (%s is missing)", string(e), CheckpointName)
}

func (e noCheckpointError) Is(target error) bool { return target == os.ErrNotExist }

func (c *Checkpoint) decode() error {
	f := c.file
	if got := f.Metadata[checkpoint.FormatKey]; got != Format {
		return fmt.Errorf("format %q, want %q (not a checkpoint of this version)", got, Format)
	}
	dec := json.NewDecoder(strings.NewReader(f.Metadata[positionKey]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.pos); err != nil {
		return fmt.Errorf("bad %q metadata: %w", positionKey, err)
	}
	p := &c.pos
	switch {
	case p.Generation < 0 || p.Epoch < 0 || p.Step < 0 || p.Samples < 0:
		return fmt.Errorf("bad %q metadata: negative generation %d, epoch %d, step %d or samples %d", positionKey, p.Generation, p.Epoch, p.Step, p.Samples)
	case len(p.History) != p.Epoch:
		return fmt.Errorf("bad %q metadata: %d metrics records for %d epochs", positionKey, len(p.History), p.Epoch)
	}
	for _, v := range []float64{p.LossSum, p.Seconds, p.PastSeconds, p.InitialLoss} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("bad %q metadata: %v is not a finite non-negative number", positionKey, v)
		}
	}
	for _, name := range f.Names() {
		t := f.Tensors[name]
		switch {
		case strings.HasPrefix(name, checkpoint.ModelPrefix), strings.HasPrefix(name, checkpoint.AuxPrefix),
			strings.HasPrefix(name, checkpoint.OptimPrefix), strings.HasPrefix(name, StatePrefix):
			if t.DType == safetensors.I64 && strings.HasPrefix(name, checkpoint.ModelPrefix) {
				continue // a counter
			}
			if t.DType != safetensors.F32 {
				return fmt.Errorf("tensor %q: dtype %s, want F32", name, t.DType)
			}
			v, err := t.Float32()
			if err != nil {
				return fmt.Errorf("tensor %q: %w", name, err)
			}
			if i := nonFinite(v); i >= 0 {
				return fmt.Errorf("tensor %q: element %d is %v (a checkpoint holds finite numbers only)", name, i, v[i])
			}
		case strings.HasPrefix(name, checkpoint.OptimIntPrefix):
			if t.DType != safetensors.I64 || len(t.Shape) != 0 {
				return fmt.Errorf("optimizer integer %q: %s%v, want an I64 scalar", name, t.DType, t.Shape)
			}
		default:
			return fmt.Errorf("unexpected tensor %q", name)
		}
	}
	return nil
}

// restore loads c into the loop's model, auxiliary tensors, optimizer and
// caller state.
func (r *runner) restore(c *Checkpoint) error {
	l, f := r.l, c.file
	if c.pos.Step > l.StepsPerEpoch {
		return fmt.Errorf("%s: the checkpoint is at step %d of an epoch of %d steps", c.Path, c.pos.Step, l.StepsPerEpoch)
	}
	st := optim.NewState()
	user := State{JSON: c.pos.User, Tensors: map[string][]float32{}}
	aux := map[string][]float32{}
	for _, name := range f.Names() {
		t := f.Tensors[name]
		switch {
		case strings.HasPrefix(name, checkpoint.OptimIntPrefix):
			v, err := t.Int64()
			if err != nil {
				return fmt.Errorf("%s: %q: %w", c.Path, name, err)
			}
			st.Ints[strings.TrimPrefix(name, checkpoint.OptimIntPrefix)] = v[0]
		case strings.HasPrefix(name, checkpoint.OptimPrefix):
			v, _ := t.Float32()
			st.Tensors[strings.TrimPrefix(name, checkpoint.OptimPrefix)] = v
		case strings.HasPrefix(name, StatePrefix):
			v, _ := t.Float32()
			user.Tensors[strings.TrimPrefix(name, StatePrefix)] = v
		case strings.HasPrefix(name, checkpoint.AuxPrefix):
			v, _ := t.Float32()
			if !slices.Equal(t.Shape, auxShape(l, strings.TrimPrefix(name, checkpoint.AuxPrefix))) {
				return fmt.Errorf("%s: auxiliary tensor %q has shape %v, the run has %v", c.Path, name, t.Shape, auxShape(l, strings.TrimPrefix(name, checkpoint.AuxPrefix)))
			}
			aux[strings.TrimPrefix(name, checkpoint.AuxPrefix)] = v
		}
	}
	for _, p := range l.Aux {
		if _, ok := aux[p.Name]; !ok {
			return fmt.Errorf("%s: auxiliary tensor %q is missing", c.Path, checkpoint.AuxPrefix+p.Name)
		}
	}
	if len(aux) != len(l.Aux) {
		return fmt.Errorf("%s: %d auxiliary tensors, the run has %d", c.Path, len(aux), len(l.Aux))
	}
	if err := checkpoint.LoadStateDict(f, l.Model, checkpoint.LoadOptions{Prefix: checkpoint.ModelPrefix}); err != nil {
		return fmt.Errorf("%s: %w", c.Path, err)
	}
	if err := l.Optimizer.LoadState(st); err != nil {
		return fmt.Errorf("%s: optimizer state: %w", c.Path, err)
	}
	if l.LoadState != nil {
		if err := l.LoadState(user); err != nil {
			return fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	for _, p := range l.Aux {
		copy(p.T.Data, aux[p.Name])
	}
	r.pos = c.pos
	return nil
}

func auxShape(l *Loop, name string) []int {
	for _, p := range l.Aux {
		if p.Name == name {
			return p.T.Shape()
		}
	}
	return nil
}

// outputNames returns the names of the derived files.
func (r *runner) outputNames() []string {
	names := []string{MetricsName}
	for _, o := range r.l.Outputs {
		names = append(names, o.Name)
	}
	return names
}

// save writes the derived files and then the checkpoint of the next
// generation. Nothing is written when a tensor is not finite.
func (r *runner) save() error {
	l := r.l
	if l.Dir == "" {
		return nil
	}
	f := checkpoint.StateDict(l.Model, checkpoint.ModelPrefix)
	for _, p := range l.Aux {
		f.Set(checkpoint.AuxPrefix+p.Name, safetensors.FromFloat32(slices.Clone(p.T.Shape()), p.T.Data))
	}
	st := l.Optimizer.State()
	for _, k := range st.Keys() {
		v := st.Tensors[k]
		f.Set(checkpoint.OptimPrefix+k, safetensors.FromFloat32([]int{len(v)}, v))
	}
	for k, v := range st.Ints {
		f.Set(checkpoint.OptimIntPrefix+k, safetensors.FromInt64(nil, []int64{v}))
	}
	var user State
	if l.SaveState != nil {
		var err error
		if user, err = l.SaveState(); err != nil {
			return fmt.Errorf("saving the run state: %w", err)
		}
		for _, k := range slices.Sorted(maps.Keys(user.Tensors)) {
			v := user.Tensors[k]
			f.Set(StatePrefix+k, safetensors.FromFloat32([]int{len(v)}, v))
		}
	}
	// Check the encoded values a block at a time: decoding whole tensors
	// would add a float32 copy of the checkpoint to the peak memory.
	var block [1024]float32
	for _, name := range f.Names() {
		t := f.Tensors[name]
		if t.DType != safetensors.F32 {
			continue
		}
		for lo := 0; lo < len(t.Data); lo += 4 * len(block) {
			v := block[:min(len(block), (len(t.Data)-lo)/4)]
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[lo+4*i:]))
			}
			if i := nonFinite(v); i >= 0 {
				return r.diverged(fmt.Sprintf("tensor %q holds %v; no checkpoint written", name, v[i]))
			}
		}
	}
	pos := r.pos
	pos.Generation++
	pos.Outputs = r.outputNames()
	pos.User = user.JSON
	pj, err := json.Marshal(&pos)
	if err != nil {
		return fmt.Errorf("encoding the run position: %w", err)
	}
	f.Metadata = maps.Clone(l.Metadata)
	if f.Metadata == nil {
		f.Metadata = map[string]string{}
	}
	f.Metadata[checkpoint.FormatKey] = Format
	f.Metadata[positionKey] = string(pj)
	f.Metadata["generation"] = strconv.Itoa(pos.Generation)
	data, err := safetensors.Marshal(safetensors.Sealed(f))
	if err != nil {
		return fmt.Errorf("encoding the checkpoint: %w", err)
	}
	// The encoded copies of the tensors are in data now; drop them before
	// the outputs (the model file) make their own.
	clear(f.Tensors)
	saved := r.pos
	r.pos = pos
	if err := r.writeOutputs(pos.Generation); err != nil {
		r.pos = saved
		return err
	}
	if err := r.faults.writeAtomic(l.CheckpointPath(), data, l.path(PrevCheckpointName)); err != nil {
		r.pos = saved
		return err
	}
	return nil
}

// writeOutputs writes metrics.jsonl and the Outputs for the current
// position, as generation gen.
func (r *runner) writeOutputs(gen int) error {
	l := r.l
	if l.Dir == "" {
		return nil
	}
	info := &Info{Generation: gen, Epoch: r.pos.Epoch, Step: r.pos.Step, Complete: r.pos.Epoch >= l.Epochs, History: r.pos.History}
	var metrics bytes.Buffer
	for _, h := range r.pos.History {
		metrics.Write(h)
		metrics.WriteByte('\n')
	}
	if err := r.faults.writeAtomic(l.path(MetricsName), metrics.Bytes(), ""); err != nil {
		return err
	}
	for _, o := range l.Outputs {
		if o.Final && !info.Complete {
			continue
		}
		data, err := o.Data(info)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		if data == nil {
			// Nothing to write yet: a stale file must not pass for this
			// run's.
			if err := os.Remove(l.path(o.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := r.faults.writeAtomic(l.path(o.Name), data, ""); err != nil {
			return err
		}
	}
	return nil
}

// ModelFile returns the state dict of m as a safetensors file that
// PyTorch's load_state_dict accepts (see package checkpoint), with meta
// (which may be nil) as its metadata. It carries nothing that depends on
// how often the run was interrupted, so a resumed run writes the same
// bytes as an uninterrupted one.
func ModelFile(m nn.Module, meta map[string]string) ([]byte, error) {
	f := checkpoint.StateDict(m, "")
	if len(meta) > 0 {
		f.Metadata = maps.Clone(meta)
	}
	return safetensors.Marshal(safetensors.Sealed(f))
}
