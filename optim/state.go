package optim

import (
	"fmt"
	"math"
	"slices"
)

// State is an optimizer's complete mutable state as named float32 vectors
// and named integers, so checkpoint code can store it as safetensors (one
// F32 tensor per entry of Tensors, the integers as I64 scalars or metadata).
// Float64 scalars (for example a schedule's best metric) are stored
// bit-exactly as their IEEE-754 bits in Ints; use SetFloat64 and Float64.
//
// Tensor entries are named "<param>.<slot>", where <param> is the
// parameter's name in its Group (or "group<i>.<j>" when the group has no
// names) and <slot> is for example "m" or "v"; the update counter is
// Ints["step"].
type State struct {
	Tensors map[string][]float32 // moment vectors and other per-element state
	Ints    map[string]int64     // counters and bit-exact float64 scalars
}

// NewState returns an empty State.
func NewState() *State {
	return &State{Tensors: map[string][]float32{}, Ints: map[string]int64{}}
}

// SetFloat64 stores v bit-exactly under key in Ints.
func (s *State) SetFloat64(key string, v float64) {
	s.Ints[key] = int64(math.Float64bits(v))
}

// Float64 returns the float64 stored with SetFloat64.
func (s *State) Float64(key string) (float64, error) {
	v, ok := s.Ints[key]
	if !ok {
		return 0, fmt.Errorf("optim: state has no scalar %q", key)
	}
	return math.Float64frombits(uint64(v)), nil
}

// SetInt stores v under key in Ints.
func (s *State) SetInt(key string, v int64) { s.Ints[key] = v }

// Int returns the integer stored under key.
func (s *State) Int(key string) (int64, error) {
	v, ok := s.Ints[key]
	if !ok {
		return 0, fmt.Errorf("optim: state has no integer %q", key)
	}
	return v, nil
}

// Keys returns the tensor names in sorted order.
func (s *State) Keys() []string {
	keys := make([]string, 0, len(s.Tensors))
	for k := range s.Tensors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checked verifies that the tensor named key exists with len(dst)
// elements and returns a function that copies it into dst, so a load can
// validate every entry before changing anything.
func (s *State) checked(dst []float32, key string) (func(), error) {
	v, ok := s.Tensors[key]
	if !ok {
		return nil, fmt.Errorf("optim: state has no tensor %q", key)
	}
	if len(v) != len(dst) {
		return nil, fmt.Errorf("optim: state tensor %q has %d elements, parameter needs %d", key, len(v), len(dst))
	}
	return func() { copy(dst, v) }, nil
}
