package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/nn"
)

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// paramTensors returns the tensors of m's parameters.
func paramTensors(m nn.Module) []*autograd.Tensor {
	var ts []*autograd.Tensor
	for _, p := range m.Params() {
		ts = append(ts, p.T)
	}
	return ts
}

// checkModule gradient-checks m.Forward(x) with respect to x and every
// parameter of m.
func checkModule(t *testing.T, m nn.Module, x *autograd.Tensor, opt gradcheck.Options) {
	t.Helper()
	inputs := append([]*autograd.Tensor{x.RequireGrad()}, paramTensors(m)...)
	if err := gradcheck.Check(func() *autograd.Tensor { return m.Forward(x) }, inputs, opt); err != nil {
		t.Error(err)
	}
}

func names(ps []nn.Param) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name)
	}
	return s
}

func TestLinearGrad(t *testing.T) {
	rng := newRng(1)
	for _, bias := range []bool{true, false} {
		l := nn.NewLinear(5, 4, bias, rng)
		checkModule(t, l, autograd.RandN(rng, 3, 5), gradcheck.Options{})
		if got, want := len(l.Params()), map[bool]int{true: 2, false: 1}[bias]; got != want {
			t.Errorf("Linear(bias=%v) has %d params, want %d", bias, got, want)
		}
	}
}

func TestConv2dGrad(t *testing.T) {
	rng := newRng(2)
	cases := []struct {
		k   int
		opt nn.ConvOpts
	}{
		{3, nn.ConvOpts{Padding: 1, Bias: true}},
		{3, nn.ConvOpts{Stride: 2, Padding: 1}},
		{2, nn.ConvOpts{Stride: 1, Dilation: 2, Bias: true}},
		{1, nn.ConvOpts{Stride: 2}},
	}
	for _, c := range cases {
		conv := nn.NewConv2d(2, 3, c.k, c.opt, rng)
		checkModule(t, conv, autograd.RandN(rng, 2, 2, 5, 5), gradcheck.Options{})
	}
}

func TestBatchNorm2dGrad(t *testing.T) {
	rng := newRng(3)
	bn := nn.NewBatchNorm2d(3)
	nn.Uniform(bn.Weight, rng, 0.5, 1.5)
	nn.Uniform(bn.Bias, rng, -0.5, 0.5)
	x := autograd.RandN(rng, 4, 3, 3, 2)
	checkModule(t, bn, x, gradcheck.Options{})
	bn.SetTraining(false)
	nn.Uniform(bn.RunningVar, rng, 0.5, 1.5)
	checkModule(t, bn, autograd.RandN(rng, 2, 3, 3, 2), gradcheck.Options{})
}

