package nn

import "github.com/proxgen/proxgen/autograd"

// BatchNorm2d normalises each channel of NCHW input, as
// torch.nn.BatchNorm2d with affine parameters and running statistics.
//
// In training mode it normalises with the batch statistics and updates the
// running mean and (unbiased) variance with the given momentum; in
// evaluation mode it normalises with the running statistics.
type BatchNorm2d struct {
	// Weight (γ) and Bias (β) have shape (C); they start at 1 and 0.
	Weight, Bias *autograd.Tensor
	// RunningMean and RunningVar have shape (C); they start at 0 and 1.
	RunningMean, RunningVar *autograd.Tensor
	// NumBatchesTracked is a one-element tensor counting the training
	// batches seen (PyTorch's int64 num_batches_tracked buffer).
	NumBatchesTracked *autograd.Tensor
	// Momentum and Eps are PyTorch's momentum (0.1) and eps (1e-5).
	Momentum, Eps float32
	// CumulativeAverage replaces Momentum by 1/NumBatchesTracked (counted
	// after the current batch), as torch.nn.BatchNorm2d(momentum=None)
	// does: the running statistics are then the equal-weight average of
	// every batch's mean and unbiased variance since NumBatchesTracked
	// was last zero (ResetRunningStats). RecalibrateBatchNorm uses it.
	CumulativeAverage bool

	training bool
}

// NewBatchNorm2d returns a batch normalisation layer for c channels with
// PyTorch's defaults, in training mode.
func NewBatchNorm2d(c int) *BatchNorm2d {
	return &BatchNorm2d{
		Weight:            autograd.Full(1, c).RequireGrad(),
		Bias:              autograd.New(c).RequireGrad(),
		RunningMean:       autograd.New(c),
		RunningVar:        autograd.Full(1, c),
		NumBatchesTracked: autograd.New(),
		Momentum:          0.1,
		Eps:               1e-5,
		training:          true,
	}
}

// Forward normalises x of shape (N, C, H, W). In training mode it also
// updates the running statistics and counts the batch.
func (b *BatchNorm2d) Forward(x *autograd.Tensor) *autograd.Tensor {
	return autograd.BatchNorm2d(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.training, b.countBatch(), b.Eps)
}

// ForwardReLU returns ReLU(b.Forward(x)) computed by the fused
// autograd.BatchNormReLU op.
func (b *BatchNorm2d) ForwardReLU(x *autograd.Tensor) *autograd.Tensor {
	return autograd.BatchNormReLU(x, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.training, b.countBatch(), b.Eps)
}

// ForwardAddReLU returns ReLU(b.Forward(x) + residual), the end of a
// residual block, computed by the fused autograd.BatchNormAddReLU op.
func (b *BatchNorm2d) ForwardAddReLU(x, residual *autograd.Tensor) *autograd.Tensor {
	return autograd.BatchNormAddReLU(x, residual, b.Weight, b.Bias, b.RunningMean, b.RunningVar, b.training, b.countBatch(), b.Eps)
}

// countBatch counts a training batch in NumBatchesTracked and returns the
// momentum of its update of the running statistics.
func (b *BatchNorm2d) countBatch() float32 {
	if !b.training {
		return b.Momentum
	}
	b.NumBatchesTracked.Data[0]++
	if b.CumulativeAverage {
		// As PyTorch: the factor 1/num_batches_tracked in double
		// precision, rounded to the float32 the kernel computes with.
		return float32(1 / float64(b.NumBatchesTracked.Data[0]))
	}
	return b.Momentum
}

// ResetRunningStats sets the running mean to 0, the running variance to 1
// and NumBatchesTracked to 0, as torch.nn.BatchNorm2d.reset_running_stats.
func (b *BatchNorm2d) ResetRunningStats() {
	clear(b.RunningMean.Data)
	for i := range b.RunningVar.Data {
		b.RunningVar.Data[i] = 1
	}
	b.NumBatchesTracked.Data[0] = 0
}

// BatchesTracked returns the number of training batches seen.
func (b *BatchNorm2d) BatchesTracked() int64 { return int64(b.NumBatchesTracked.Data[0]) }

// Params returns weight and bias.
func (b *BatchNorm2d) Params() []Param {
	return []Param{{Name: "weight", T: b.Weight}, {Name: "bias", T: b.Bias}}
}

// Buffers returns running_mean, running_var and num_batches_tracked.
func (b *BatchNorm2d) Buffers() []Param {
	return []Param{
		{Name: "running_mean", T: b.RunningMean},
		{Name: "running_var", T: b.RunningVar},
		{Name: "num_batches_tracked", T: b.NumBatchesTracked, Int64: true},
	}
}

// SetTraining selects batch statistics (true) or running statistics (false).
func (b *BatchNorm2d) SetTraining(training bool) { b.training = training }
