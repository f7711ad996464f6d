// Package nntest provides helpers for the tests of the nn packages: networks
// with given fractions of exact zeros, as a sparse training run leaves them.
package nntest

import (
	"math/rand/v2"

	"github.com/proxgen/proxgen/nn"
)

// ZeroWeights sets a fraction zeros of every convolution and linear weight
// of m (every parameter of rank 2 or more), drawn from rng, to exactly zero.
func ZeroWeights(m nn.Module, rng *rand.Rand, zeros float64) {
	for _, p := range m.Params() {
		if p.T.Rank() < 2 {
			continue
		}
		for i := range p.T.Data {
			if rng.Float64() < zeros {
				p.T.Data[i] = 0
			}
		}
	}
}
