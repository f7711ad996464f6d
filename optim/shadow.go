package optim

import (
	"fmt"
	"slices"

	"github.com/proxgen/proxgen/autograd"
)

// shadowed is the part that BinaryConnect and LazyProx share: an inner
// optimizer stepping real-valued shadow weights of some of its parameters,
// whose Data hold a map of them (their signs, a proximal map). It forwards
// ZeroGrad, Groups and Steps to the inner optimizer and saves the shadow
// weights beside its state as "<name>.real".
type shadowed struct {
	inner  Optimizer
	params []*autograd.Tensor
	names  []string
	real   [][]float32
}

// groupIndex returns the index of g among o's groups and panics, naming
// op, when g is not one of them.
func groupIndex(op string, o Optimizer, g *Group) int {
	if i := slices.Index(o.Groups(), g); i >= 0 {
		return i
	}
	panic(op + ": group is not one of the inner optimizer's groups")
}

// shadow adds the parameters of group g, the gi-th of the inner
// optimizer's, with their current Data as the shadow weights.
func (s *shadowed) shadow(gi int, g *Group) {
	for j, p := range g.Params {
		s.params = append(s.params, p)
		s.names = append(s.names, g.name(gi, j))
		s.real = append(s.real, append([]float32(nil), p.Data...))
	}
}

// index returns the index of the parameter called name among the shadowed
// ones, or −1.
func (s *shadowed) index(name string) int { return slices.Index(s.names, name) }

// Real returns the real-valued shadow weights of the i-th shadowed
// parameter, in the order of the groups given to the constructor, then of
// their Params: BinaryConnect's real weights, LazyProx's real iterate z.
// The slice is the optimizer's: it changes with each Step.
func (s *shadowed) Real(i int) []float32 { return s.real[i] }

// ZeroGrad implements Optimizer.
func (s *shadowed) ZeroGrad() { s.inner.ZeroGrad() }

// Groups implements Optimizer.
func (s *shadowed) Groups() []*Group { return s.inner.Groups() }

// Steps implements Optimizer.
func (s *shadowed) Steps() int { return s.inner.Steps() }

// state returns the inner state plus the shadow weights.
func (s *shadowed) state() *State {
	st := s.inner.State()
	for i, r := range s.real {
		st.Tensors[s.names[i]+".real"] = append([]float32(nil), r...)
	}
	return st
}

// loadState checks st's shadow weights, then loads the inner optimizer's
// state and copies them in; what names the optimizer in errors. It changes
// nothing when it returns an error, provided check, called before the
// inner state is loaded, changes nothing either.
func (s *shadowed) loadState(st *State, what string, check func() error) error {
	var loads []func()
	for i, r := range s.real {
		f, err := st.checked(r, s.names[i]+".real")
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		loads = append(loads, f)
	}
	if check != nil {
		if err := check(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := s.inner.LoadState(st); err != nil {
		return err
	}
	for _, f := range loads {
		f()
	}
	return nil
}