func TestBatchNorm2dBuffers(t *testing.T) {
	rng := newRng(4)
	bn := nn.NewBatchNorm2d(2)
	if got := names(nn.StateDict(bn)); !slices.Equal(got, []string{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) {
		t.Fatalf("BatchNorm2d state dict %v", got)
	}
	if b := bn.Buffers()[2]; !b.Int64 || b.T.Numel() != 1 || b.T.Rank() != 0 {
		t.Errorf("num_batches_tracked: Int64 %v shape %v, want an Int64 rank-0 tensor", b.Int64, b.T.Shape())
	}
	// Channel 0 holds 0, 1, ..., 7 (mean 3.5, unbiased var 6), channel 1
	// random values.
	x := autograd.RandN(rng, 2, 2, 2, 2)
	for i := range 8 {
		n, j := i/4, i%4
		x.Data[n*8+j] = float32(i)
	}
	bn.Forward(x)
	bn.Forward(x)
	if got := bn.BatchesTracked(); got != 2 {
		t.Errorf("after two training batches BatchesTracked = %d, want 2", got)
	}
	// Two momentum-0.1 updates from (0, 1): 0.19·stat + 0.81·initial.
	if m, v := bn.RunningMean.Data[0], bn.RunningVar.Data[0]; math.Abs(float64(m)-0.19*3.5) > 1e-5 || math.Abs(float64(v)-(0.19*6+0.81)) > 1e-5 {
		t.Errorf("running stats of channel 0 = (%g, %g), want (%g, %g)", m, v, 0.19*3.5, 0.19*6+0.81)
	}
	bn.SetTraining(false)
	bn.Forward(x)
	if got := bn.BatchesTracked(); got != 2 {
		t.Errorf("evaluation changed BatchesTracked to %d", got)
	}
}

func TestPoolingAndActivationGrad(t *testing.T) {
	rng := newRng(5)
	for _, m := range []nn.Module{
		nn.MaxPool2d{Kernel: 2, Stride: 2},
		nn.MaxPool2d{Kernel: 3, Stride: 2, Padding: 1},
		nn.AvgPool2d{Kernel: 2, Stride: 2},
		nn.AvgPool2d{Kernel: 3, Stride: 1, Padding: 1},
		nn.GlobalAvgPool2d{},
		nn.ReLU{},
		nn.Flatten{},
	} {
		// Distinct values away from ties and kinks keep max and ReLU smooth
		// under the finite-difference step.
		x := autograd.New(2, 2, 4, 4)
		perm := rng.Perm(x.Numel())
		for i := range x.Data {
			x.Data[i] = 0.1*float32(perm[i]-x.Numel()/2) + 0.05
		}
		t.Run(fmt.Sprintf("%T%+v", m, m), func(t *testing.T) {
			checkModule(t, m, x, gradcheck.Options{Step: 1e-3})
		})
	}
	if got := (nn.Flatten{}).Forward(autograd.New(2, 3, 4, 5)).Shape(); !slices.Equal(got, []int{2, 60}) {
		t.Errorf("Flatten shape %v, want [2 60]", got)
	}
	if got := (nn.GlobalAvgPool2d{}).Forward(autograd.New(2, 3, 4, 5)).Shape(); !slices.Equal(got, []int{2, 3, 1, 1}) {
		t.Errorf("GlobalAvgPool2d shape %v, want [2 3 1 1]", got)
	}
}

func TestDropout(t *testing.T) {
	rng := newRng(6)
	d := nn.NewDropout(0.5, nil)
	x := autograd.RandN(rng, 4, 6)
	inputs := []*autograd.Tensor{x.RequireGrad()}
	f := func() *autograd.Tensor {
		d.Rng = newRng(7) // the same mask on every call
		return d.Forward(x)
	}
	if err := gradcheck.Check(f, inputs, gradcheck.Options{}); err != nil {
		t.Error(err)
	}
	out := f()
	zeros := 0
	for i, v := range out.Data {
		switch {
		case v == 0:
			zeros++
		case math.Abs(float64(v-2*x.Data[i])) > 1e-6:
			t.Fatalf("kept element %d = %g, want 2·%g", i, v, x.Data[i])
		}
	}
	if zeros == 0 || zeros == len(out.Data) {
		t.Errorf("dropout with p=0.5 zeroed %d of %d elements", zeros, len(out.Data))
	}
	d.SetTraining(false)
	if out := d.Forward(x); !slices.Equal(out.Data, x.Data) {
		t.Error("dropout in evaluation mode changed its input")
	}
}

func TestEmbedding(t *testing.T) {
	rng := newRng(8)
	e := nn.NewEmbedding(7, 3, rng)
	ids := autograd.FromSlice([]float32{1, 4, 4, 0, 6, 1}, 2, 3)
	out := e.Forward(ids)
	if !slices.Equal(out.Shape(), []int{2, 3, 3}) {
		t.Fatalf("Embedding shape %v, want [2 3 3]", out.Shape())
	}
	for i, id := range []int{1, 4, 4, 0, 6, 1} {
		if !slices.Equal(out.Data[3*i:3*i+3], e.Weight.Data[3*id:3*id+3]) {
			t.Errorf("row %d is not weight row %d", i, id)
		}
	}
	err := gradcheck.Check(func() *autograd.Tensor { return e.Forward(ids) }, []*autograd.Tensor{e.Weight}, gradcheck.Options{})
	if err != nil {
		t.Error(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "nn.Embedding") {
			t.Errorf("out-of-range id: recovered %v, want a panic naming nn.Embedding", r)
		}
	}()
	e.Forward(autograd.FromSlice([]float32{7}, 1))
}

// concatFlat joins tensors into one vector, for checking several outputs.
func concatFlat(ts ...*autograd.Tensor) *autograd.Tensor {
	flat := make([]*autograd.Tensor, len(ts))
	for i, t := range ts {
		flat[i] = autograd.Reshape(t, -1)
	}
	return autograd.Concat(0, flat...)
}

func TestLSTMGrad(t *testing.T) {
	rng := newRng(9)
	const steps, batch, in, hid, layers = 3, 2, 3, 4, 2
	l := nn.NewLSTM(in, hid, layers, 0, rng)
	if got := names(l.Params()); !slices.Equal(got, []string{
		"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
		"weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"}) {
		t.Fatalf("LSTM params %v", got)
	}
	x := autograd.RandN(rng, steps, batch, in)
	state := nn.LSTMState{
		H: []*autograd.Tensor{autograd.RandN(rng, batch, hid), autograd.RandN(rng, batch, hid)},
		C: []*autograd.Tensor{autograd.RandN(rng, batch, hid), autograd.RandN(rng, batch, hid)},
	}
	inputs := append([]*autograd.Tensor{x.RequireGrad(), state.H[0].RequireGrad(), state.H[1].RequireGrad(),
		state.C[0].RequireGrad(), state.C[1].RequireGrad()}, paramTensors(l)...)
	f := func() *autograd.Tensor {
		out, final := l.Run(x, state)
		return concatFlat(out, final.H[0], final.H[1], final.C[0], final.C[1])
	}
	if err := gradcheck.Check(f, inputs, gradcheck.Options{}); err != nil {
		t.Error(err)
	}
}

// TestLSTMWindows checks that running a sequence in two windows that carry
// the (detached) state gives the same outputs as one run, and that the
// final hidden state is the last output.
func TestLSTMWindows(t *testing.T) {
	rng := newRng(10)
	const steps, batch, in, hid = 6, 3, 2, 5
	l := nn.NewLSTM(in, hid, 2, 0.5, rng)
	l.SetTraining(false)
	x := autograd.RandN(rng, steps, batch, in)
	whole, final := l.Run(x, nn.LSTMState{})
	first, mid := l.Run(autograd.Slice(x, 0, 0, 4), nn.LSTMState{})
	second, final2 := l.Run(autograd.Slice(x, 0, 4, steps), mid.Detach())
	split := autograd.Concat(0, first, second)
	if !autograd.AllClose(split, whole, 1e-6, 1e-6) {
		t.Errorf("windowed outputs differ from one run:\n%v\n%v", split, whole)
	}
	for i := range 2 {
		if !autograd.AllClose(final2.H[i], final.H[i], 1e-6, 1e-6) || !autograd.AllClose(final2.C[i], final.C[i], 1e-6, 1e-6) {
			t.Errorf("layer %d final state differs between windowed and whole runs", i)
		}
	}
	last := autograd.Reshape(autograd.Slice(whole, 0, steps-1, steps), batch, hid)
	if !slices.Equal(last.Data, final.H[1].Data) {
		t.Error("final hidden state of the last layer differs from the last output")
	}
}

// TestLSTMWindowsInArena runs truncated backpropagation through time over
// four windows, carrying the detached state, once without a context and
// once in a context whose arena is reset before every window (and filled
// with NaNs after it): the state copied out by Detach must survive the
// reset, and every loss and gradient must be bit-identical. Window 0
// starts from the zero state, which Run takes from the context of x.
func TestLSTMWindowsInArena(t *testing.T) {
	rng := newRng(15)
	const windows, steps, batch, in, hid = 4, 3, 2, 3, 4
	l := nn.NewLSTM(in, hid, 2, 0.3, rng)
	xs := make([][]float32, windows)
	for w := range xs {
		xs[w] = autograd.RandN(rng, steps, batch, in).Data
	}
	run := func(ctx *autograd.Context) [][]float32 {
		l.Rng = newRng(16)
		var state nn.LSTMState
		var res [][]float32
		for w := range windows {
			if ctx != nil {
				ctx.Arena.Reset()
			}
			nn.ZeroGrad(l)
			x := autograd.FromSlice(xs[w], steps, batch, in).In(ctx)
			out, final := l.Run(x, state)
			if out.Context() != ctx {
				t.Fatalf("window %d: output bound to %p, want %p", w, out.Context(), ctx)
			}
			loss := autograd.Sum(autograd.Mul(out, out))
			loss.Backward()
			state = final.Detach()
			res = append(res, slices.Clone(loss.Data))
			for _, p := range l.Params() {
				res = append(res, slices.Clone(p.T.Grad))
			}
			if ctx != nil {
				// Overwrite every recycled buffer of the window.
				ctx.Arena.Reset()
				for range 64 {
					d := ctx.New(steps*batch*4*hid + 64).Data
					for i := range d {
						d[i] = float32(math.NaN())
					}
				}
			}
		}
		return res
	}
	want := run(nil)
	got := run(&autograd.Context{Arena: autograd.NewArena()})
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("value %d differs in the arena context", i)
		}
	}
}

