package autograd_test

import (
	"math"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/internal/parallel"
)

// refLSTMStep computes one LSTM cell step in float64.
func refLSTMStep(x, h, c, wIH, wHH, bIH, bHH *autograd.Tensor) (hn, cn []float64) {
	b, in, hid := x.Dim(0), x.Dim(1), h.Dim(1)
	hn, cn = make([]float64, b*hid), make([]float64, b*hid)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for r := 0; r < b; r++ {
		gate := make([]float64, 4*hid)
		for j := range gate {
			s := 0.0
			if bIH != nil {
				s += float64(bIH.Data[j])
			}
			if bHH != nil {
				s += float64(bHH.Data[j])
			}
			for k := 0; k < in; k++ {
				s += float64(x.Data[r*in+k]) * float64(wIH.Data[j*in+k])
			}
			for k := 0; k < hid; k++ {
				s += float64(h.Data[r*hid+k]) * float64(wHH.Data[j*hid+k])
			}
			gate[j] = s
		}
		for j := 0; j < hid; j++ {
			i, f, g, o := sig(gate[j]), sig(gate[hid+j]), math.Tanh(gate[2*hid+j]), sig(gate[3*hid+j])
			cn[r*hid+j] = f*float64(c.Data[r*hid+j]) + i*g
			hn[r*hid+j] = o * math.Tanh(cn[r*hid+j])
		}
	}
	return hn, cn
}

func nearF64(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
}

// lstmParams holds the tensors of a small LSTM cell.
type lstmParams struct {
	wIH, wHH, bIH, bHH *autograd.Tensor
}

func newLSTMParams(seed uint64, in, hid int) lstmParams {
	rng := newRNG(seed)
	s := 1 / math.Sqrt(float64(hid))
	p := lstmParams{
		wIH: autograd.RandU(rng, -s, s, 4*hid, in).RequireGrad(),
		wHH: autograd.RandU(rng, -s, s, 4*hid, hid).RequireGrad(),
		bIH: autograd.RandU(rng, -s, s, 4*hid).RequireGrad(),
		bHH: autograd.RandU(rng, -s, s, 4*hid).RequireGrad(),
	}
	return p
}

