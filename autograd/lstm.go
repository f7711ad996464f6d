package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/autograd/blas"
	"github.com/proxgen/proxgen/autograd/parallel"
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
// steps) are combined before that node's backward pass runs.
func LSTMCell(x, h, c, wIH, wHH, bIH, bHH *Tensor) (hNext, cNext *Tensor) {
	const op = "LSTMCell"
	mustRank(op, "x", x, 2)
	mustRank(op, "h", h, 2)
	mustRank(op, "weight_ih", wIH, 2)
	mustRank(op, "weight_hh", wHH, 2)
	b, in, hid := x.shape[0], x.shape[1], h.shape[1]
	if h.shape[0] != b {
		panic(fmt.Sprintf("autograd.LSTMCell: batch sizes differ: x %v vs h %v", x.shape, h.shape))
	}
	if !sameShape(c.shape, h.shape) {
		panic(fmt.Sprintf("autograd.LSTMCell: c shape %v does not match h %v", c.shape, h.shape))
	}
	g4 := 4 * hid
	if wIH.shape[0] != g4 || wIH.shape[1] != in {
		panic(fmt.Sprintf("autograd.LSTMCell: weight_ih shape %v does not match x %v and h %v (want [%d %d])", wIH.shape, x.shape, h.shape, g4, in))
	}
	if wHH.shape[0] != g4 || wHH.shape[1] != hid {
		panic(fmt.Sprintf("autograd.LSTMCell: weight_hh shape %v does not match h %v (want [%d %d])", wHH.shape, h.shape, g4, hid))
	}
	for _, bias := range []struct {
		name string
		t    *Tensor
	}{{"bias_ih", bIH}, {"bias_hh", bHH}} {
		if bias.t != nil && (len(bias.t.shape) != 1 || bias.t.shape[0] != g4) {
			panic(fmt.Sprintf("autograd.LSTMCell: %s shape %v does not match h %v (want [%d])", bias.name, bias.t.shape, h.shape, g4))
		}
	}

	// Gate pre-activations: broadcast biases, then accumulate both GEMMs.
	gates := alloc(b*g4, false) // overwritten: beta is 0 without biases
	beta := float32(0)
	if bIH != nil || bHH != nil {
		beta = 1
		bsum := make([]float32, g4)
		if bIH != nil {
			copy(bsum, bIH.Data)
		}
		if bHH != nil {
			for j, v := range bHH.Data {
				bsum[j] += v
			}
		}
		for r := 0; r < b; r++ {
			copy(gates[r*g4:(r+1)*g4], bsum)
		}
	}
	if b > 0 && g4 > 0 {
		blas.Sgemm(false, true, b, g4, in, 1, x.Data, in, wIH.Data, in, beta, gates, g4)
		blas.Sgemm(false, true, b, g4, hid, 1, h.Data, hid, wHH.Data, hid, 1, gates, g4)
	}

	// state holds hNext followed by cNext; the gate buffer is overwritten
	// with the activated gates and tc with tanh(cNext), for backward.
	bh := b * hid
	state := empty(2, b, hid)
	tc := alloc(bh, false)
	parallel.For(b, rowGrain(g4), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gr := gates[r*g4 : (r+1)*g4]
			for j := 0; j < hid; j++ {
				ig := sigmoid(gr[j])
				fg := sigmoid(gr[hid+j])
				gg := tanh(gr[2*hid+j])
				og := sigmoid(gr[3*hid+j])
				gr[j], gr[hid+j], gr[2*hid+j], gr[3*hid+j] = ig, fg, gg, og
				k := r*hid + j
				cn := fg*c.Data[k] + ig*gg
				t := tanh(cn)
				tc[k] = t
				state.Data[bh+k] = cn
				state.Data[k] = og * t
			}
		}
	})

	record(op, state, func(g []float32) {
		lstmBackward(x, h, c, wIH, wHH, bIH, bHH, gates, tc, g)
	}, x, h, c, wIH, wHH, bIH, bHH)

	hNext = &Tensor{Data: state.Data[:bh:bh], shape: []int{b, hid}}
	cNext = &Tensor{Data: state.Data[bh:], shape: []int{b, hid}}
	record("LSTMCell.h", hNext, func(g []float32) { addInto(state.grad()[:bh], g) }, state)
	record("LSTMCell.c", cNext, func(g []float32) { addInto(state.grad()[bh:], g) }, state)
	return hNext, cNext
}

// addInto adds src into dst element-wise.
func addInto(dst, src []float32) {
	forEach(len(src), func(lo, hi int) {
		d := dst[lo:hi]
		for i, v := range src[lo:hi] {
			d[i] += v
		}
	})
}

// lstmBackward accumulates the gradients of one LSTMCell step given g, the
// gradient of the (2, B, H) state [hNext; cNext]. gates holds the activated
// gates i, f, g, o per row and tc holds tanh(cNext).
func lstmBackward(x, h, c, wIH, wHH, bIH, bHH *Tensor, gates, tc, g []float32) {
	b, in, hid := x.shape[0], x.shape[1], h.shape[1]
	g4, bh := 4*hid, b*hid
	dh, dc := g[:bh], g[bh:]
	var gc []float32
	if c.requiresGrad {
		gc = c.grad()
	}
	// dG is the gradient of the gate pre-activations.
	dG := alloc(b*g4, false)
	parallel.For(b, rowGrain(g4), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			gr := gates[r*g4 : (r+1)*g4]
			dr := dG[r*g4 : (r+1)*g4]
			for j := 0; j < hid; j++ {
				k := r*hid + j
				ig, fg, gg, og := gr[j], gr[hid+j], gr[2*hid+j], gr[3*hid+j]
				t := tc[k]
				dhv := dh[k]
				dct := dc[k] + dhv*og*(1-t*t)
				dr[j] = dct * gg * ig * (1 - ig)
				dr[hid+j] = dct * c.Data[k] * fg * (1 - fg)
				dr[2*hid+j] = dct * ig * (1 - gg*gg)
				dr[3*hid+j] = dhv * t * og * (1 - og)
				if gc != nil {
					gc[k] += dct * fg
				}
			}
		}
	})
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
	ihNeeds := bIH != nil && bIH.requiresGrad
	hhNeeds := bHH != nil && bHH.requiresGrad
	if !ihNeeds && !hhNeeds {
		return
	}
	// Column sums of dG, each column summed over rows in order.
	db := alloc(g4, true)
	parallel.For(g4, 256, func(lo, hi int) {
		for r := 0; r < b; r++ {
			for j, v := range dG[r*g4+lo : r*g4+hi] {
				db[lo+j] += v
			}
		}
	})
	if ihNeeds {
		addInto(bIH.grad(), db)
	}
	if hhNeeds {
		addInto(bHH.grad(), db)
	}
}
