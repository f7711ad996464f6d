package autograd

import (
	"fmt"
	"math"

	"github.com/proxgen/proxgen/autograd/parallel"
)

// rowGrain returns the number of rows of the given width that a parallel
// row loop handles per chunk. It depends only on the width, so per-chunk
// partial results combined in chunk order do not depend on the worker count.
func rowGrain(width int) int {
	return max(1, (1<<13)/max(width, 1))
}

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

// LogSoftmax returns log softmax over the last dimension of the rank-2
// tensor x: out[i,j] = x[i,j] − log Σ_k exp(x[i,k]), computed stably.
func LogSoftmax(x *Tensor) *Tensor {
	mustRank("LogSoftmax", "x", x, 2)
	rows, cols := x.shape[0], x.shape[1]
	out := empty(rows, cols)
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
	return record("LogSoftmax", out, func(g []float32) {
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
	if needsGrad(logits) {
		e = alloc(rows*cols, false)
	}
	inv := make([]float64, rows)
	partial := make([]float64, parallel.Chunks(rows, grain))
	parallel.For(rows, grain, func(lo, hi int) {
		loss := 0.0
		for i := lo; i < hi; i++ {
			row := logits.Data[i*cols : (i+1)*cols]
			mf := float64(rowMax(row))
			s := 0.0
			if e != nil {
				er := e[i*cols : (i+1)*cols]
				for j, v := range row {
					ev := math.Exp(float64(v) - mf)
					er[j] = float32(ev)
					s += ev
				}
			} else {
				for _, v := range row {
					s += math.Exp(float64(v) - mf)
				}
			}
			inv[i] = 1 / s
			loss += mf + math.Log(s) - float64(row[labels[i]])
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
	out := FromSlice([]float32{float32(total * scale)})
	labels = append([]int(nil), labels...) // keep the caller's slice out of the graph
	return record(op, out, func(g []float32) {
		gx := logits.grad()
		gs := float64(g[0]) * scale
		parallel.For(rows, grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				er := e[i*cols : (i+1)*cols]
				d := gx[i*cols : (i+1)*cols]
				lab := labels[i]
				dl := d[lab]
				k := float32(gs * inv[i])
				for j, v := range er {
					d[j] += k * v
				}
				// softmax − 1 at the label, in float64.
				d[lab] = dl + float32(gs*(float64(er[lab])*inv[i]-1))
			}
		})
	}, logits)
}
