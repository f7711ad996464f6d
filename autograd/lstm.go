package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/internal/parallel"
)

// LSTMCell advances an LSTM by one time step, as torch.nn.LSTMCell does.
// x is (B, In), h and c are (B, H), wIH is (4H, In), wHH is (4H, H) and the
// biases bIH and bHH are (4H) or nil. With the gate pre-activations
//
//	gates = x·wIHᵀ + bIH + h·wHHᵀ + bHH, split into i, f, g, o (PyTorch order)
//
// it returns
//
//	cNext = σ(f)⊙c + σ(i)⊙tanh(g),  hNext = σ(o)⊙tanh(cNext).
//
// Both GEMMs write into one gate buffer and a single pass applies the
// nonlinearities. hNext and cNext share one recorded node, so gradients
// reaching either or both of them (for example over many unrolled time
// steps) are combined before that node's backward pass runs. To run a
// whole sequence, LSTM is much faster than calling LSTMCell per step.
func LSTMCell(x, h, c, wIH, wHH, bIH, bHH *Tensor) (hNext, cNext *Tensor) {
	const op = "LSTMCell"
	mustRank(op, "x", x, 2)
	b, in := x.shape[0], x.shape[1]
	hid := checkLSTM(op, x.shape, b, in, "h", "c", h, c, wIH, wHH, bIH, bHH)
	g4, bh := 4*hid, b*hid
	ctx := contextOf(op, x, h, c, wIH, wHH, bIH, bHH)

	// Gate pre-activations: broadcast biases, then accumulate both GEMMs.
	gates := ctx.alloc(b*g4, false) // overwritten: beta is 0 without biases
	beta := fillGateBias(gates, b, g4, bIH, bHH)
	if b > 0 && g4 > 0 {
		blas.Sgemm(false, true, b, g4, in, 1, x.Data, in, wIH.Data, in, beta, gates, g4)
		blas.Sgemm(false, true, b, g4, hid, 1, h.Data, hid, wHH.Data, hid, 1, gates, g4)
	}

	// state holds hNext followed by cNext; the gate buffer is overwritten
	// with the activated gates and tc with tanh(cNext), for backward.
	state := ctx.empty(2, b, hid)
	tc := ctx.alloc(bh, false)
	lstmPointwise(gates, c.Data, state.Data[bh:], state.Data[:bh], tc, b, hid)

	ctx.record(op, state, func(g []float32) {
		lstmBackward(ctx, x, h, c, wIH, wHH, bIH, bHH, gates, tc, g)
	}, x, h, c, wIH, wHH, bIH, bHH)

	hNext = &Tensor{Data: state.Data[:bh:bh], shape: []int{b, hid}}
	cNext = &Tensor{Data: state.Data[bh:], shape: []int{b, hid}}
	ctx.record("LSTMCell.h", hNext, func(g []float32) { addInto(state.grad()[:bh], g) }, state)
	ctx.record("LSTMCell.c", cNext, func(g []float32) { addInto(state.grad()[bh:], g) }, state)
	return hNext, cNext
}

// checkLSTM panics unless the tensors of an LSTM step fit together: the
// state h and c (B, H) with B the batch of x (shape xShape, b rows of in
// features), wIH (4H, in), wHH (4H, H) and the biases (4H) or nil. hName
// and cName name the state in messages. It returns H.
func checkLSTM(op string, xShape []int, b, in int, hName, cName string, h, c, wIH, wHH, bIH, bHH *Tensor) int {
	mustRank(op, hName, h, 2)
	mustRank(op, "weight_ih", wIH, 2)
	mustRank(op, "weight_hh", wHH, 2)
	hid := h.shape[1]
	if h.shape[0] != b {
		panic(fmt.Sprintf("autograd.%s: batch sizes differ: x %v vs %s %v", op, xShape, hName, h.shape))
	}
	if !sameShape(c.shape, h.shape) {
		panic(fmt.Sprintf("autograd.%s: %s shape %v does not match %s %v", op, cName, c.shape, hName, h.shape))
	}
	g4 := 4 * hid
	if wIH.shape[0] != g4 || wIH.shape[1] != in {
		panic(fmt.Sprintf("autograd.%s: weight_ih shape %v does not match x %v and %s %v (want [%d %d])", op, wIH.shape, xShape, hName, h.shape, g4, in))
	}
	if wHH.shape[0] != g4 || wHH.shape[1] != hid {
		panic(fmt.Sprintf("autograd.%s: weight_hh shape %v does not match %s %v (want [%d %d])", op, wHH.shape, hName, h.shape, g4, hid))
	}
	for _, bias := range []struct {
		name string
		t    *Tensor
	}{{"bias_ih", bIH}, {"bias_hh", bHH}} {
		if bias.t != nil && (len(bias.t.shape) != 1 || bias.t.shape[0] != g4) {
			panic(fmt.Sprintf("autograd.%s: %s shape %v does not match %s %v (want [%d])", op, bias.name, bias.t.shape, hName, h.shape, g4))
		}
	}
	return hid
}

