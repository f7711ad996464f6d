package autograd_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
	"github.com/proxgen/proxgen/internal/procstat"
)

// refChannelStats returns the float64 mean and biased variance of every
// channel of an (N, C, ...) tensor.
func refChannelStats(x *autograd.Tensor) (mean, variance []float64) {
	n, c := x.Dim(0), x.Dim(1)
	sp := x.Numel() / (n * c)
	mean, variance = make([]float64, c), make([]float64, c)
	cnt := float64(n * sp)
	for ch := 0; ch < c; ch++ {
		for b := 0; b < n; b++ {
			for _, v := range x.Data[(b*c+ch)*sp : (b*c+ch+1)*sp] {
				mean[ch] += float64(v)
			}
		}
		mean[ch] /= cnt
		for b := 0; b < n; b++ {
			for _, v := range x.Data[(b*c+ch)*sp : (b*c+ch+1)*sp] {
				d := float64(v) - mean[ch]
				variance[ch] += d * d
			}
		}
		variance[ch] /= cnt
	}
	return mean, variance
}

// checkNormalised compares y with (x−mean)/sqrt(var+eps)·gamma+beta.
func checkNormalised(t *testing.T, x, y, gamma, beta *autograd.Tensor, mean, variance []float64, eps float64, tol float64) {
	t.Helper()
	n, c := x.Dim(0), x.Dim(1)
	sp := x.Numel() / (n * c)
	for i, v := range x.Data {
		ch := i / sp % c
		want := (float64(v) - mean[ch]) / math.Sqrt(variance[ch]+eps)
		if gamma != nil {
			want = want*float64(gamma.Data[ch]) + float64(beta.Data[ch])
		}
		if math.Abs(float64(y.Data[i])-want) > tol*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d (channel %d) = %v, want %v", i, ch, y.Data[i], want)
		}
	}
}

func TestBatchNormTrainValuesAndRunningStats(t *testing.T) {
	rng := newRNG(50)
	x := autograd.RandN(rng, 4, 3, 5, 6)
	for i := range x.Data {
		x.Data[i] = 3*x.Data[i] + 2
	}
	gamma, beta := autograd.RandN(rng, 3), autograd.RandN(rng, 3)
	runMean, runVar := autograd.RandN(rng, 3), autograd.RandU(rng, 0.5, 2, 3)
	m0, v0 := runMean.Clone(), runVar.Clone()
	const momentum, eps = 0.1, 1e-5
	y := autograd.BatchNorm2d(x, gamma, beta, runMean, runVar, true, momentum, eps)
	mean, variance := refChannelStats(x)
	checkNormalised(t, x, y, gamma, beta, mean, variance, eps, 1e-5)
	cnt := float64(4 * 5 * 6)
	for c := 0; c < 3; c++ {
		wantM := (1-momentum)*float64(m0.Data[c]) + momentum*mean[c]
		wantV := (1-momentum)*float64(v0.Data[c]) + momentum*variance[c]*cnt/(cnt-1)
		if math.Abs(float64(runMean.Data[c])-wantM) > 1e-5 || math.Abs(float64(runVar.Data[c])-wantV) > 1e-5*wantV {
			t.Errorf("channel %d running stats (%v, %v), want (%v, %v)", c, runMean.Data[c], runVar.Data[c], wantM, wantV)
		}
	}
	// Without affine parameters or running statistics.
	y = autograd.BatchNorm2d(x, nil, nil, nil, nil, true, momentum, eps)
	checkNormalised(t, x, y, nil, nil, mean, variance, eps, 1e-5)
}

func TestBatchNormLargeMean(t *testing.T) {
	// A large mean with a small spread must not lose the variance to
	// cancellation.
	rng := newRNG(51)
	x := autograd.RandN(rng, 8, 2, 4, 4)
	for i := range x.Data {
		x.Data[i] = 1000 + 0.01*x.Data[i]
	}
	y := autograd.BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 1e-8)
	mean, variance := refChannelStats(x)
	checkNormalised(t, x, y, nil, nil, mean, variance, 1e-8, 2e-3)
}

