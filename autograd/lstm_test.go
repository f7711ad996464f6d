package autograd_test

import (
	"math"
	"testing"

	"github.com/proxgen/proxgen/autograd"
	"github.com/proxgen/proxgen/autograd/gradcheck"
	"github.com/proxgen/proxgen/autograd/parallel"
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
	x, h, c := param(rng, batch, hid), param(rng, batch, hid), param(rng, batch, hid)
	// Steady state of a training loop: op buffers come from an arena.
	arena := autograd.NewArena()
	b.ReportAllocs()
	for b.Loop() {
		arena.Reset()
		arena.Use(func() {
			hn, cn := autograd.LSTMCell(x, h, c, p.wIH, p.wHH, p.bIH, p.bHH)
			autograd.Sum(autograd.Add(hn, cn)).Backward()
		})
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
// returns the loss followed by every parameter gradient.
func opsStep(seed uint64) []float32 {
	rng := newRNG(seed)
	emb := autograd.RandN(rng, 7, 4).RequireGrad()
	p := newLSTMParams(seed+1, 4, 5)
	gamma, beta := autograd.RandN(rng, 2).RequireGrad(), autograd.RandN(rng, 2).RequireGrad()
	h, c := autograd.New(3, 5), autograd.New(3, 5)
	var hs []*autograd.Tensor
	for s := range 3 {
		x := autograd.Embedding(emb, []int{s, 2 * s, 6 - s})
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
	want := opsStep(70)
	arena := autograd.NewArena()
	for i := range 3 {
		arena.Reset()
		var got []float32
		arena.Use(func() { got = opsStep(70) })
		if !equal(got, want) {
			t.Fatalf("arena step %d differs from a plain step", i)
		}
	}
	defer parallel.SetWorkers(parallel.SetWorkers(1))
	if got := opsStep(70); !equal(got, want) {
		t.Error("one worker differs from the default worker count")
	}
	parallel.SetWorkers(4)
	if got := opsStep(70); !equal(got, want) {
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