// fillGateBias writes bIH + bHH into each of the rows of the (rows, g4)
// gate buffer and returns the beta with which the GEMMs must add to it: 1,
// or 0 (buffer left as it is) when both biases are nil.
func fillGateBias(gates []float32, rows, g4 int, bIH, bHH *Tensor) (beta float32) {
	if rows == 0 || bIH == nil && bHH == nil {
		return 0
	}
	bsum := gates[:g4]
	clear(bsum)
	if bIH != nil {
		copy(bsum, bIH.Data)
	}
	if bHH != nil {
		for j, v := range bHH.Data {
			bsum[j] += v
		}
	}
	for r := 1; r < rows; r++ {
		copy(gates[r*g4:(r+1)*g4], bsum)
	}
	return 1
}

// lstmPointwise applies the gate nonlinearities to the (b, 4H) gate
// pre-activations, overwriting them with the activated gates i, f, g, o,
// and computes from the previous cell state cPrev the next states cNext
// and hNext and tc = tanh(cNext), all (b, H).
func lstmPointwise(gates, cPrev, cNext, hNext, tc []float32, b, hid int) {
	g4 := 4 * hid
	parallel.For(b, rowGrain(g4), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gr := gates[r*g4 : (r+1)*g4]
			for j := 0; j < hid; j++ {
				ig := sigmoid32(gr[j])
				fg := sigmoid32(gr[hid+j])
				gg := tanh32(gr[2*hid+j])
				og := sigmoid32(gr[3*hid+j])
				gr[j], gr[hid+j], gr[2*hid+j], gr[3*hid+j] = ig, fg, gg, og
				k := r*hid + j
				cn := fg*cPrev[k] + ig*gg
				t := tanh32(cn)
				tc[k] = t
				cNext[k] = cn
				hNext[k] = og * t
			}
		}
	})
}

// lstmPointwiseGrad is the backward pass of lstmPointwise: from the
// activated gates, cPrev, tc and the gradients dh (plus dhExtra unless it
// is nil) and dc of hNext and cNext it writes the gradient of the gate
// pre-activations into dG and the gradient reaching cPrev into dcPrev,
// added to it when accumulate is set; dcPrev may be nil or alias dc.
func lstmPointwiseGrad(gates, dG, cPrev, tc, dh, dhExtra, dc, dcPrev []float32, accumulate bool, b, hid int) {
	g4 := 4 * hid
	parallel.For(b, rowGrain(g4), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gr := gates[r*g4 : (r+1)*g4]
			dr := dG[r*g4 : (r+1)*g4]
			for j := 0; j < hid; j++ {
				k := r*hid + j
				ig, fg, gg, og := gr[j], gr[hid+j], gr[2*hid+j], gr[3*hid+j]
				t := tc[k]
				dhv := dh[k]
				if dhExtra != nil {
					dhv += dhExtra[k]
				}
				dct := dc[k] + dhv*og*(1-t*t)
				dr[j] = dct * gg * ig * (1 - ig)
				dr[hid+j] = dct * cPrev[k] * fg * (1 - fg)
				dr[2*hid+j] = dct * ig * (1 - gg*gg)
				dr[3*hid+j] = dhv * t * og * (1 - og)
				switch {
				case dcPrev == nil:
				case accumulate:
					dcPrev[k] += dct * fg
				default:
					dcPrev[k] = dct * fg
				}
			}
		}
	})
}

// lstmBackward accumulates the gradients of one LSTMCell step given g, the
// gradient of the (2, B, H) state [hNext; cNext]. gates holds the activated
// gates i, f, g, o per row and tc holds tanh(cNext).
func lstmBackward(ctx *Context, x, h, c, wIH, wHH, bIH, bHH *Tensor, gates, tc, g []float32) {
	b, in, hid := x.shape[0], x.shape[1], h.shape[1]
	g4, bh := 4*hid, b*hid
	var gc []float32
	if c.requiresGrad {
		gc = c.grad()
	}
	// dG is the gradient of the gate pre-activations.
	dG := ctx.alloc(b*g4, false)
	lstmPointwiseGrad(gates, dG, c.Data, tc, g[:bh], nil, g[bh:], gc, true, b, hid)
	if b == 0 || g4 == 0 {
		return
	}
	if x.requiresGrad && in > 0 {
		blas.Sgemm(false, false, b, in, g4, 1, dG, g4, wIH.Data, in, 1, x.grad(), in)
	}
	if h.requiresGrad {
		blas.Sgemm(false, false, b, hid, g4, 1, dG, g4, wHH.Data, hid, 1, h.grad(), hid)
	}
	if wIH.requiresGrad && in > 0 {
		blas.Sgemm(true, false, g4, in, b, 1, dG, g4, x.Data, in, 1, wIH.grad(), in)
	}
	if wHH.requiresGrad {
		blas.Sgemm(true, false, g4, hid, b, 1, dG, g4, h.Data, hid, 1, wHH.grad(), hid)
	}
	addBiasGrads(ctx, bIH, bHH, dG, b, g4)
}