func TestBatchNormEvalValues(t *testing.T) {
	rng := newRNG(52)
	x := autograd.RandN(rng, 3, 4, 2, 5)
	gamma, beta := autograd.RandN(rng, 4), autograd.RandN(rng, 4)
	runMean, runVar := autograd.RandN(rng, 4), autograd.RandU(rng, 0.5, 2, 4)
	m0, v0 := runMean.Clone(), runVar.Clone()
	y := autograd.BatchNorm2d(x, gamma, beta, runMean, runVar, false, 0.1, 1e-5)
	mean, variance := make([]float64, 4), make([]float64, 4)
	for c := range mean {
		mean[c], variance[c] = float64(runMean.Data[c]), float64(runVar.Data[c])
	}
	checkNormalised(t, x, y, gamma, beta, mean, variance, 1e-5, 1e-5)
	if !equal(runMean.Data, m0.Data) || !equal(runVar.Data, v0.Data) {
		t.Error("eval mode changed the running statistics")
	}
}

func TestBatchNormGradients(t *testing.T) {
	rng := newRNG(53)
	x := param(rng, 4, 3, 5, 5)
	gamma, beta := param(rng, 3), param(rng, 3)
	runMean, runVar := autograd.New(3), autograd.Full(1, 3)
	train := func() *autograd.Tensor {
		return autograd.BatchNorm2d(x, gamma, beta, runMean, runVar, true, 0.1, 1e-5)
	}
	if err := gradcheck.Check(train, []*autograd.Tensor{x, gamma, beta}, gradcheck.Options{}); err != nil {
		t.Errorf("train: %v", err)
	}
	noAffine := func() *autograd.Tensor {
		return autograd.BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 1e-5)
	}
	if err := gradcheck.Check(noAffine, []*autograd.Tensor{x}, gradcheck.Options{}); err != nil {
		t.Errorf("train without affine: %v", err)
	}
	runMean, runVar = autograd.RandN(rng, 3), autograd.RandU(rng, 0.5, 2, 3)
	eval := func() *autograd.Tensor {
		return autograd.BatchNorm2d(x, gamma, beta, runMean, runVar, false, 0.1, 1e-5)
	}
	if err := gradcheck.Check(eval, []*autograd.Tensor{x, gamma, beta}, gradcheck.Options{}); err != nil {
		t.Errorf("eval: %v", err)
	}
	// Only the affine parameters require a gradient.
	xc := x.Detach()
	onlyAffine := func() *autograd.Tensor {
		return autograd.BatchNorm2d(xc, gamma, beta, nil, nil, true, 0.1, 1e-5)
	}
	if err := gradcheck.Check(onlyAffine, []*autograd.Tensor{gamma, beta}, gradcheck.Options{}); err != nil {
		t.Errorf("affine only: %v", err)
	}
}

func TestBatchNorm1dGradients(t *testing.T) {
	rng := newRNG(54)
	for _, shape := range [][]int{{6, 4}, {3, 4, 5}} {
		x := param(rng, shape...)
		gamma, beta := param(rng, 4), param(rng, 4)
		f := func() *autograd.Tensor {
			return autograd.BatchNorm1d(x, gamma, beta, autograd.New(4), autograd.Full(1, 4), true, 0.1, 1e-5)
		}
		if err := gradcheck.Check(f, []*autograd.Tensor{x, gamma, beta}, gradcheck.Options{}); err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
		mean, variance := refChannelStats(x)
		checkNormalised(t, x, f(), gamma, beta, mean, variance, 1e-5, 1e-5)
	}
}

