package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/internal/parallel"
)

// rowGrain returns the number of rows of the given width that a parallel
// row loop handles per chunk. It depends only on the width, so per-chunk
// partial results combined in chunk order do not depend on the worker count.
func rowGrain(width int) int {
	return max(1, (1<<13)/max(width, 1))
}

// Constants of exp32: 2**(k/expN) comes from a table of expN entries.
const (
	expBits  = 5
	expN     = 1 << expBits
	expInvLn = 0x1.71547652b82fep+0 * expN // expN/ln 2
	expShift = 0x1.8p+52                   // adding it rounds to an integer
	expC0    = 0x1.c6af84b912394p-5 / expN / expN / expN
	expC1    = 0x1.ebfce50fac4f3p-3 / expN / expN
	expC2    = 0x1.62e42ff0c52d6p-1 / expN
)

// expTable[i] holds the bits of 2**(i/expN) minus i<<(52−expBits), so that
// adding k<<(52−expBits) for k ≡ i (mod expN) gives the bits of 2**(k/expN).
var expTable = func() (t [expN]uint64) {
	for i := range t {
		t[i] = math.Float64bits(math.Exp2(float64(i)/expN)) - uint64(i)<<(52-expBits)
	}
	return t
}()

// exp32 returns e**x rounded to float32 with a relative error below 1e-7
// (the method of ARM's optimized-routines expf): in float64, x·expN/ln 2 =
// k + r with |r| <= 1/2, e**x = 2**(k/expN)·2**(r/expN), the first factor
// from a table and the exponent bits, the second a cubic polynomial. It is
// about twice as fast as float64 math.Exp. Results underflow to zero (with
// subnormals in between) and overflow to +Inf like math.Exp; NaN stays NaN.
func exp32(x float32) float32 {
	// Clamping keeps the float64 computation finite; its conversion to
	// float32 then gives 0 below −150 and +Inf above 89, and NaN passes
	// through (both comparisons are false). The builtin min and max,
	// with their NaN rules, would be slower.
	if x < -150 {
		x = -150
	}
	if x > 89 {
		x = 89
	}
	// The conversions round every product, so that no compiler fuses
	// it with an addition: the AVX2 kernel does not either.
	z := float64(expInvLn * float64(x))
	kd := z + expShift
	ki := math.Float64bits(kd)
	r := z - (kd - expShift)
	s := math.Float64frombits(expTable[ki%expN] + ki<<(52-expBits))
	p := float64(float64(float64(expC0*r)+expC1)*float64(r*r)) + (float64(expC2*r) + 1)
	return float32(p * s)
}

// expK holds exp32's constants for the AVX2 kernel: expN/ln 2, expShift,
// expC0, expC1, expC2, 1, the clamp bounds −150 and 89, and the table
// index mask expN−1 as bits.
var expK = [9]float64{expInvLn, expShift, expC0, expC1, expC2, 1, -150, 89, math.Float64frombits(expN - 1)}

// rowMax returns the largest element of row (−Inf for an empty row). NaNs
// are skipped here; they still propagate through the exponentials.
func rowMax(row []float32) float32 {
	m0, m1, m2, m3 := float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))
	i := 0
	for ; i+4 <= len(row); i += 4 {
		if row[i] > m0 {
			m0 = row[i]
		}
		if row[i+1] > m1 {
			m1 = row[i+1]
		}
		if row[i+2] > m2 {
			m2 = row[i+2]
		}
		if row[i+3] > m3 {
			m3 = row[i+3]
		}
	}
	for ; i < len(row); i++ {
		if row[i] > m0 {
			m0 = row[i]
		}
	}
	return max(m0, m1, m2, m3)
}

// logSumExp returns log Σ exp(row) computed stably in float64.
func logSumExp(row []float32) float64 {
	m := rowMax(row)
	if math.IsInf(float64(m), 0) {
		// All -Inf gives -Inf; any +Inf gives +Inf.
		return float64(m)
	}
	mf := float64(m)
	s := 0.0
	for _, v := range row {
		s += math.Exp(float64(v) - mf)
	}
	return mf + math.Log(s)
}