// addBiasGrads adds the column sums of the (rows, g4) gate gradient dG to
// the gradients of the biases that require one.
func addBiasGrads(ctx *Context, bIH, bHH *Tensor, dG []float32, rows, g4 int) {
	ihNeeds := bIH != nil && bIH.requiresGrad
	hhNeeds := bHH != nil && bHH.requiresGrad
	if !ihNeeds && !hhNeeds {
		return
	}
	db := columnSums(ctx, dG, rows, g4)
	if ihNeeds {
		addInto(bIH.grad(), db)
	}
	if hhNeeds {
		addInto(bHH.grad(), db)
	}
}

// LSTM runs one LSTM layer over a whole sequence, as a one-layer
// torch.nn.LSTM does, and returns the same values as LSTMCell applied step
// by step. x is (T, B, In), h0 and c0 are (B, H) and the weights and biases
// are shaped as for LSTMCell (biases may be nil). It returns out, the
// hidden state of every step, shape (T, B, H), and the final states hN
// (equal to the last step of out) and cN, shape (B, H).
//
// The op is organised for speed at small batches: the input projection
// x·wIHᵀ + biases of all T steps is one GEMM before the recurrence, so only
// the (B, H)×(H, 4H) product with wHH remains per step (read from a
// transposed copy that the GEMM uses in place). The backward pass likewise
// runs only dh = dGates·wHH per step and afterwards computes the gradients
// of x, wIH and wHH with one GEMM each over all T·B rows. With T = 0, out is
// empty and hN, cN are h0 and c0 themselves.
func LSTM(x, h0, c0, wIH, wHH, bIH, bHH *Tensor) (out, hN, cN *Tensor) {
	const op = "LSTM"
	mustRank(op, "x", x, 3)
	steps, b, in := x.shape[0], x.shape[1], x.shape[2]
	hid := checkLSTM(op, x.shape, b, in, "h0", "c0", h0, c0, wIH, wHH, bIH, bHH)
	g4 := 4 * hid
	ctx := contextOf(op, x, h0, c0, wIH, wHH, bIH, bHH)
	if steps == 0 {
		return ctx.New(0, b, hid), h0, c0
	}

	rows, bh := steps*b, b*hid
	// Input projections of every step plus both biases.
	gates := ctx.alloc(rows*g4, false)
	beta := fillGateBias(gates, rows, g4, bIH, bHH)
	if g4 > 0 {
		blas.Sgemm(false, true, rows, g4, in, 1, x.Data, in, wIH.Data, in, beta, gates, g4)
	}
	// wHHᵀ, (H, 4H): the per-step GEMM reads it in place without packing.
	whhT := ctx.alloc(hid*g4, false)
	transposeParallel(g4, hid, wHH.Data, whhT)

	// state holds [h0, h_1, …, h_T, c0, c_1, …, c_T], each (B, H): the
	// hidden states double as the stacked previous states of the backward
	// GEMM for wHH, and the cell states as c_{t−1} of the gate gradients.
	// The gate buffer is overwritten with the activated gates and tc with
	// tanh(c_t), for backward.
	n1 := (steps + 1) * bh
	state := ctx.empty(2 * n1)
	hs, cs := state.Data[:n1], state.Data[n1:]
	copy(hs[:bh], h0.Data)
	copy(cs[:bh], c0.Data)
	tc := ctx.alloc(rows*hid, false)
	for t := range steps {
		gt := gates[t*b*g4 : (t+1)*b*g4]
		if b > 0 && g4 > 0 && hid > 0 {
			blas.Sgemm(false, false, b, g4, hid, 1, hs[t*bh:(t+1)*bh], hid, whhT, g4, 1, gt, g4)
		}
		lstmPointwise(gt, cs[t*bh:(t+1)*bh], cs[(t+1)*bh:(t+2)*bh], hs[(t+1)*bh:(t+2)*bh], tc[t*bh:(t+1)*bh], b, hid)
	}

	ctx.record(op, state, func(g []float32) {
		lstmSeqBackward(ctx, x, h0, c0, wIH, wHH, bIH, bHH, gates, tc, state.Data, g)
	}, x, h0, c0, wIH, wHH, bIH, bHH)

	out = &Tensor{Data: hs[bh:n1:n1], shape: []int{steps, b, hid}}
	hN = &Tensor{Data: hs[n1-bh : n1 : n1], shape: []int{b, hid}}
	cN = &Tensor{Data: cs[n1-bh:], shape: []int{b, hid}}
	ctx.record("LSTM.out", out, func(g []float32) { addInto(state.grad()[bh:n1], g) }, state)
	ctx.record("LSTM.h", hN, func(g []float32) { addInto(state.grad()[n1-bh:n1], g) }, state)
	ctx.record("LSTM.c", cN, func(g []float32) { addInto(state.grad()[2*n1-bh:], g) }, state)
	return out, hN, cN
}