// TestBatchNormWorkerIndependent checks bit-identical outputs, gradients
// and running statistics for 1, 2, 3 and 8 workers, in training mode (one
// task per channel) and in evaluation mode (chunks of planes: the 8×5
// planes of 32×32 split into three chunks).
func TestBatchNormWorkerIndependent(t *testing.T) {
	rng := newRNG(55)
	for _, shape := range [][]int{{8, 5, 12, 12}, {8, 5, 32, 32}} {
		x := param(rng, shape...)
		gamma, beta := param(rng, 5), param(rng, 5)
		dy := autograd.RandN(rng, shape...).Data
		for _, training := range []bool{true, false} {
			run := func(workers int) [][]float32 {
				defer parallel.SetWorkers(parallel.SetWorkers(workers))
				x.Grad, gamma.Grad, beta.Grad = nil, nil, nil
				rm, rv := autograd.FromSlice([]float32{0.1, -0.2, 0.3, 0, 1}, 5), autograd.FromSlice([]float32{1, 0.5, 2, 1.5, 0.8}, 5)
				y := autograd.BatchNorm2d(x, gamma, beta, rm, rv, training, 0.1, 1e-5)
				out := append([]float32(nil), y.Data...)
				y.BackwardWith(dy)
				return [][]float32{out, x.Grad, gamma.Grad, beta.Grad, rm.Data, rv.Data}
			}
			want := run(1)
			for _, workers := range []int{2, 3, 8} {
				got := run(workers)
				for i, name := range []string{"output", "grad x", "grad gamma", "grad beta", "running_mean", "running_var"} {
					if !equal(got[i], want[i]) {
						t.Errorf("x %v training=%v: %s differs between 1 and %d workers", shape, training, name, workers)
					}
				}
			}
		}
	}
}

func TestBatchNormPanics(t *testing.T) {
	x := autograd.New(2, 3, 4, 4)
	mustPanic(t, func() { autograd.BatchNorm2d(x, autograd.New(4), nil, nil, nil, true, 0.1, 1e-5) },
		"autograd.BatchNorm2d", "gamma", "[4]", "[2 3 4 4]")
	mustPanic(t, func() { autograd.BatchNorm2d(x, nil, nil, autograd.New(3), nil, true, 0.1, 1e-5) },
		"autograd.BatchNorm2d", "running_mean and running_var")
	mustPanic(t, func() { autograd.BatchNorm2d(autograd.New(2, 3), nil, nil, nil, nil, true, 0.1, 1e-5) },
		"autograd.BatchNorm2d", "rank 4", "[2 3]")
	mustPanic(t, func() { autograd.BatchNorm1d(autograd.New(1, 3), nil, nil, nil, nil, true, 0.1, 1e-5) },
		"autograd.BatchNorm1d", "more than 1 value", "[1 3]")
}

// BenchmarkBatchNorm2d measures a training-mode forward and backward pass
// at (128, 16, 32, 32).
func BenchmarkBatchNorm2d(b *testing.B) {
	rng := newRNG(56)
	x := param(rng, 128, 16, 32, 32)
	gamma, beta := param(rng, 16), param(rng, 16)
	rm, rv := autograd.New(16), autograd.Full(1, 16)
	dy := autograd.RandN(rng, 128, 16, 32, 32).Data
	// Steady state of a training loop: op buffers come from an arena.
	// x is bound to the context, so its gradient comes from the arena
	// too, as that of a layer inside a network does.
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x.In(ctx)
	b.ReportAllocs()
	b.SetBytes(int64(4 * x.Numel()))
	for b.Loop() {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		autograd.BatchNorm2d(x, gamma, beta, rm, rv, true, 0.1, 1e-5).BackwardWith(dy)
	}
}

func TestBatchNormMatchesPyTorch(t *testing.T) {
	for _, name := range []string{"batchnorm2d_train", "batchnorm2d_train_m03", "batchnorm2d_eval", "batchnorm1d_train"} {
		fx := loadOpsFixture(t, name)
		x, gamma, beta := fx.param("x"), fx.param("gamma"), fx.param("beta")
		rm, rv := fx.tensor("running_mean"), fx.tensor("running_var")
		training := fx.f.Metadata["training"] == "true"
		bn := autograd.BatchNorm2d
		if x.Rank() != 4 {
			bn = autograd.BatchNorm1d
		}
		y := bn(x, gamma, beta, rm, rv, training, fx.float("momentum"), fx.float("eps"))
		y.BackwardWith(fx.tensor("p").Data)
		fx.check("out", y.Data, y.Shape(), 1e-5, 1e-5)
		fx.check("gx", x.Grad, x.Shape(), 1e-4, 1e-5)
		fx.check("ggamma", gamma.Grad, gamma.Shape(), 1e-4, 1e-5)
		fx.check("gbeta", beta.Grad, beta.Shape(), 1e-4, 1e-5)
		fx.check("running_mean_after", rm.Data, rm.Shape(), 1e-6, 1e-6)
		fx.check("running_var_after", rv.Data, rv.Shape(), 1e-6, 1e-6)
	}
}