// expShiftSum returns Σ_j exp(row[j] − m) accumulated in float64, and
// stores the terms in dst unless dst is nil. The exponentials are exp32;
// four accumulators, lane l taking the elements j ≡ l (mod 4) of the full
// blocks of four and lane 0 the rest, summed in a fixed order, keep the
// additions from waiting on each other. The blocks run on the AVX2 kernel
// where there is one, with the same results.
func expShiftSum(dst, row []float32, m float32) float64 {
	var s [4]float64
	n := len(row) &^ 3
	if dst != nil {
		dst = dst[:len(row)]
	}
	if haveAVX2 && n > 0 {
		var d *float32
		if dst != nil {
			d = &dst[0]
		}
		expBlocksAVX2(d, &row[0], n, m, &s)
	} else {
		expBlocksGo(dst, row[:n], m, &s)
	}
	for j := n; j < len(row); j++ {
		e := exp32(row[j] - m)
		if dst != nil {
			dst[j] = e
		}
		s[0] += float64(e)
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// expBlocksGo adds exp32(row[j] − m) to s[j%4] for the elements of row, a
// multiple of four of them, and stores them in dst unless dst is nil.
func expBlocksGo(dst, row []float32, m float32, s *[4]float64) {
	for j := 0; j+4 <= len(row); j += 4 {
		e0, e1, e2, e3 := exp32(row[j]-m), exp32(row[j+1]-m), exp32(row[j+2]-m), exp32(row[j+3]-m)
		if dst != nil {
			dst[j], dst[j+1], dst[j+2], dst[j+3] = e0, e1, e2, e3
		}
		s[0] += float64(e0)
		s[1] += float64(e1)
		s[2] += float64(e2)
		s[3] += float64(e3)
	}
}

// LogSoftmax returns log softmax over the last dimension of the rank-2
// tensor x: out[i,j] = x[i,j] − log Σ_k exp(x[i,k]), computed stably.
func LogSoftmax(x *Tensor) *Tensor {
	mustRank("LogSoftmax", "x", x, 2)
	rows, cols := x.shape[0], x.shape[1]
	c := contextOf("LogSoftmax", x)
	out := c.empty(rows, cols)
	parallel.For(rows, rowGrain(cols), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := x.Data[i*cols : (i+1)*cols]
			lse := logSumExp(row)
			o := out.Data[i*cols : (i+1)*cols]
			for j, v := range row {
				o[j] = float32(float64(v) - lse)
			}
		}
	})
	return c.record("LogSoftmax", out, func(g []float32) {
		gx := x.grad()
		parallel.For(rows, rowGrain(cols), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gr := g[i*cols : (i+1)*cols]
				s := 0.0
				for _, v := range gr {
					s += float64(v)
				}
				o := out.Data[i*cols : (i+1)*cols]
				d := gx[i*cols : (i+1)*cols]
				for j, v := range gr {
					d[j] += v - float32(math.Exp(float64(o[j]))*s)
				}
			}
		})
	}, x)
}

// CrossEntropy returns the mean over the batch of the softmax cross-entropy
// between the rows of the (N, classes) logits and the integer labels, as
// torch.nn.functional.cross_entropy does. It fuses log-softmax and the
// negative log-likelihood, is stable for large logits and accumulates the
// loss in float64. It panics if a label is out of range.
func CrossEntropy(logits *Tensor, labels []int) *Tensor {
	return crossEntropy("CrossEntropy", logits, labels, true)
}

// CrossEntropySum is CrossEntropy with the per-example losses summed
// instead of averaged (reduction="sum"), convenient for perplexity, which
// is exp(total loss / number of predictions).
func CrossEntropySum(logits *Tensor, labels []int) *Tensor {
	return crossEntropy("CrossEntropySum", logits, labels, false)
}

func crossEntropy(op string, logits *Tensor, labels []int, mean bool) *Tensor {
	mustRank(op, "logits", logits, 2)
	rows, cols := logits.shape[0], logits.shape[1]
	if len(labels) != rows {
		panic(fmt.Sprintf("autograd.%s: %d labels for logits of shape %v", op, len(labels), logits.shape))
	}
	for i, l := range labels {
		if l < 0 || l >= cols {
			panic(fmt.Sprintf("autograd.%s: label %d at index %d out of range [0, %d)", op, l, i, cols))
		}
	}
	// e holds exp(x − max) per element and inv 1/Σexp per row: the
	// backward pass needs softmax = e·inv and so computes no exponentials.
	// Without a backward pass (evaluation) nothing is stored.
	grain := rowGrain(cols)
	var e []float32
	c := contextOf(op, logits)
	if c.needsGrad(logits) {
		e = c.alloc(rows*cols, false)
	}
	inv := make([]float64, rows)
	partial := make([]float64, parallel.Chunks(rows, grain))
	parallel.For(rows, grain, func(lo, hi int) {
		loss := 0.0
		for i := lo; i < hi; i++ {
			row := logits.Data[i*cols : (i+1)*cols]
			m := rowMax(row)
			var s float64
			if e != nil {
				s = expShiftSum(e[i*cols:(i+1)*cols], row, m)
			} else {
				s = expShiftSum(nil, row, m)
			}
			inv[i] = 1 / s
			loss += float64(m) + math.Log(s) - float64(row[labels[i]])
		}
		partial[lo/grain] = loss
	})
	total := 0.0
	for _, s := range partial {
		total += s
	}
	scale := 1.0
	if mean && rows > 0 {
		scale = 1 / float64(rows)
	}
	out := c.empty()
	out.Data[0] = float32(total * scale)
	labels = append([]int(nil), labels...) // keep the caller's slice out of the graph
	return c.record(op, out, func(g []float32) {
		gs := float64(g[0]) * scale
		// When no gradient has reached the (non-leaf) logits yet, the
		// exponentials become their gradient in place: that saves
		// clearing, reading and writing a second rows×cols buffer.
		inPlace := logits.Grad == nil && logits.node != nil
		if inPlace {
			logits.Grad = e
		}
		gx := logits.grad()
		parallel.For(rows, grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				er := e[i*cols : (i+1)*cols]
				d := gx[i*cols : (i+1)*cols]
				lab := labels[i]
				el := float64(er[lab])
				k := float32(gs * inv[i])
				if inPlace {
					for j, v := range er {
						d[j] = k * v
					}
					d[lab] = float32(gs * (el*inv[i] - 1))
					continue
				}
				dl := d[lab]
				for j, v := range er {
					d[j] += k * v
				}
				// softmax − 1 at the label, in float64.
				d[lab] = dl + float32(gs*(el*inv[i]-1))
			}
		})
	}, logits)
}
