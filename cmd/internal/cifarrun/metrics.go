package cifarrun

import (
	"math"

	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/nn/prune"
	"github.com/proxgen/proxgen/nn/train"
)

// EpochRecord is one line of metrics.jsonl.
type EpochRecord struct {
	Epoch     int     `json:"epoch"` // epochs completed, 1-based
	Step      int     `json:"step"`  // optimizer updates so far
	Loss      float64 `json:"loss"`  // mean training cross-entropy over the epoch
	Penalty   float64 `json:"penalty"`
	Objective float64 `json:"objective"` // loss + penalty
	TrainAcc  float64 `json:"train_acc"`
	TestLoss  float64 `json:"test_loss"`
	TestAcc   float64 `json:"test_acc"`
	Zero      float64 `json:"zero_ratio"`
	Small     float64 `json:"small_ratio"`
	Below1e2  float64 `json:"below_1e2_ratio"`
	// Filters of FiltersTotal output filters hold a non-zero weight.
	Filters      int `json:"filters"`
	FiltersTotal int `json:"filters_total"`
	// Blocks of BlocksTotal blocks of 16 output channels at one input
	// position (prox.ByBlock) hold a non-zero weight.
	Blocks      int `json:"blocks"`
	BlocksTotal int `json:"blocks_total"`
	// FLOPsRatio and ParamsRatio are the fractions of the dense network's
	// FLOPs (multiply-adds of a 32×32 image) and parameters that remain
	// once the removable channels are removed (package nn/prune);
	// Remaining has the channels, parameters and FLOPs in total and per
	// layer.
	FLOPsRatio  float64      `json:"flops_ratio"`
	ParamsRatio float64      `json:"params_ratio"`
	Remaining   *prune.Count `json:"remaining,omitempty"`
	// Binary is the fraction of the binarised weights at exactly ±s (±1, or their tensor's scale with -bin-scale mean); only
	// binary runs have it.
	Binary      *float64                `json:"binary_ratio,omitempty"`
	LR          float64                 `json:"lr"`
	Lambda      float64                 `json:"lambda"` // per-step λ of the epoch
	Seconds     float64                 `json:"seconds"`
	EvalSeconds float64                 `json:"eval_seconds"`
	ImgPerS     float64                 `json:"img_per_s"`
	Layers      []experiment.LayerStats `json:"layers"`
	// Recalibrated is the number of training batches over which the
	// batch-norm statistics were re-estimated in this epoch (after
	// pruning, before its first step; after hard quantisation, before its
	// evaluation); 0: none.
	Recalibrated int `json:"recalibrated,omitempty"`
}

// curves returns the charts of curves.svg for the records.
func curves(recs []EpochRecord, title string, binary bool) []train.Chart {
	n := len(recs)
	x := make([]float64, n)
	col := func(f func(r *EpochRecord) float64) []float64 {
		v := make([]float64, n)
		for i := range recs {
			v[i] = f(&recs[i])
		}
		return v
	}
	for i := range recs {
		x[i] = float64(recs[i].Epoch)
	}
	sparsity := []train.Series{
		{Name: "exact zeros", X: x, Y: col(func(r *EpochRecord) float64 { return 100 * r.Zero })},
		{Name: "|w| < 1e-3", X: x, Y: col(func(r *EpochRecord) float64 { return 100 * r.Small })},
		{Name: "|w| < 1e-2", X: x, Y: col(func(r *EpochRecord) float64 { return 100 * r.Below1e2 })},
	}
	if binary {
		sparsity = append(sparsity, train.Series{Name: "binary (±s)", X: x, Y: col(func(r *EpochRecord) float64 {
			if r.Binary == nil {
				return math.NaN()
			}
			return 100 * *r.Binary
		})})
	}
	return []train.Chart{
		{Title: title + ": loss", XLabel: "epoch", YLabel: "cross-entropy", Series: []train.Series{
			{Name: "train", X: x, Y: col(func(r *EpochRecord) float64 { return r.Loss })},
			{Name: "test", X: x, Y: col(func(r *EpochRecord) float64 { return r.TestLoss })},
			{Name: "train objective", X: x, Y: col(func(r *EpochRecord) float64 { return r.Objective })},
		}},
		{Title: "accuracy", XLabel: "epoch", YLabel: "%", Series: []train.Series{
			{Name: "train", X: x, Y: col(func(r *EpochRecord) float64 { return 100 * r.TrainAcc })},
			{Name: "test", X: x, Y: col(func(r *EpochRecord) float64 { return 100 * r.TestAcc })},
		}},
		{Title: "weights", XLabel: "epoch", YLabel: "% of weights", YFixed: true, YMin: 0, YMax: percentTop(sparsity), Series: sparsity},
		{Title: "remaining network", XLabel: "epoch", YLabel: "% of the dense network", YFixed: true, YMin: 0, YMax: 100, Series: []train.Series{
			{Name: "FLOPs", X: x, Y: col(func(r *EpochRecord) float64 { return remainingPercent(r, (*prune.Count).FLOPsRatio) })},
			{Name: "parameters", X: x, Y: col(func(r *EpochRecord) float64 { return remainingPercent(r, (*prune.Count).ParamsRatio) })},
			{Name: "channels", X: x, Y: col(func(r *EpochRecord) float64 { return remainingPercent(r, (*prune.Count).ChannelsRatio) })},
		}},
		{Title: "step size", XLabel: "epoch", YLabel: "lr", LogY: true, Series: []train.Series{
			{Name: "lr", X: x, Y: col(func(r *EpochRecord) float64 { return r.LR })},
		}},
	}
}

// remainingPercent returns 100·f(r.Remaining), NaN for records written
// before the counts existed.
func remainingPercent(r *EpochRecord, f func(*prune.Count) float64) float64 {
	if r.Remaining == nil {
		return math.NaN()
	}
	return 100 * f(r.Remaining)
}

// percentTop returns the top of a percentage axis that starts at 0: a
// little above the largest finite value, at most 100.
func percentTop(ss []train.Series) float64 {
	top := 1.0
	for _, s := range ss {
		for _, v := range s.Y {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				top = math.Max(top, v*1.15)
			}
		}
	}
	return math.Min(top, 100)
}
