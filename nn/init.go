package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// FanIn returns the fan-in of a weight tensor as torch.nn.init computes
// it: dimension 1 times the product of the dimensions after it (in
// features for a Linear weight, Cin·kh·kw for a Conv2d weight).
func FanIn(t *autograd.Tensor) int {
	if t.Rank() < 2 {
		panic(fmt.Sprintf("nn.FanIn: needs a weight of rank >= 2, got shape %v", t.Shape()))
	}
	n := 1
	for _, d := range t.Shape()[1:] {
		n *= d
	}
	return n
}

// Uniform fills t with samples drawn uniformly from [lo, hi) by rng.
func Uniform(t *autograd.Tensor, rng *rand.Rand, lo, hi float64) {
	for i := range t.Data {
		t.Data[i] = float32(lo + (hi-lo)*rng.Float64())
	}
}

// Normal fills t with samples of N(mean, std²) drawn by rng.
func Normal(t *autograd.Tensor, rng *rand.Rand, mean, std float64) {
	for i := range t.Data {
		t.Data[i] = float32(mean + std*rng.NormFloat64())
	}
}

// Fill sets every element of t to v.
func Fill(t *autograd.Tensor, v float32) {
	for i := range t.Data {
		t.Data[i] = v
	}
}

// leakyReLUGain is torch.nn.init.calculate_gain("leaky_relu", a).
func leakyReLUGain(a float64) float64 { return math.Sqrt(2 / (1 + a*a)) }

// KaimingUniform fills t like torch.nn.init.kaiming_uniform_(t, a) in
// fan_in mode: U(−bound, bound) with bound = sqrt(2/(1+a²))·sqrt(3/fanIn).
// PyTorch initialises Linear and Conv2d weights with a = sqrt(5), which
// gives bound = 1/sqrt(fanIn).
func KaimingUniform(t *autograd.Tensor, rng *rand.Rand, a float64) {
	bound := leakyReLUGain(a) * math.Sqrt(3/float64(FanIn(t)))
	Uniform(t, rng, -bound, bound)
}

// KaimingNormal fills t like torch.nn.init.kaiming_normal_(t) with its
// defaults (fan_in mode, ReLU gain sqrt(2)): N(0, 2/fanIn).
func KaimingNormal(t *autograd.Tensor, rng *rand.Rand) {
	Normal(t, rng, 0, math.Sqrt(2/float64(FanIn(t))))
}

// biasBound is PyTorch's default bias bound 1/sqrt(fanIn) for Linear and
// Conv2d layers.
func biasBound(fanIn int) float64 {
	if fanIn <= 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(fanIn))
}