func TestInitialisation(t *testing.T) {
	const in, out = 200, 100
	l := nn.NewLinear(in, out, true, newRng(11))
	bound := 1 / math.Sqrt(in)
	checkUniform(t, "Linear.weight", l.Weight.Data, bound)
	checkUniform(t, "Linear.bias", l.Bias.Data, bound)

	c := nn.NewConv2d(8, 16, 3, nn.ConvOpts{Bias: true}, newRng(12))
	checkUniform(t, "Conv2d.weight", c.Weight.Data, 1/math.Sqrt(72))

	w := autograd.New(256, 64, 3, 3)
	nn.KaimingNormal(w, newRng(13))
	if mean, std := moments(w.Data); math.Abs(mean) > 0.01*std || math.Abs(std/math.Sqrt(2.0/576)-1) > 0.01 {
		t.Errorf("KaimingNormal: mean %g std %g, want 0 and %g", mean, std, math.Sqrt(2.0/576))
	}
	e := nn.NewEmbedding(500, 100, newRng(14))
	if mean, std := moments(e.Weight.Data); math.Abs(mean) > 0.01 || math.Abs(std-1) > 0.01 {
		t.Errorf("Embedding: mean %g std %g, want N(0, 1)", mean, std)
	}
	lstm := nn.NewLSTM(30, 50, 2, 0, newRng(15))
	for _, p := range lstm.Params() {
		checkUniform(t, "LSTM."+p.Name, p.T.Data, 1/math.Sqrt(50))
	}
	bn := nn.NewBatchNorm2d(4)
	for _, p := range nn.StateDict(bn) {
		want := map[string]float32{"weight": 1, "bias": 0, "running_mean": 0, "running_var": 1, "num_batches_tracked": 0}[p.Name]
		for _, v := range p.T.Data {
			if v != want {
				t.Errorf("BatchNorm2d.%s starts at %g, want %g", p.Name, v, want)
				break
			}
		}
	}
	// The same seed gives the same weights.
	l2 := nn.NewLinear(in, out, true, newRng(11))
	if !slices.Equal(l.Weight.Data, l2.Weight.Data) || !slices.Equal(l.Bias.Data, l2.Bias.Data) {
		t.Error("NewLinear with the same seed gave different weights")
	}
}

