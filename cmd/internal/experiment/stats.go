package experiment

import (
	"math"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/optim/prox"
)

// LayerStats describes the weights of one tensor.
type LayerStats struct {
	Name  string  `json:"name"`
	Numel int     `json:"numel"`
	Zero  float64 `json:"zero"`          // fraction of exact zeros
	Small float64 `json:"small"`         // fraction with |w| < 1e-3
	PM1   float64 `json:"pm1,omitempty"` // fraction at exactly ±s, its binary scale (binary runs; s = 1 unless binarised at a scale)
	// Filters counts the output filters (index 0 of a conv or linear
	// weight) with a non-zero weight, of FiltersTotal: what structured
	// sparsity (-reg gl0, gl21) removes.
	Filters      int `json:"filters"`
	FiltersTotal int `json:"filters_total"`
	// Blocks counts the blocks of 16 output channels at one position of
	// the other indices (prox.ByBlock: the vectors the channel-blocked
	// inference kernels load, and skip when zero) with a non-zero weight,
	// of BlocksTotal: what -reg gl0:block and gl21:block remove.
	Blocks      int `json:"blocks"`
	BlocksTotal int `json:"blocks_total"`
}

// WeightStats summarises a set of weight tensors (ComputeWeightStats).
type WeightStats struct {
	Numel    int     `json:"numel"`
	Zero     float64 `json:"zero_ratio"`      // exact zeros
	Small    float64 `json:"small_ratio"`     // |w| < 1e-3
	Below1e2 float64 `json:"below_1e2_ratio"` // |w| < 1e-2
	PM1      float64 `json:"binary_ratio"`    // exactly ±s (LayerStats.PM1)
	// Filters and FiltersTotal sum the layers' non-zero and all output
	// filters.
	Filters      int `json:"filters"`
	FiltersTotal int `json:"filters_total"`
	// Blocks and BlocksTotal sum the layers' non-zero and all 16-channel
	// blocks.
	Blocks      int          `json:"blocks"`
	BlocksTotal int          `json:"blocks_total"`
	Layers      []LayerStats `json:"layers"`
}

// ComputeWeightStats counts, over the tensors ws, the exact zeros, the
// weights below 1e-3 and 1e-2 in magnitude and the binary weights, overall
// and per tensor: those at exactly ±1, or all of a tensor whose weights
// share one magnitude (a tensor binarised at its own scale).
func ComputeWeightStats(ws []nn.Param) WeightStats { return ComputeWeightStatsAt(ws, nil) }

// ComputeWeightStatsAt is ComputeWeightStats with the binary weights of
// each tensor counted at ±scale(name) (nil: ±1) as well.
func ComputeWeightStatsAt(ws []nn.Param, scale func(name string) float32) WeightStats {
	var s WeightStats
	var zero, small, below, pm1 int
	for _, w := range ws {
		var z, sm, b, p int
		at := 1.0
		if scale != nil {
			at = float64(scale(w.Name))
		}
		for _, v := range w.T.Data {
			a := math.Abs(float64(v))
			switch {
			case a == 0:
				z++
			case a == at:
				p++
			}
			if a < 1e-3 {
				sm++
			}
			if a < 1e-2 {
				b++
			}
		}
		n := len(w.T.Data)
		if p == 0 && oneMagnitude(w.T.Data) {
			p = n
		}
		l := LayerStats{Name: w.Name, Numel: n, Zero: fraction(z, n), Small: fraction(sm, n), PM1: fraction(p, n)}
		if w.T.Rank() >= 2 {
			l.Filters, l.FiltersTotal = prox.GroupNonZero(prox.ByFilter, w.T.Data, w.T.Shape())
			l.Blocks, l.BlocksTotal = prox.GroupNonZero(prox.ByBlock, w.T.Data, w.T.Shape())
			s.Filters += l.Filters
			s.FiltersTotal += l.FiltersTotal
			s.Blocks += l.Blocks
			s.BlocksTotal += l.BlocksTotal
		}
		s.Layers = append(s.Layers, l)
		s.Numel += n
		zero, small, below, pm1 = zero+z, small+sm, below+b, pm1+p
	}
	s.Zero, s.Small, s.Below1e2, s.PM1 = fraction(zero, s.Numel), fraction(small, s.Numel), fraction(below, s.Numel), fraction(pm1, s.Numel)
	return s
}

// oneMagnitude reports whether x is not empty and all its elements have
// the same non-zero magnitude.
func oneMagnitude(x []float32) bool {
	if len(x) == 0 || x[0] == 0 {
		return false
	}
	m := math.Abs(float64(x[0]))
	for _, v := range x {
		if math.Abs(float64(v)) != m {
			return false
		}
	}
	return true
}

// fraction returns a/n, 0 for n = 0.
func fraction(a, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(a) / float64(n)
}
