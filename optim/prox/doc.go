// Package prox holds the regularizers of ProxGen and their proximal maps
// (Section 2.1 and Appendix C of the paper): the element-wise ℓq penalties
// (L0, L1, Lq with the closed forms of ℓ1/2 and ℓ2/3, a safeguarded
// numerical solve for any other q) and the W-shaped binary regularizers
// of the revised ProxQuant (BinaryW), each with its map under a diagonal
// metric, argmin_x (x − z)²/(2η) + λ r(x); and the group regularizers
// (GroupL0, GroupHalf, GroupLasso) that couple the coordinates of a
// weight's output filters, input channels or SIMD blocks. Parse reads the programs' spellings (Syntax).
//
// The maps run in float32 where that is exact to about an ulp and fall
// back to float64 elsewhere, so no finite input gives NaN or Inf; on
// amd64 with AVX2 the ℓ0, ℓ1 and ℓ1/2 maps and the group maps' sums use
// assembly kernels with the Go loops' results bit for bit (build with
// -tags purego for Go only). The optimizers of package optim apply these
// maps inside their update, fused with the gradient step where they can.
package prox