func moments(data []float32) (mean, std float64) {
	for _, v := range data {
		mean += float64(v)
	}
	mean /= float64(len(data))
	for _, v := range data {
		std += (float64(v) - mean) * (float64(v) - mean)
	}
	return mean, math.Sqrt(std / float64(len(data)))
}

// checkUniform checks that data looks like U(−bound, bound): inside the
// bounds, reaching close to both, with the uniform's standard deviation.
func checkUniform(t *testing.T, name string, data []float32, bound float64) {
	t.Helper()
	lo, hi := slices.Min(data), slices.Max(data)
	if float64(lo) < -bound || float64(hi) > bound {
		t.Errorf("%s: values in [%g, %g], outside ±%g", name, lo, hi, bound)
	}
	_, std := moments(data)
	if len(data) >= 1000 {
		if float64(lo) > -0.95*bound || float64(hi) < 0.95*bound {
			t.Errorf("%s: values in [%g, %g] do not fill ±%g", name, lo, hi, bound)
		}
		if want := bound / math.Sqrt(3); math.Abs(std/want-1) > 0.05 {
			t.Errorf("%s: std %g, want %g", name, std, want)
		}
	}
}

// tree is a container with its own parameter and buffer besides children,
// to check that StateDict interleaves them as PyTorch does.
type tree struct {
	scale, count *autograd.Tensor
	body         *nn.Sequential
	head         *nn.BatchNorm2d
}