// lstmSeqBackward accumulates the gradients of LSTM given g, the gradient
// of its state buffer [h0, h_1..h_T, c0, c_1..c_T] (only h_1..h_T and c_T
// receive gradients from outside). gates holds the activated gates of every
// step and tc holds tanh(c_t).
func lstmSeqBackward(ctx *Context, x, h0, c0, wIH, wHH, bIH, bHH *Tensor, gates, tc, state, g []float32) {
	steps, b, in, hid := x.shape[0], x.shape[1], x.shape[2], h0.shape[1]
	g4, bh, rows := 4*hid, b*hid, steps*b
	n1 := (steps + 1) * bh
	hs, cs := state[:n1], state[n1:]
	dOut := g[bh:n1]
	// dh and dc carry ∂loss/∂h_t and ∂loss/∂c_t from step t+1 back to
	// step t; dG is the gradient of the gate pre-activations of all steps.
	dh := ctx.alloc(bh, true)
	dc := ctx.alloc(bh, false)
	copy(dc, g[2*n1-bh:])
	dG := ctx.alloc(rows*g4, false)
	for t := steps - 1; t >= 0; t-- {
		gt := gates[t*b*g4 : (t+1)*b*g4]
		dt := dG[t*b*g4 : (t+1)*b*g4]
		// dh holds the gradient reaching h_t through step t+1, and
		// dc is overwritten with the gradient reaching c_{t−1}.
		lstmPointwiseGrad(gt, dt, cs[t*bh:(t+1)*bh], tc[t*bh:(t+1)*bh], dh, dOut[t*bh:(t+1)*bh], dc, dc, false, b, hid)
		if t > 0 || h0.requiresGrad {
			// dh = dGates·wHH, the gradient reaching h_{t−1}.
			if b > 0 && hid > 0 && g4 > 0 {
				blas.Sgemm(false, false, b, hid, g4, 1, dt, g4, wHH.Data, hid, 0, dh, hid)
			}
		}
	}
	if h0.requiresGrad {
		addInto(h0.grad(), dh)
	}
	if c0.requiresGrad {
		addInto(c0.grad(), dc)
	}
	if rows == 0 || g4 == 0 {
		return
	}
	if x.requiresGrad && in > 0 {
		blas.Sgemm(false, false, rows, in, g4, 1, dG, g4, wIH.Data, in, 1, x.grad(), in)
	}
	if wIH.requiresGrad && in > 0 {
		blas.Sgemm(true, false, g4, in, rows, 1, dG, g4, x.Data, in, 1, wIH.grad(), in)
	}
	if wHH.requiresGrad {
		// Σ_t dGates_tᵀ·h_{t−1} over the stacked previous states h0..h_{T−1}.
		blas.Sgemm(true, false, g4, hid, rows, 1, dG, g4, hs[:rows*hid], hid, 1, wHH.grad(), hid)
	}
	addBiasGrads(ctx, bIH, bHH, dG, rows, g4)
}

// sigmoid32 returns 1/(1 + e**−v) in float32 using exp32 (relative error
// below 2.5e-7); it saturates to exactly 0 and 1 without overflow.
func sigmoid32(v float32) float32 {
	return 1 / (1 + exp32(-v))
}

// tanh32 returns tanh(v) in float32 (relative error below 2.5e-7), as
// Cephes tanhf does: an odd polynomial for |v| < 0.625, where 1 − 2/(e**2v + 1)
// would cancel, and exp32 elsewhere.
func tanh32(v float32) float32 {
	a := v
	if a < 0 {
		a = -a
	}
	if a < 0.625 {
		z := v * v
		return ((((-5.70498872745e-3*z+2.06390887954e-2)*z-5.37397155531e-2)*z+1.33314422036e-1)*z-3.33332819422e-1)*z*v + v
	}
	r := 1 - 2/(exp32(2*a)+1)
	if v < 0 {
		r = -r
	}
	return r
}
