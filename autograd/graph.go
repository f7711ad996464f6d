package autograd

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// node records how an op result was computed.
type node struct {
	op       string
	inputs   []*Tensor
	seq      uint64 // creation order; inputs always have smaller seq
	backward func(gradOut []float32)
}

var (
	nodeSeq    atomic.Uint64
	noGradDeep atomic.Int64
)

// GradEnabled reports whether ops currently record the graph.
func GradEnabled() bool { return noGradDeep.Load() == 0 }

// NoGrad runs f with graph recording switched off, as torch.no_grad() does:
// op results inside f never require a gradient. It is meant for evaluation
// and optimizer updates. The switch is process-wide, so do not train on
// another goroutine while f runs.
func NoGrad(f func()) {
	noGradDeep.Add(1)
	defer noGradDeep.Add(-1)
	f()
}

// needsGrad reports whether an op on these inputs must be recorded.
func needsGrad(inputs ...*Tensor) bool {
	if !GradEnabled() {
		return false
	}
	for _, t := range inputs {
		if t != nil && t.requiresGrad {
			return true
		}
	}
	return false
}

// record attaches a backward function to out if any input requires a
// gradient. backward receives ∂loss/∂out and must accumulate (+=) into the
// grad() of each input that requires a gradient. It returns out.
//
// Every op calls record exactly once, after computing its forward result.
func record(op string, out *Tensor, backward func(gradOut []float32), inputs ...*Tensor) *Tensor {
	if !needsGrad(inputs...) {
		return out
	}
	out.requiresGrad = true
	out.node = &node{op: op, inputs: inputs, seq: nodeSeq.Add(1), backward: backward}
	return out
}

// Backward computes the gradient of the scalar t with respect to every leaf
// tensor that requires a gradient, adding it to that tensor's Grad. The
// graph is released afterwards, so Backward may be called once per graph.
func (t *Tensor) Backward() {
	if len(t.Data) != 1 {
		panic(fmt.Sprintf("autograd.Backward: needs a scalar, got shape %v (use BackwardWith)", t.shape))
	}
	t.BackwardWith([]float32{1})
}

// BackwardWith runs backpropagation from t seeded with ∂loss/∂t = seed.
func (t *Tensor) BackwardWith(seed []float32) {
	if len(seed) != len(t.Data) {
		panic(fmt.Sprintf("autograd.BackwardWith: seed has %d elements, tensor shape %v", len(seed), t.shape))
	}
	if !t.requiresGrad {
		panic("autograd.Backward: tensor does not require a gradient (no input requires one, or it was computed under NoGrad)")
	}
	g := t.grad()
	for i, v := range seed {
		g[i] += v
	}
	if t.node == nil {
		return
	}
	// Collect the op results reachable from t and run their backward
	// functions in reverse creation order, which is a topological order.
	var order []*Tensor
	seen := map[*node]bool{t.node: true}
	stack := []*Tensor{t}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, u)
		for _, in := range u.node.inputs {
			if in != nil && in.node != nil && in.requiresGrad && !seen[in.node] {
				seen[in.node] = true
				stack = append(stack, in)
			}
		}
	}
	slices.SortFunc(order, func(a, b *Tensor) int {
		switch {
		case a.node.seq > b.node.seq:
			return -1
		case a.node.seq < b.node.seq:
			return 1
		}
		return 0
	})
	for _, u := range order {
		n := u.node
		if u.Grad != nil {
			n.backward(u.Grad)
		}
		// Release the graph: the result becomes a leaf that no longer
		// requires a gradient, and its gradient buffer is dropped unless
		// it is the tensor Backward was called on.
		u.node = nil
		u.requiresGrad = false
		if u != t {
			u.Grad = nil
		}
	}
}
