package autograd

import "fmt"

// node records how an op result was computed.
type node struct {
	op       string
	inputs   []*Tensor
	backward func(gradOut []float32)
}

// needsGrad reports whether an op in c on these inputs must be recorded:
// c records the graph and an input requires a gradient.
func (c *Context) needsGrad(inputs ...*Tensor) bool {
	if !c.grads() {
		return false
	}
	for _, t := range inputs {
		if t != nil && t.requiresGrad {
			return true
		}
	}
	return false
}

// record binds out, the result of the op named op run in c, to c and
// attaches a backward function to it if c records the graph and an input
// requires a gradient. backward receives ∂loss/∂out and must accumulate
// (+=) into the grad() of each input that requires a gradient. It returns
// out.
//
// Every op calls record exactly once, after computing its forward result.
func (c *Context) record(op string, out *Tensor, backward func(gradOut []float32), inputs ...*Tensor) *Tensor {
	out.ctx = c
	if p := c.profile(); p != nil {
		p.forward(op)
	}
	if !c.needsGrad(inputs...) {
		return out
	}
	out.requiresGrad = true
	out.node = &node{op: op, inputs: inputs, backward: backward}
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
		panic("autograd.Backward: tensor does not require a gradient (no input requires one, or it was computed in a NoGrad context)")
	}
	g := t.grad()
	for i, v := range seed {
		g[i] += v
	}
	if t.node == nil {
		return
	}
	order := topoOrder(t)
	// Run the backward functions from t towards the leaves: every op
	// result comes before the inputs it was computed from.
	for i := len(order) - 1; i >= 0; i-- {
		u := order[i]
		n := u.node
		if u.Grad != nil {
			if p := u.ctx.profile(); p != nil {
				p.backward(n.op, func() { n.backward(u.Grad) })
			} else {
				n.backward(u.Grad)
			}
		}
		// Release the graph: the result becomes a leaf that no longer
		// requires a gradient, and its gradient buffer is dropped (handed
		// back to the arena it came from) unless it is the tensor Backward
		// was called on.
		u.node = nil
		u.requiresGrad = false
		if u != t {
			u.ctx.release(u.Grad)
			u.Grad = nil
		}
	}
}

// topoOrder returns the recorded op results reachable from t (t included)
// in depth-first post-order: every result comes after the results it was
// computed from. Inputs are visited in argument order, so the order is the
// same on every run. The search keeps its own stack, so graphs of any depth
// (long unrolled sequences) are fine.
func topoOrder(t *Tensor) []*Tensor {
	type frame struct {
		u    *Tensor
		next int // index of the next input of u.node to visit
	}
	var order []*Tensor
	seen := map[*node]bool{t.node: true}
	stack := []frame{{u: t}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		ins := f.u.node.inputs
		descended := false
		for f.next < len(ins) {
			in := ins[f.next]
			f.next++
			if in != nil && in.node != nil && in.requiresGrad && !seen[in.node] {
				seen[in.node] = true
				stack = append(stack, frame{u: in})
				descended = true
				break
			}
		}
		if !descended {
			order = append(order, f.u)
			stack = stack[:len(stack)-1]
		}
	}
	return order
}

// Records reports whether an op on these inputs records the graph: some
// input requires a gradient and the context the op runs in (see Context)
// records. Code with an inference path that records nothing (the sparse
// layers of nn/infer's prepared networks) uses it to choose. It panics, as ops do, if
// the inputs are bound to different contexts.
func Records(inputs ...*Tensor) bool {
	return contextOf("Records", inputs...).needsGrad(inputs...)
}