func (m *tree) Forward(x *autograd.Tensor) *autograd.Tensor {
	return m.head.Forward(autograd.Mul(m.body.Forward(x), m.scale))
}

func (m *tree) Children() []nn.Child {
	return []nn.Child{{Name: "body", Module: m.body}, {Name: "head", Module: m.head}}
}

func (m *tree) Params() []nn.Param {
	return append([]nn.Param{{Name: "scale", T: m.scale}}, nn.ChildParams(m.Children())...)
}

func (m *tree) Buffers() []nn.Param {
	return append([]nn.Param{{Name: "count", T: m.count}}, nn.ChildBuffers(m.Children())...)
}

func (m *tree) SetTraining(b bool) { nn.SetChildrenTraining(m.Children(), b) }

func TestStateDictOrder(t *testing.T) {
	rng := newRng(16)
	m := &tree{
		scale: autograd.Full(1, 1).RequireGrad(),
		count: autograd.New(1),
		body:  nn.NewSequential(nn.NewConv2d(1, 2, 3, nn.ConvOpts{Bias: true}, rng), nn.NewBatchNorm2d(2), nn.ReLU{}),
		head:  nn.NewBatchNorm2d(2),
	}
	want := []string{"scale", "count",
		"body.0.weight", "body.0.bias",
		"body.1.weight", "body.1.bias", "body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked",
		"head.weight", "head.bias", "head.running_mean", "head.running_var", "head.num_batches_tracked"}
	if got := names(nn.StateDict(m)); !slices.Equal(got, want) {
		t.Errorf("StateDict names\n got %v\nwant %v", got, want)
	}
	wantParams := []string{"scale", "body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias", "head.weight", "head.bias"}
	if got := names(m.Params()); !slices.Equal(got, wantParams) {
		t.Errorf("Params names\n got %v\nwant %v", got, wantParams)
	}
	if got, want := nn.NumParams(m), 1+2*9+2+2+2+2+2; got != want {
		t.Errorf("NumParams = %d, want %d", got, want)
	}
	// ZeroGrad clears accumulated gradients; SetTraining reaches children.
	x := autograd.RandN(rng, 2, 1, 4, 4)
	autograd.Sum(m.Forward(x)).Backward()
	nn.ZeroGrad(m)
	for _, p := range m.Params() {
		for _, g := range p.T.Grad {
			if g != 0 {
				t.Fatalf("ZeroGrad left gradient %g in %s", g, p.Name)
			}
		}
	}
	m.SetTraining(false)
	m.Forward(x)
	if m.head.BatchesTracked() != 1 || m.body.Layers[1].(*nn.BatchNorm2d).BatchesTracked() != 1 {
		t.Error("SetTraining(false) did not reach the batch norms of the children")
	}
}

func TestSequentialGrad(t *testing.T) {
	rng := newRng(17)
	s := nn.NewSequential(
		nn.NewConv2d(2, 3, 3, nn.ConvOpts{Padding: 1, Bias: true}, rng),
		nn.NewBatchNorm2d(3),
		nn.ReLU{},
		nn.AvgPool2d{Kernel: 2, Stride: 2},
		nn.Flatten{},
		nn.NewLinear(12, 2, true, rng),
	)
	if got := names(s.Params()); !slices.Equal(got, []string{"0.weight", "0.bias", "1.weight", "1.bias", "5.weight", "5.bias"}) {
		t.Errorf("Sequential params %v", got)
	}
	checkModule(t, s, autograd.RandN(rng, 3, 2, 4, 4), gradcheck.Options{Step: 1e-3, RTol: 3e-2})
	if out := nn.NewSequential().Forward(autograd.New(1)); out.Numel() != 1 {
		t.Error("empty Sequential did not pass its input through")
	}
}
