package experiment

import (
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/nn"
)

func TestComputeWeightStats(t *testing.T) {
	a := autograd.FromSlice([]float32{0, 0, 5e-4, -5e-3, 1, -1, 0.5, 2}, 2, 4)
	b := autograd.FromSlice([]float32{0, 1, -0.0009, 0.3}, 1, 1, 2, 2)
	s := ComputeWeightStats([]nn.Param{{Name: "a.weight", T: a}, {Name: "b.weight", T: b}})
	if s.Numel != 12 {
		t.Fatalf("numel %d", s.Numel)
	}
	// zeros: 3 of 12; |w|<1e-3: 0, 0, 5e-4, 0, -9e-4 = 5; |w|<1e-2: those + -5e-3 = 6; ±1: 3.
	check := func(name string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("zero", s.Zero, 3.0/12)
	check("small", s.Small, 5.0/12)
	check("below 1e-2", s.Below1e2, 6.0/12)
	check("±1", s.PM1, 3.0/12)
	if len(s.Layers) != 2 || s.Layers[0].Name != "a.weight" || s.Layers[1].Numel != 4 {
		t.Fatalf("layers %+v", s.Layers)
	}
	check("a zero", s.Layers[0].Zero, 2.0/8)
	check("b small", s.Layers[1].Small, 2.0/4)
	check("b ±1", s.Layers[1].PM1, 1.0/4)
	if e := ComputeWeightStats(nil); e.Zero != 0 || e.Numel != 0 {
		t.Errorf("empty stats %+v", e)
	}
}

// TestFilterCounts: output filters (index 0) with a non-zero weight.
func TestFilterCounts(t *testing.T) {
	a := autograd.FromSlice([]float32{0, 0, 1, 0, 0, 0}, 3, 2)              // filter 1 only
	b := autograd.FromSlice([]float32{0, 0, 0, 0, -2, 0, 0, 0}, 2, 1, 2, 2) // filter 1 only
	bias := autograd.FromSlice([]float32{1, 2}, 2)                          // rank 1: no filters
	s := ComputeWeightStats([]nn.Param{{Name: "a.weight", T: a}, {Name: "b.weight", T: b}, {Name: "b.bias", T: bias}})
	if s.Filters != 2 || s.FiltersTotal != 5 {
		t.Fatalf("filters %d of %d, want 2 of 5", s.Filters, s.FiltersTotal)
	}
	if l := s.Layers[0]; l.Filters != 1 || l.FiltersTotal != 3 {
		t.Fatalf("a: %d of %d, want 1 of 3", l.Filters, l.FiltersTotal)
	}
}

// TestBlockCounts: blocks of 16 output channels at one input position
// with a non-zero weight (prox.ByBlock), a partial last block included.
func TestBlockCounts(t *testing.T) {
	// 20 output channels (a block of 16 and one of 4) × 3 positions.
	w := autograd.New(20, 3)
	w.Data[0*3+1] = 1  // block 0, position 1
	w.Data[17*3+2] = 2 // block 1, position 2
	w.Data[19*3+2] = 3 // the same group
	s := ComputeWeightStats([]nn.Param{{Name: "w.weight", T: w}})
	if s.Blocks != 2 || s.BlocksTotal != 6 {
		t.Fatalf("blocks %d of %d, want 2 of 6", s.Blocks, s.BlocksTotal)
	}
}
