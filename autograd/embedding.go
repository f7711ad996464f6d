package autograd

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/parallel"
)

// Embedding returns the rows of the (vocab, D) table w selected by ids, as a
// (len(ids), D) tensor (torch.nn.functional.embedding). The backward pass
// adds each output row's gradient into row ids[i] of w.Grad, in the order
// of ids, so repeated ids accumulate deterministically. It panics if an id
// is out of range.
//
// The ids are no tensor, so the context the result is bound to is given as
// c: the op runs in c, or in w's context when c is nil (c and a non-nil
// context of w must be the same).
func Embedding(c *Context, w *Tensor, ids []int) *Tensor {
	mustRank("Embedding", "weight", w, 2)
	vocab, d := w.shape[0], w.shape[1]
	for i, id := range ids {
		if id < 0 || id >= vocab {
			panic(fmt.Sprintf("autograd.Embedding: id %d at index %d out of range [0, %d) for weight %v", id, i, vocab, w.shape))
		}
	}
	ids = append([]int(nil), ids...) // keep the caller's slice out of the graph
	n := len(ids)
	switch {
	case c == nil:
		c = w.ctx
	case w.ctx != nil && w.ctx != c:
		panic(fmt.Sprintf("autograd.Embedding: the context %p given and the context %p of weight %v differ", c, w.ctx, w.shape))
	}
	out := c.empty(n, d)
	parallel.For(n, rowGrain(d), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			copy(out.Data[i*d:(i+1)*d], w.Data[ids[i]*d:(ids[i]+1)*d])
		}
	})
	return c.record("Embedding", out, func(g []float32) {
		gw := w.grad()
		// Split the columns among workers: every element of gw is then
		// updated by one goroutine, visiting ids in order.
		cg := max(64, (1<<14)/max(n, 1))
		parallel.For(d, cg, func(lo, hi int) {
			for i, id := range ids {
				src := g[i*d+lo : i*d+hi]
				dst := gw[id*d+lo : id*d+hi]
				for j, v := range src {
					dst[j] += v
				}
			}
		})
	}, w)
}