func TestLSTMCellValues(t *testing.T) {
	rng := newRNG(60)
	const b, in, hid = 3, 5, 4
	p := newLSTMParams(61, in, hid)
	x, h, c := autograd.RandN(rng, b, in), autograd.RandN(rng, b, hid), autograd.RandN(rng, b, hid)
	hn, cn := autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
	wantH, wantC := refLSTMStep(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
	nearF64(t, "h", hn.Data, wantH, 1e-5)
	nearF64(t, "c", cn.Data, wantC, 1e-5)
	if !equal(hn.Shape(), []int{b, hid}) || !equal(cn.Shape(), []int{b, hid}) {
		t.Errorf("shapes %v, %v, want [%d %d]", hn.Shape(), cn.Shape(), b, hid)
	}
	// Without biases.
	hn, cn = autograd.LSTMCell(x, h, c, p.wIH, p.wHH, nil, nil)
	wantH, wantC = refLSTMStep(x, h, c, p.wIH, p.wHH, nil, nil)
	nearF64(t, "h without bias", hn.Data, wantH, 1e-5)
	nearF64(t, "c without bias", cn.Data, wantC, 1e-5)
}

// unrollLSTM runs the cell over xs from (h0, c0) and returns every h and
// the final c.
func unrollLSTM(xs []*autograd.Tensor, h0, c0 *autograd.Tensor, p lstmParams) (hs []*autograd.Tensor, c *autograd.Tensor) {
	h, c := h0, c0
	for _, x := range xs {
		h, c = autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
		hs = append(hs, h)
	}
	return hs, c
}

func TestLSTMCellGradients(t *testing.T) {
	rng := newRNG(62)
	const b, in, hid, steps = 2, 3, 4, 4
	p := newLSTMParams(63, in, hid)
	var xs []*autograd.Tensor
	for range steps {
		xs = append(xs, param(rng, b, in))
	}
	h0, c0 := param(rng, b, hid), param(rng, b, hid)
	inputs := append([]*autograd.Tensor{h0, c0, p.wIH, p.wHH, p.bIH, p.bHH}, xs...)
	all := func() *autograd.Tensor {
		hs, c := unrollLSTM(xs, h0, c0, p)
		return autograd.Concat(0, append(hs, c)...)
	}
	onlyH := func() *autograd.Tensor {
		hs, _ := unrollLSTM(xs, h0, c0, p)
		return hs[len(hs)-1]
	}
	onlyC := func() *autograd.Tensor {
		_, c := unrollLSTM(xs, h0, c0, p)
		return c
	}
	for name, f := range map[string]func() *autograd.Tensor{"all h and final c": all, "final h": onlyH, "final c": onlyC} {
		if err := gradcheck.Check(f, inputs, gradcheck.Options{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without biases; only some inputs require a gradient.
	x, h, c := param(rng, b, in), autograd.RandN(rng, b, hid), autograd.RandN(rng, b, hid)
	noBias := func() *autograd.Tensor {
		hn, cn := autograd.LSTMCell(x, h, c, p.wIH, p.wHH, nil, nil)
		return autograd.Concat(1, hn, cn)
	}
	if err := gradcheck.Check(noBias, []*autograd.Tensor{x, p.wHH}, gradcheck.Options{}); err != nil {
		t.Errorf("no bias: %v", err)
	}
}

func TestLSTMCellPanics(t *testing.T) {
	p := newLSTMParams(64, 3, 4)
	x, h := autograd.New(2, 3), autograd.New(2, 4)
	mustPanic(t, func() { autograd.LSTMCell(autograd.New(2, 5), h, h, p.wIH, p.wHH, nil, nil) },
		"autograd.LSTMCell", "weight_ih", "[16 3]", "[2 5]")
	mustPanic(t, func() { autograd.LSTMCell(x, h, autograd.New(2, 3), p.wIH, p.wHH, nil, nil) },
		"autograd.LSTMCell", "[2 3]", "[2 4]")
	mustPanic(t, func() { autograd.LSTMCell(x, autograd.New(3, 4), autograd.New(3, 4), p.wIH, p.wHH, nil, nil) },
		"autograd.LSTMCell", "[2 3]", "[3 4]")
	mustPanic(t, func() { autograd.LSTMCell(x, h, h, p.wIH, p.wHH, autograd.New(12), nil) },
		"autograd.LSTMCell", "bias_ih", "[12]")
}

// BenchmarkLSTMCell measures one forward and backward step at B=20, H=300
// (input size 300).
func BenchmarkLSTMCell(b *testing.B) {
	const batch, hid = 20, 300
	rng := newRNG(65)
	p := newLSTMParams(66, hid, hid)
	// Steady state of a training loop: op buffers come from an arena.
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x, h, c := param(rng, batch, hid).In(ctx), param(rng, batch, hid).In(ctx), param(rng, batch, hid).In(ctx)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Arena.Reset()
		x.Grad, h.Grad, c.Grad = nil, nil, nil // their buffers went back to the arena
		hn, cn := autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
		autograd.Sum(autograd.Add(hn, cn)).Backward()
	}
}

// TestLSTMMatchesPyTorch runs the cell over the sequence of a one-layer
// torch.nn.LSTM and compares outputs, final state and all gradients.
func TestLSTMMatchesPyTorch(t *testing.T) {
	for _, name := range []string{"lstm_4steps", "lstm_6steps_wide"} {
		fx := loadOpsFixture(t, name)
		x, h0, c0 := fx.param("x"), fx.param("h0"), fx.param("c0")
		p := lstmParams{fx.param("weight_ih_l0"), fx.param("weight_hh_l0"), fx.param("bias_ih_l0"), fx.param("bias_hh_l0")}
		steps, batch, in := x.Dim(0), x.Dim(1), x.Dim(2)
		var xs []*autograd.Tensor
		for s := range steps {
			xs = append(xs, autograd.Reshape(autograd.Slice(x, 0, s, s+1), batch, in))
		}
		hs, c := unrollLSTM(xs, h0, c0, p)
		out := autograd.Reshape(autograd.Concat(0, hs...), steps, batch, -1)
		loss := autograd.Add(autograd.Sum(autograd.Mul(out, fx.tensor("p"))), autograd.Sum(autograd.Mul(c, fx.tensor("pc"))))
		fx.check("out", out.Data, out.Shape(), 1e-5, 1e-5)
		fx.check("h_n", hs[steps-1].Data, hs[steps-1].Shape(), 1e-5, 1e-5)
		fx.check("c_n", c.Data, c.Shape(), 1e-5, 1e-5)
		loss.Backward()
		for _, g := range []struct {
			name string
			t    *autograd.Tensor
		}{{"gx", x}, {"gh0", h0}, {"gc0", c0}, {"gweight_ih_l0", p.wIH}, {"gweight_hh_l0", p.wHH}, {"gbias_ih_l0", p.bIH}, {"gbias_hh_l0", p.bHH}} {
			fx.check(g.name, g.t.Grad, g.t.Shape(), 1e-4, 1e-5)
		}
	}
}

// opsStep runs one small training step through LSTMCell, Embedding,
// Dropout, Concat, Slice, BatchNorm2d, CrossEntropy and LogSoftmax and
// returns the loss followed by every parameter gradient. The step runs in
// ctx.
func opsStep(seed uint64, ctx *autograd.Context) []float32 {
	rng := newRNG(seed)
	emb := autograd.RandN(rng, 7, 4).RequireGrad()
	p := newLSTMParams(seed+1, 4, 5)
	gamma, beta := autograd.RandN(rng, 2).RequireGrad(), autograd.RandN(rng, 2).RequireGrad()
	h, c := ctx.New(3, 5), ctx.New(3, 5)
	var hs []*autograd.Tensor
	for s := range 3 {
		x := autograd.Embedding(ctx, emb, []int{s, 2 * s, 6 - s})
		h, c = autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
		hs = append(hs, h)
	}
	all := autograd.Dropout(autograd.Concat(0, hs...), 0.3, newRNG(seed+2), true) // (9, 5)
	img := autograd.Reshape(autograd.Slice(all, 1, 0, 4), 9, 2, 2, 1)
	img = autograd.BatchNorm2d(img, gamma, beta, autograd.New(2), autograd.Full(1, 2), true, 0.1, 1e-5)
	logits := autograd.Concat(1, autograd.Reshape(img, 9, 4), autograd.Slice(all, 1, 4, 5)) // (9, 5)
	loss := autograd.Add(autograd.CrossEntropy(logits, []int{0, 1, 2, 3, 4, 0, 1, 2, 3}), autograd.Sum(autograd.LogSoftmax(c)))
	loss.Backward()
	out := append([]float32(nil), loss.Data...)
	for _, t := range []*autograd.Tensor{emb, p.wIH, p.wHH, p.bIH, p.bHH, gamma, beta} {
		out = append(out, t.Grad...)
	}
	return out
}

// TestOpsArenaAndWorkers checks that a step gives bit-identical results
// with recycled arena buffers and with different worker counts.
func TestOpsArenaAndWorkers(t *testing.T) {
	want := opsStep(70, nil)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for i := range 3 {
		ctx.Arena.Reset()
		got := opsStep(70, ctx)
		if !equal(got, want) {
			t.Fatalf("arena step %d differs from a plain step", i)
		}
	}
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	if got := opsStep(70, nil); !equal(got, want) {
		t.Error("one worker differs from the default worker count")
	}
	parallel.SetWorkers(4)
	if got := opsStep(70, nil); !equal(got, want) {
		t.Error("four workers differ from the default worker count")
	}
}

// TestLSTMCellWorkerIndependent checks bit-identical results at a size
// where the GEMMs and the element-wise passes split into several chunks.
func TestLSTMCellWorkerIndependent(t *testing.T) {
	rng := newRNG(71)
	p := newLSTMParams(72, 48, 64)
	x, h, c := param(rng, 40, 48), param(rng, 40, 64), param(rng, 40, 64)
	run := func(workers int) []float32 {
		defer parallel.SetWorkers(parallel.SetWorkers(workers))
		for _, v := range []*autograd.Tensor{x, h, c, p.wIH, p.wHH, p.bIH, p.bHH} {
			v.Grad = nil
		}
		hn, cn := autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
		loss := autograd.Sum(autograd.Mul(hn, cn))
		loss.Backward()
		out := append([]float32(nil), hn.Data...)
		out = append(out, cn.Data...)
		for _, v := range []*autograd.Tensor{x, h, c, p.wIH, p.wHH, p.bIH, p.bHH} {
			out = append(out, v.Grad...)
		}
		return out
	}
	if !equal(run(1), run(4)) {
		t.Error("results differ between 1 and 4 workers")
	}
}

// seqInputs returns the per-step (B, In) slices of the (T, B, In) tensor x
// as graph ops, so gradients flow back to x.
func seqInputs(x *autograd.Tensor) []*autograd.Tensor {
	steps, batch, in := x.Dim(0), x.Dim(1), x.Dim(2)
	flat := autograd.Reshape(x, steps*batch, in)
	xs := make([]*autograd.Tensor, steps)
	for s := range steps {
		xs[s] = autograd.Slice(flat, 0, s*batch, (s+1)*batch)
	}
	return xs
}

// TestLSTMSequenceMatchesCell checks the fused sequence op against
// LSTMCell unrolled step by step: outputs, final states and every
// gradient, for several shapes and with or without biases.
func TestLSTMSequenceMatchesCell(t *testing.T) {
	cases := []struct {
		steps, batch, in, hid int
		bias                  bool
	}{
		{1, 1, 1, 1, true},
		{5, 3, 4, 6, true},
		{7, 2, 9, 5, false},
		{3, 21, 17, 33, true}, // several row chunks and GEMM tiles
	}
	for ci, c := range cases {
		rng := newRNG(80 + uint64(ci))
		p := newLSTMParams(90+uint64(ci), c.in, c.hid)
		if !c.bias {
			p.bIH, p.bHH = nil, nil
		}
		x := param(rng, c.steps, c.batch, c.in)
		h0, c0 := param(rng, c.batch, c.hid), param(rng, c.batch, c.hid)
		w := autograd.RandN(rng, c.steps, c.batch, c.hid)
		wc := autograd.RandN(rng, c.batch, c.hid)
		wh := autograd.RandN(rng, c.batch, c.hid)
		leaves := []*autograd.Tensor{x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH}
		run := func(fused bool) (vals [][]float32) {
			for _, v := range leaves {
				if v != nil {
					v.Grad = nil
				}
			}
			var out, hN, cN *autograd.Tensor
			if fused {
				out, hN, cN = autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			} else {
				h, cc := h0, c0
				var hs []*autograd.Tensor
				for _, xt := range seqInputs(x) {
					h, cc = autograd.LSTMCell(xt, h, cc, p.wIH, p.wHH, p.bIH, p.bHH)
					hs = append(hs, h)
				}
				out = autograd.Reshape(autograd.Concat(0, hs...), c.steps, c.batch, c.hid)
				hN, cN = h, cc
			}
			loss := autograd.Add(autograd.Sum(autograd.Mul(out, w)),
				autograd.Add(autograd.Sum(autograd.Mul(cN, wc)), autograd.Sum(autograd.Mul(hN, wh))))
			loss.Backward()
			vals = [][]float32{out.Data, hN.Data, cN.Data}
			for _, v := range leaves {
				if v != nil {
					vals = append(vals, v.Grad)
				}
			}
			return vals
		}
		want, got := run(false), run(true)
		names := []string{"out", "hN", "cN", "gx", "gh0", "gc0", "gweight_ih", "gweight_hh", "gbias_ih", "gbias_hh"}
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("case %d: %s has %d elements, want %d", ci, names[i], len(got[i]), len(want[i]))
			}
			for k := range want[i] {
				if d := math.Abs(float64(got[i][k] - want[i][k])); d > 1e-5*math.Max(1, math.Abs(float64(want[i][k]))) {
					t.Fatalf("case %d: %s[%d] = %v, LSTMCell gives %v", ci, names[i], k, got[i][k], want[i][k])
				}
			}
		}
	}
}

func TestLSTMSequenceGradients(t *testing.T) {
	rng := newRNG(100)
	const steps, b, in, hid = 4, 2, 3, 4
	p := newLSTMParams(101, in, hid)
	x := param(rng, steps, b, in)
	h0, c0 := param(rng, b, hid), param(rng, b, hid)
	inputs := []*autograd.Tensor{x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH}
	outputs := map[string]func() *autograd.Tensor{
		"out and final states": func() *autograd.Tensor {
			out, hN, cN := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			return autograd.Concat(0, autograd.Reshape(out, steps*b, hid), hN, cN)
		},
		"out": func() *autograd.Tensor {
			out, _, _ := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			return out
		},
		"final h": func() *autograd.Tensor {
			_, hN, _ := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			return hN
		},
		"final c": func() *autograd.Tensor {
			_, _, cN := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			return cN
		},
		"two stacked layers": func() *autograd.Tensor {
			out, _, _ := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
			out, _, cN := autograd.LSTM(autograd.Tanh(out), c0, h0, p.wHH, p.wHH, nil, p.bIH)
			return autograd.Concat(0, autograd.Reshape(out, steps*b, hid), cN)
		},
	}
	for name, f := range outputs {
		if err := gradcheck.Check(f, inputs, gradcheck.Options{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without biases; only some inputs require a gradient (h0 and c0 are
	// constants, so the recurrence must not write their gradients).
	h, c := autograd.RandN(rng, b, hid), autograd.RandN(rng, b, hid)
	noBias := func() *autograd.Tensor {
		out, _, cN := autograd.LSTM(x, h, c, p.wIH, p.wHH, nil, nil)
		return autograd.Concat(0, autograd.Reshape(out, steps*b, hid), cN)
	}
	if err := gradcheck.Check(noBias, []*autograd.Tensor{x, p.wHH}, gradcheck.Options{}); err != nil {
		t.Errorf("no bias: %v", err)
	}
	if h.Grad != nil || c.Grad != nil {
		t.Error("constant initial states received gradients")
	}
}

func TestLSTMSequenceEdgeCases(t *testing.T) {
	rng := newRNG(102)
	p := newLSTMParams(103, 3, 4)
	h0, c0 := param(rng, 2, 4), param(rng, 2, 4)
	out, hN, cN := autograd.LSTM(autograd.New(0, 2, 3), h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
	if !equal(out.Shape(), []int{0, 2, 4}) || hN != h0 || cN != c0 {
		t.Errorf("zero steps: out %v, hN is h0 %v, cN is c0 %v", out.Shape(), hN == h0, cN == c0)
	}
	// Batch of zero sequences.
	out, hN, cN = autograd.LSTM(param(rng, 3, 0, 3), autograd.New(0, 4), autograd.New(0, 4), p.wIH, p.wHH, p.bIH, p.bHH)
	if !equal(out.Shape(), []int{3, 0, 4}) || !equal(hN.Shape(), []int{0, 4}) || !equal(cN.Shape(), []int{0, 4}) {
		t.Errorf("empty batch: shapes %v %v %v", out.Shape(), hN.Shape(), cN.Shape())
	}
	autograd.Sum(out).Backward()
	// In a NoGrad context nothing is recorded.
	out, _, _ = autograd.LSTM(param(rng, 2, 2, 3).In(&autograd.Context{NoGrad: true}), h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
	if out.RequiresGrad() {
		t.Error("LSTM in a NoGrad context requires a gradient")
	}
}

func TestLSTMSequencePanics(t *testing.T) {
	p := newLSTMParams(104, 3, 4)
	x, h := autograd.New(5, 2, 3), autograd.New(2, 4)
	mustPanic(t, func() { autograd.LSTM(autograd.New(10, 3), h, h, p.wIH, p.wHH, nil, nil) },
		"autograd.LSTM", "x", "rank 3", "[10 3]")
	mustPanic(t, func() { autograd.LSTM(autograd.New(5, 2, 5), h, h, p.wIH, p.wHH, nil, nil) },
		"autograd.LSTM", "weight_ih", "[16 3]", "[5 2 5]")
	mustPanic(t, func() { autograd.LSTM(x, h, autograd.New(2, 3), p.wIH, p.wHH, nil, nil) },
		"autograd.LSTM", "[2 3]", "[2 4]")
	mustPanic(t, func() { autograd.LSTM(x, autograd.New(3, 4), autograd.New(3, 4), p.wIH, p.wHH, nil, nil) },
		"autograd.LSTM", "[5 2 3]", "[3 4]")
	mustPanic(t, func() { autograd.LSTM(x, h, h, p.wIH, p.wIH, nil, nil) },
		"autograd.LSTM", "weight_hh", "[16 3]")
	mustPanic(t, func() { autograd.LSTM(x, h, h, p.wIH, p.wHH, nil, autograd.New(12)) },
		"autograd.LSTM", "bias_hh", "[12]")
}

// TestLSTMSequenceMatchesPyTorch runs the fused op on the one-layer
// torch.nn.LSTM fixtures and compares outputs, final state and gradients.
func TestLSTMSequenceMatchesPyTorch(t *testing.T) {
	for _, name := range []string{"lstm_4steps", "lstm_6steps_wide"} {
		fx := loadOpsFixture(t, name)
		x, h0, c0 := fx.param("x"), fx.param("h0"), fx.param("c0")
		p := lstmParams{fx.param("weight_ih_l0"), fx.param("weight_hh_l0"), fx.param("bias_ih_l0"), fx.param("bias_hh_l0")}
		out, hN, cN := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
		loss := autograd.Add(autograd.Sum(autograd.Mul(out, fx.tensor("p"))), autograd.Sum(autograd.Mul(cN, fx.tensor("pc"))))
		fx.check("out", out.Data, out.Shape(), 1e-5, 1e-5)
		fx.check("h_n", hN.Data, hN.Shape(), 1e-5, 1e-5)
		fx.check("c_n", cN.Data, cN.Shape(), 1e-5, 1e-5)
		loss.Backward()
		for _, g := range []struct {
			name string
			t    *autograd.Tensor
		}{{"gx", x}, {"gh0", h0}, {"gc0", c0}, {"gweight_ih_l0", p.wIH}, {"gweight_hh_l0", p.wHH}, {"gbias_ih_l0", p.bIH}, {"gbias_hh_l0", p.bHH}} {
			fx.check(g.name, g.t.Grad, g.t.Shape(), 1e-4, 1e-5)
		}
	}
}

// TestLSTMSequenceWorkersAndArena checks bit-identical results for 1, 2
// and 4 workers and with recycled arena buffers, at a size where the GEMMs
// and the element-wise passes split into several chunks.
func TestLSTMSequenceWorkersAndArena(t *testing.T) {
	rng := newRNG(105)
	p := newLSTMParams(106, 40, 72)
	x := param(rng, 6, 30, 40)
	h0, c0 := param(rng, 30, 72), param(rng, 30, 72)
	leaves := []*autograd.Tensor{x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH}
	run := func(ctx *autograd.Context) []float32 {
		for _, v := range leaves {
			v.Grad = nil
		}
		out, hN, cN := autograd.LSTM(x.In(ctx), h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
		loss := autograd.Add(autograd.Sum(autograd.Mul(out, out)), autograd.Sum(autograd.Mul(hN, cN)))
		loss.Backward()
		res := append([]float32(nil), out.Data...)
		res = append(res, cN.Data...)
		for _, v := range leaves {
			res = append(res, v.Grad...)
		}
		return res
	}
	want := run(nil)
	for _, w := range []int{1, 2, 4} {
		prev := parallel.SetWorkers(w)
		got := run(nil)
		parallel.SetWorkers(prev)
		if !equal(got, want) {
			t.Errorf("%d workers differ from the default worker count", w)
		}
	}
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	for i := range 3 {
		ctx.Arena.Reset()
		got := run(ctx)
		if !equal(got, want) {
			t.Fatalf("arena step %d differs from a plain step", i)
		}
	}
}

// BenchmarkLSTMSequence measures the forward and backward pass of one
// window of the paper's PTB model: 35 steps, batch 20, 300 units.
func BenchmarkLSTMSequence(b *testing.B) {
	const steps, batch, hid = 35, 20, 300
	rng := newRNG(107)
	p := newLSTMParams(108, hid, hid)
	x := param(rng, steps, batch, hid)
	// The zero initial states are bound to ctx, so op results come from
	// its arena, as in a training loop.
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	h0, c0 := autograd.New(batch, hid).In(ctx), autograd.New(batch, hid).In(ctx)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Arena.Reset()
		out, _, cN := autograd.LSTM(x, h0, c0, p.wIH, p.wHH, p.bIH, p.bHH)
		autograd.Add(autograd.Sum(out), autograd.Sum(cN)).Backward()
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())*1e3/float64(b.N), "ms/window")
}

// BenchmarkLSTMCellWindow is BenchmarkLSTMSequence done with LSTMCell step
// by step, for comparison.
func BenchmarkLSTMCellWindow(b *testing.B) {
	const steps, batch, hid = 35, 20, 300
	rng := newRNG(107)
	p := newLSTMParams(108, hid, hid)
	ctx := &autograd.Context{Arena: autograd.NewArena()}
	x := param(rng, steps, batch, hid).In(ctx)
	h0, c0 := autograd.New(batch, hid), autograd.New(batch, hid)
	b.ReportAllocs()
	for b.Loop() {
		ctx.Arena.Reset()
		x.Grad = nil // its buffer went back to the arena
		h, c := h0, c0
		hs := make([]*autograd.Tensor, 0, steps)
		for _, xt := range seqInputs(x) {
			h, c = autograd.LSTMCell(xt, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
			hs = append(hs, h)
		}
		autograd.Add(autograd.Sum(autograd.Concat(0, hs...)), autograd.Sum(c)).Backward()
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())*1e3/float64(b.N), "ms/window")
}

// TestCrossEntropyGradientPaths checks CrossEntropy's backward pass on
// logits produced by an op, where the softmax buffer becomes the gradient
// in place, against the same logits as a leaf, and with a second consumer
// of the logits whose gradient arrives before or after (both orders).
func TestCrossEntropyGradientPaths(t *testing.T) {
	rng := newRNG(110)
	const n, k = 13, 37
	base := param(rng, n, k)
	for i := range base.Data {
		base.Data[i] *= 4
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = rng.IntN(k)
	}
	w := autograd.RandN(rng, n, k)
	grads := func(f func(logits *autograd.Tensor) *autograd.Tensor) []float32 {
		base.Grad = nil
		f(autograd.Scale(base, 1.5)).Backward()
		return append([]float32(nil), base.Grad...)
	}
	// Leaf logits take the accumulating path.
	leaf := autograd.FromSlice(append([]float32(nil), base.Data...), n, k).RequireGrad()
	for i := range leaf.Data {
		leaf.Data[i] *= 1.5
	}
	autograd.CrossEntropy(leaf, labels).Backward()
	inPlace := grads(func(l *autograd.Tensor) *autograd.Tensor { return autograd.CrossEntropy(l, labels) })
	for i, v := range leaf.Grad {
		if want := 1.5 * v; math.Abs(float64(inPlace[i]-want)) > 1e-6*math.Max(1, math.Abs(float64(want))) {
			t.Fatalf("in-place gradient [%d] = %v, leaf path gives %v", i, inPlace[i], want)
		}
	}
	// A second consumer of the logits whose backward pass runs after
	// (created earlier) or before (created later) the cross-entropy's.
	ceFirst := grads(func(l *autograd.Tensor) *autograd.Tensor {
		other := autograd.Sum(autograd.Mul(l, w))
		return autograd.Add(autograd.CrossEntropySum(l, labels), other)
	})
	otherFirst := grads(func(l *autograd.Tensor) *autograd.Tensor {
		ce := autograd.CrossEntropySum(l, labels)
		return autograd.Add(ce, autograd.Sum(autograd.Mul(l, w)))
	})
	sum := grads(func(l *autograd.Tensor) *autograd.Tensor { return autograd.CrossEntropySum(l, labels) })
	for i := range sum {
		want := sum[i] + 1.5*w.Data[i]
		for name, got := range map[string][]float32{"cross-entropy backward first": ceFirst, "other backward first": otherFirst} {
			if math.Abs(float64(got[i]-want)) > 1e-5*math.Max(1, math.Abs(float64(want))) {
				t.Fatalf("%s: gradient [%d] = %v, want %v", name, i, got[i], want)
			}
		}
	}
	f := func() *autograd.Tensor {
		l := autograd.Scale(base, 1.5)
		return autograd.Add(autograd.CrossEntropy(l, labels), autograd.Mean(autograd.Mul(l, w)))
	}
	if err := gradcheck.Check(f, []*autograd.Tensor{base}, gradcheck.Options{}); err != nil {
		t.Error(err)
	}
}
