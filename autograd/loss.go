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

// logSumExp returns log Σ exp(row) computed stably in float64.
func logSumExp(row []float32) float64 {
	m := float32(math.Inf(-1))
	for _, v := range row {
		m = max(m, v)
	}
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
	grain := rowGrain(cols)
	lse := make([]float64, rows)
	partial := make([]float64, parallel.Chunks(rows, grain))
	parallel.For(rows, grain, func(lo, hi int) {
		s := 0.0
		for i := lo; i < hi; i++ {
			row := logits.Data[i*cols : (i+1)*cols]
			lse[i] = logSumExp(row)
			s += lse[i] - float64(row[labels[i]])
		}
		partial[lo/grain] = s
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
				row := logits.Data[i*cols : (i+1)*cols]
				d := gx[i*cols : (i+1)*cols]
				l, lab := lse[i], labels[i]
				for j, v := range row {
					p := math.Exp(float64(v) - l)
					if j == lab {
						p--
					}
					d[j] += float32(gs * p)
				}
			}
		})
	}, logits)
}
