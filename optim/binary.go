package optim

import (
	"math"

	"github.com/proxgen/proxgen/optim/prox"
)

// ProxQuantConfig is the original ProxQuant update (Bai et al. 2019): an
// Adam step, then the prox of the group's regularizer (BinaryW(1) in the
// reference) with η = α_t for every coordinate, ignoring the
// preconditioner. Set Clip = 1 on the binarised group for the reference's
// clipping to [−1, 1], and use HardQuantize at the hard-quantisation epoch.
// Revised ProxQuant is ProxGenAdam with the same regularizer.
func ProxQuantConfig(beta1, beta2, eps float64) Config {
	c := ProxGenAdam(beta1, beta2, eps)
	c.Metric = Euclidean
	return c
}

// Sign returns +1 for v >= 0 and −1 otherwise (binary weights have no
// zero).
func Sign(v float32) float32 {
	if v < 0 {
		return -1
	}
	return 1
}

// HardQuantize sets every parameter of g to s·Sign(w) and freezes the
// group, as ProxQuant does at the end of its quantisation phase; s is the
// scale of the group's W-shaped regularizer (prox.BinaryScale: 1 for
// prox.BinaryW, and for a group without one).
func HardQuantize(g *Group) {
	s, ok := prox.BinaryScale(g.Reg)
	if !ok {
		s = 1
	}
	v32 := float32(s)
	for _, p := range g.Params {
		for i, v := range p.Data {
			p.Data[i] = v32 * Sign(v)
		}
	}
	g.Frozen = true
}

// BinaryConnect (Courbariaux et al. 2015) trains binary weights through
// real-valued shadow weights: the network computes forward and backward
// with s·Sign(w) in the parameters' Data, Step applies the inner optimizer
// to the real weights with that gradient, clips them to [−1, 1] and writes
// s times their signs back into Data. The scale s is 1, or with
// NewScaledBinaryConnect each tensor's mean |w| over its real weights at
// that moment (the binary-weight networks of Rastegari et al. 2016).
type BinaryConnect struct {
	shadowed
	scaled bool
	scale  []float32 // each parameter's current s
}

// NewBinaryConnect wraps inner, binarising the parameters of group g
// (which must be one of inner's groups) to ±1. It copies the current Data
// as the real weights (clipped to [−1, 1]) and replaces Data with their
// signs.
func NewBinaryConnect(inner Optimizer, g *Group) *BinaryConnect {
	return newBinaryConnect(inner, g, false)
}

// NewScaledBinaryConnect is NewBinaryConnect with each parameter binarised
// to ±s, s the mean magnitude of its real weights (summed in order in
// float64), recomputed after every step: a warm start keeps its weights'
// scale, which matters where no normalisation follows (a classifier).
func NewScaledBinaryConnect(inner Optimizer, g *Group) *BinaryConnect {
	return newBinaryConnect(inner, g, true)
}

func newBinaryConnect(inner Optimizer, g *Group, scaled bool) *BinaryConnect {
	gi := groupIndex("optim.NewBinaryConnect", inner, g)
	b := &BinaryConnect{shadowed: shadowed{inner: inner}, scaled: scaled, scale: make([]float32, len(g.Params))}
	b.shadow(gi, g)
	for _, r := range b.real {
		clip(r, 1)
	}
	b.binarize()
	return b
}

// binarize writes s·Sign(w) of the real weights into each parameter's Data.
func (b *BinaryConnect) binarize() {
	for i, p := range b.params {
		r := b.real[i]
		s := float32(1)
		if m := MeanAbs(r); b.scaled && m > 0 {
			s = float32(m)
		}
		b.scale[i] = s
		for j, v := range r {
			p.Data[j] = s * Sign(v)
		}
	}
}

// MeanAbs returns the mean magnitude of x (0 for no values), summed in
// order in float64: the scale s of a tensor binarised to ±s.
func MeanAbs(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += math.Abs(float64(v))
	}
	return s / float64(len(x))
}

// Scale returns the magnitude s of the i-th binarised parameter's weights
// (its Data holds ±s): 1 unless the optimizer was made by
// NewScaledBinaryConnect.
func (b *BinaryConnect) Scale(i int) float32 { return b.scale[i] }

// Binarised reports the index of the parameter called name among the
// binarised ones, and whether it is one of them.
func (b *BinaryConnect) Binarised(name string) (int, bool) {
	i := b.index(name)
	return i, i >= 0
}

// Step implements Optimizer.
func (b *BinaryConnect) Step() {
	for i, p := range b.params {
		copy(p.Data, b.real[i])
	}
	b.inner.Step()
	for i, p := range b.params {
		copy(b.real[i], p.Data)
		clip(b.real[i], 1)
	}
	b.binarize()
}

// State implements Optimizer: the inner state plus the real weights as
// "<name>.real".
func (b *BinaryConnect) State() *State { return b.state() }

// LoadState implements Optimizer. It restores the real weights and
// rewrites the parameters' Data with their signs.
func (b *BinaryConnect) LoadState(st *State) error {
	if err := b.loadState(st, "binary connect", nil); err != nil {
		return err
	}
	b.binarize()
	return nil
}