// unfusedBNReLU is the reference for the fused ops: BatchNorm2d, then the
// residual added (when not nil), then ReLU, as three separate ops.
func unfusedBNReLU(x, res, gamma, beta, rm, rv *autograd.Tensor, training bool) *autograd.Tensor {
	y := autograd.BatchNorm2d(x, gamma, beta, rm, rv, training, 0.1, 1e-5)
	if res != nil {
		y = autograd.Add(y, res)
	}
	return autograd.ReLU(y)
}

// fusedBNReLU calls BatchNormReLU, or BatchNormAddReLU when res is set.
func fusedBNReLU(x, res, gamma, beta, rm, rv *autograd.Tensor, training bool) *autograd.Tensor {
	if res != nil {
		return autograd.BatchNormAddReLU(x, res, gamma, beta, rm, rv, training, 0.1, 1e-5)
	}
	return autograd.BatchNormReLU(x, gamma, beta, rm, rv, training, 0.1, 1e-5)
}

// keepOffKink moves elements of x (and res) until no pre-activation
// BN(x)+res of the training-mode op lies within 0.1 of the ReLU's kink, so
// that finite differences with step 1e-2 never cross it.
func keepOffKink(t *testing.T, x, res, gamma, beta *autograd.Tensor) {
	t.Helper()
	for range 50 {
		noGrad := &autograd.Context{NoGrad: true}
		z := autograd.BatchNorm2d(autograd.FromSlice(x.Data, x.Shape()...).In(noGrad), gamma, beta, nil, nil, true, 0.1, 1e-5)
		if res != nil {
			z = autograd.Add(z, res)
		}
		moved := false
		for i, v := range z.Data {
			if math.Abs(float64(v)) < 0.1 {
				d := float32(0.3)
				if v < 0 {
					d = -d
				}
				if res != nil {
					res.Data[i] += d
				} else {
					ch := i / (x.Dim(2) * x.Dim(3)) % x.Dim(1)
					if gamma.Data[ch] < 0 {
						d = -d
					}
					x.Data[i] += d
				}
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	t.Fatal("could not move the pre-activations away from 0")
}

// TestBatchNormReLUGradients checks the fused ops against finite
// differences in training mode, with the pre-activations kept away from
// the ReLU's kink.
func TestBatchNormReLUGradients(t *testing.T) {
	rng := newRNG(57)
	for _, withRes := range []bool{false, true} {
		x := param(rng, 4, 3, 5, 5)
		gamma, beta := param(rng, 3), param(rng, 3)
		var res *autograd.Tensor
		inputs := []*autograd.Tensor{x, gamma, beta}
		if withRes {
			res = param(rng, 4, 3, 5, 5)
			inputs = append(inputs, res)
		}
		keepOffKink(t, x, res, gamma, beta)
		rm, rv := autograd.New(3), autograd.Full(1, 3)
		f := func() *autograd.Tensor { return fusedBNReLU(x, res, gamma, beta, rm, rv, true) }
		if err := gradcheck.Check(f, inputs, gradcheck.Options{}); err != nil {
			t.Errorf("residual=%v: %v", withRes, err)
		}
	}
}

// TestBatchNormReLUMatchesUnfused compares the fused ops with BatchNorm2d,
// Add and ReLU as separate ops: outputs, running statistics and every
// gradient, in both modes, when only some inputs require a gradient, when
// gradients accumulate onto existing ones, and when the residual is x.
func TestBatchNormReLUMatchesUnfused(t *testing.T) {
	rng := newRNG(58)
	shape := []int{6, 5, 7, 9}
	type setup struct {
		name             string
		res, training    bool
		gradX, gradParam bool
		resIsX, preGrad  bool
	}
	var cases []setup
	for _, res := range []bool{false, true} {
		for _, training := range []bool{true, false} {
			cases = append(cases,
				setup{name: "all", res: res, training: training, gradX: true, gradParam: true},
				setup{name: "x only", res: res, training: training, gradX: true},
				setup{name: "params only", res: res, training: training, gradParam: true},
				setup{name: "accumulate", res: res, training: training, gradX: true, gradParam: true, preGrad: true})
		}
	}
	cases = append(cases, setup{name: "residual is x", res: true, training: true, gradX: true, gradParam: true, resIsX: true})
	for _, tc := range cases {
		x0 := autograd.RandN(rng, shape...)
		r0 := autograd.RandN(rng, shape...)
		g0, b0 := autograd.RandN(rng, 5), autograd.RandN(rng, 5)
		dy := autograd.RandN(rng, shape...).Data
		pre := autograd.RandN(rng, shape...).Data
		run := func(op func(x, res, gamma, beta, rm, rv *autograd.Tensor, training bool) *autograd.Tensor) [][]float32 {
			// x and res are op results (scaled leaves), as inside a
			// network, so that their gradients come from gradTarget.
			xl, rl, gamma, beta := x0.Clone(), r0.Clone(), g0.Clone(), b0.Clone()
			xl.SetRequiresGrad(tc.gradX)
			rl.SetRequiresGrad(tc.gradX)
			gamma.SetRequiresGrad(tc.gradParam)
			beta.SetRequiresGrad(tc.gradParam)
			rm, rv := autograd.FromSlice([]float32{0.1, -0.2, 0.3, 0, 1}, 5), autograd.FromSlice([]float32{1, 0.5, 2, 1.5, 0.8}, 5)
			x := autograd.Scale(xl, 1.5)
			var res *autograd.Tensor
			if tc.res {
				res = autograd.Scale(rl, -0.5)
				if tc.resIsX {
					res = x
				}
			}
			y := op(x, res, gamma, beta, rm, rv, tc.training)
			loss := autograd.Sum(autograd.Mul(y, autograd.FromSlice(dy, shape...)))
			if tc.preGrad {
				// Other consumers of x and res, recorded later, so their
				// gradients arrive first and the fused op must add.
				loss = autograd.Add(loss, autograd.Sum(autograd.Mul(x, autograd.FromSlice(pre, shape...))))
				if res != nil {
					loss = autograd.Add(loss, autograd.Sum(autograd.Mul(res, autograd.FromSlice(pre, shape...))))
				}
			}
			out := append([]float32(nil), y.Data...)
			if !tc.gradX && !tc.gradParam {
				return [][]float32{out, rm.Data, rv.Data}
			}
			loss.Backward()
			return [][]float32{out, rm.Data, rv.Data, xl.Grad, rl.Grad, gamma.Grad, beta.Grad}
		}
		want := run(unfusedBNReLU)
		got := run(fusedBNReLU)
		for i, name := range []string{"output", "running_mean", "running_var", "grad x", "grad residual", "grad gamma", "grad beta"} {
			if i >= len(want) {
				break
			}
			if len(got[i]) != len(want[i]) {
				t.Errorf("%s (residual=%v training=%v): %s has %d elements, want %d", tc.name, tc.res, tc.training, name, len(got[i]), len(want[i]))
				continue
			}
			for j := range want[i] {
				if d := math.Abs(float64(got[i][j] - want[i][j])); d > 1e-5*math.Max(1, math.Abs(float64(want[i][j]))) {
					t.Errorf("%s (residual=%v training=%v): %s[%d] = %v, want %v", tc.name, tc.res, tc.training, name, j, got[i][j], want[i][j])
					break
				}
			}
		}
	}
}

// TestGradStoreOrAdd checks the ops that store their input gradient when
// it is fresh instead of adding to it: when another consumer of the input
// has already put its gradient there, the op must add.
func TestGradStoreOrAdd(t *testing.T) {
	rng := newRNG(59)
	shape := []int{3, 4, 5, 6}
	w := autograd.RandN(rng, 4, 4, 3, 3)
	ops := map[string]func(x, r *autograd.Tensor) *autograd.Tensor{
		"BatchNorm2d": func(x, _ *autograd.Tensor) *autograd.Tensor {
			return autograd.BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 1e-5)
		},
		"BatchNormReLU": func(x, _ *autograd.Tensor) *autograd.Tensor {
			return autograd.BatchNormReLU(x, nil, nil, nil, nil, true, 0.1, 1e-5)
		},
		"BatchNormAddReLU": func(x, r *autograd.Tensor) *autograd.Tensor {
			return autograd.BatchNormAddReLU(x, r, nil, nil, nil, nil, true, 0.1, 1e-5)
		},
		"Conv2d": func(x, _ *autograd.Tensor) *autograd.Tensor { return autograd.Conv2d(x, w, nil, 1, 1, 1) },
	}
	x0, r0 := autograd.RandN(rng, shape...), autograd.RandN(rng, shape...)
	dy := autograd.RandN(rng, shape...)
	pre := autograd.RandN(rng, shape...)
	for name, op := range ops {
		// grads returns the gradients of x0 and r0 (through op results
		// x = 2·x0 and r = 3·r0) of Σ dy·op(x, r), plus Σ pre·(x + r)
		// recorded after op when other is set.
		grads := func(other bool) (gx, gr []float32) {
			xl, rl := x0.Clone().RequireGrad(), r0.Clone().RequireGrad()
			x, r := autograd.Scale(xl, 2), autograd.Scale(rl, 3)
			loss := autograd.Sum(autograd.Mul(op(x, r), dy))
			if other {
				loss = autograd.Add(loss, autograd.Sum(autograd.Mul(autograd.Add(x, r), pre)))
			}
			loss.Backward()
			if rl.Grad == nil {
				rl.Grad = make([]float32, len(rl.Data))
			}
			return xl.Grad, rl.Grad
		}
		gx, gr := grads(false)
		bx, br := grads(true)
		for i, p := range pre.Data {
			if d := bx[i] - (gx[i] + 2*p); math.Abs(float64(d)) > 1e-4 {
				t.Fatalf("%s: grad x[%d] = %v with another consumer, want %v + %v", name, i, bx[i], gx[i], 2*p)
			}
			if d := br[i] - (gr[i] + 3*p); math.Abs(float64(d)) > 1e-4 {
				t.Fatalf("%s: grad residual[%d] = %v with another consumer, want %v + %v", name, i, br[i], gr[i], 3*p)
			}
		}
	}
}

// BenchmarkBatchNormAddReLU compares the fused BatchNormAddReLU with
// BatchNorm2d, Add and ReLU as separate ops, forward and backward at
// (128, 16, 32, 32), the end of a ResNet-20 block.
func BenchmarkBatchNormAddReLU(b *testing.B) {
	rng := newRNG(60)
	shape := []int{128, 16, 32, 32}
	x0, r0 := param(rng, shape...), param(rng, shape...)
	gamma, beta := param(rng, 16), param(rng, 16)
	rm, rv := autograd.New(16), autograd.Full(1, 16)
	dy := autograd.RandN(rng, shape...).Data
	for _, fused := range []bool{false, true} {
		name := "unfused"
		if fused {
			name = "fused"
		}
		b.Run(name, func(b *testing.B) {
			ctx := &autograd.Context{Arena: autograd.NewArena()}
			b.ReportAllocs()
			b.SetBytes(int64(4 * x0.Numel()))
			for b.Loop() {
				ctx.Arena.Reset()
				x0.ZeroGrad()
				r0.ZeroGrad()
				// Op results, as in a network, so that their
				// gradients come from the arena.
				x, r := autograd.Reshape(x0, shape...).In(ctx), autograd.Reshape(r0, shape...).In(ctx)
				var y *autograd.Tensor
				if fused {
					y = autograd.BatchNormAddReLU(x, r, gamma, beta, rm, rv, true, 0.1, 1e-5)
				} else {
					y = autograd.ReLU(autograd.Add(autograd.BatchNorm2d(x, gamma, beta, rm, rv, true, 0.1, 1e-5), r))
				}
				y.BackwardWith(dy)
			}
		})
	}
}

// TestBatchNormReLUUnderArena checks that the fused ops give the same
// outputs and gradients when their buffers come from an arena that hands
// back buffers holding stale values, as the stored fresh gradients must
// overwrite every element.
func TestBatchNormReLUUnderArena(t *testing.T) {
	rng := newRNG(61)
	shape := []int{4, 3, 6, 5}
	x0, r0 := autograd.RandN(rng, shape...), autograd.RandN(rng, shape...)
	gamma, beta := param(rng, 3), param(rng, 3)
	dy := autograd.RandN(rng, shape...)
	run := func(ctx *autograd.Context) [][]float32 {
		xl, rl := x0.Clone().RequireGrad().In(ctx), r0.Clone().RequireGrad().In(ctx)
		gamma.Grad, beta.Grad = nil, nil
		x, r := autograd.Scale(xl, 2), autograd.Scale(rl, 3)
		h := autograd.BatchNormReLU(x, gamma, beta, nil, nil, true, 0.1, 1e-5)
		y := autograd.BatchNormAddReLU(h, r, gamma, beta, nil, nil, true, 0.1, 1e-5)
		autograd.Sum(autograd.Mul(y, dy)).Backward()
		return [][]float32{slices.Clone(y.Data), slices.Clone(xl.Grad), slices.Clone(rl.Grad), slices.Clone(gamma.Grad), slices.Clone(beta.Grad)}
	}
	want := run(nil)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for pass := range 3 {
		ctx.Arena.Reset()
		got := run(ctx)
		for i, name := range []string{"output", "grad x", "grad residual", "grad gamma", "grad beta"} {
			if !equal(got[i], want[i]) {
				t.Errorf("pass %d: %s differs under the arena", pass, name)
			}
		}
		// Leave garbage in every recycled buffer for the next pass.
		ctx.Arena.Reset()
		for range 12 {
			for i, d := 0, ctx.New(shape...).Data; i < len(d); i++ {
				d[i] = float32(math.NaN())
			}
		}
	}
}

// BenchmarkBatchNormResNet20 times the fused batch-norm ops of ResNet-20's
// blocks (BatchNormReLU after a block's first convolution,
// BatchNormAddReLU at its end) at batch 128 in the three stages, the
// forward pass (fwd) and the backward pass (bwd, after an untimed forward
// pass; BackwardWith adds the seed to the output's gradient, one pass
// more than inside a network), with the buffers from an arena as in a
// training step. It reports the process CPU time per pass beside the
// wall time of both.
func BenchmarkBatchNormResNet20(b *testing.B) {
	rng := newRNG(62)
	for _, st := range []struct{ c, hw int }{{16, 32}, {32, 16}, {64, 8}} {
		shape := []int{128, st.c, st.hw, st.hw}
		x0, r0 := param(rng, shape...), param(rng, shape...)
		gamma, beta := param(rng, st.c), param(rng, st.c)
		rm, rv := autograd.New(st.c), autograd.Full(1, st.c)
		dy := autograd.RandN(rng, shape...).Data
		for _, op := range []string{"relu", "addrelu"} {
			for _, pass := range []string{"fwd", "bwd"} {
				b.Run(fmt.Sprintf("%dch_%dpx/%s/%s", st.c, st.hw, op, pass), func(b *testing.B) {
					// x and r bound to the context: their gradients
					// come from the arena, as a layer's inside a
					// network do.
					ctx := &autograd.Context{Arena: autograd.NewArena()}
					x, r := x0.In(ctx), r0.In(ctx)
					var cpu time.Duration
					cpuOK := true
					step := func() {
						ctx.Arena.Reset()
						x.Grad, r.Grad = nil, nil // their buffers went back to the arena
						c0, ok0 := procstat.CPUTime()
						var y *autograd.Tensor
						if op == "relu" {
							y = autograd.BatchNormReLU(x, gamma, beta, rm, rv, true, 0.1, 1e-5)
						} else {
							y = autograd.BatchNormAddReLU(x, r, gamma, beta, rm, rv, true, 0.1, 1e-5)
						}
						if pass == "bwd" {
							b.StopTimer()
							c0, ok0 = procstat.CPUTime()
							b.StartTimer()
							y.BackwardWith(dy)
						}
						c1, ok1 := procstat.CPUTime()
						cpu += c1 - c0
						cpuOK = cpuOK && ok0 && ok1
					}
					step() // fill the arena
					b.ResetTimer()
					cpu = 0
					for b.Loop() {
						step()
					}
					if cpuOK {
						b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
					}
				})
			}
		}
	}
}
