// Package opttest holds what the tests of optim, optim/prox and
// optim/internal/proxk share: tolerance checks, log-uniform samples and
// the thresholds of the ℓq proximal maps.
package opttest

import (
	"math"
	"math/rand/v2"
)

// Near reports whether |a − b| <= atol + rtol·|b|.
func Near(a, b, rtol, atol float64) bool {
	return math.Abs(a-b) <= atol+rtol*math.Abs(b)
}

// LogU returns a log-uniform sample in [lo, hi].
func LogU(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

// Threshold returns the |z| at which the proximal map of ℓq (q = 0, 1/2,
// 2/3 or 1) with κ = 2ηλ switches from 0 to non-zero, or NaN for other q.
func Threshold(q, kappa float64) float64 {
	switch q {
	case 0:
		return math.Sqrt(kappa)
	case 0.5:
		return math.Cbrt(54) / 4 * math.Pow(kappa, 2.0/3)
	case 2.0 / 3:
		return 2.0 / 3 * math.Pow(3*kappa*kappa*kappa, 0.25)
	case 1:
		return kappa / 2
	}
	return math.NaN()
}
