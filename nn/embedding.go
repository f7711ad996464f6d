package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/proxgen/proxgen/autograd"
)

// Embedding maps token ids to rows of a weight matrix, as
// torch.nn.Embedding.
type Embedding struct {
	// Weight has shape (vocabulary size, dimension).
	Weight *autograd.Tensor
}

// NewEmbedding returns an embedding of num ids into dim dimensions with
// PyTorch's default initialisation N(0, 1) drawn from rng.
func NewEmbedding(num, dim int, rng *rand.Rand) *Embedding {
	e := &Embedding{Weight: autograd.New(num, dim).RequireGrad()}
	Normal(e.Weight, rng, 0, 1)
	return e
}

// Lookup returns the rows of the weight selected by ids, shape (len(ids), dim),
// computed in the context c (see autograd.Embedding; nil is the default).
func (e *Embedding) Lookup(c *autograd.Context, ids []int) *autograd.Tensor {
	return autograd.Embedding(c, e.Weight, ids)
}

// Forward looks up the ids held (as whole numbers) in x and returns a tensor
// of shape x.Shape() followed by the embedding dimension, in the context of
// x. It panics if an element of x is not an id in [0, vocabulary size).
func (e *Embedding) Forward(x *autograd.Tensor) *autograd.Tensor {
	ids := TensorIDs("Embedding", x, e.Weight.Dim(0))
	shape := append(append([]int(nil), x.Shape()...), e.Weight.Dim(1))
	return autograd.Reshape(e.Lookup(x.Context(), ids), shape...)
}

// TensorIDs converts the elements of x to ids in [0, n), panicking with a
// message naming op if one is not a whole number in that range.
func TensorIDs(op string, x *autograd.Tensor, n int) []int {
	ids := make([]int, x.Numel())
	for i, v := range x.Data {
		id := int(v)
		if float32(id) != v || id < 0 || id >= n {
			panic(fmt.Sprintf("nn.%s: element %d of input %v is %g, not an id in [0, %d)", op, i, x.Shape(), v, n))
		}
		ids[i] = id
	}
	return ids
}

// Params returns the weight.
func (e *Embedding) Params() []Param { return []Param{{Name: "weight", T: e.Weight}} }

// Buffers returns nil: Embedding has no buffers.
func (e *Embedding) Buffers() []Param { return nil }

// SetTraining does nothing: Embedding behaves the same in both modes.
func (e *Embedding) SetTraining(bool) {}
