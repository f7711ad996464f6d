// Package proxk holds the arithmetic that the regularizers of optim/prox
// and the fused update of optim share: the closed-form scalar proximal
// maps and their float32 fast paths, the sums and scalings of the group
// maps, the groups' layout in a tensor and the float32 group decisions,
// and the AVX2 kernels beside their Go loops (registered with
// internal/impl as "optim", "avx2"; bit-identical results). Nothing here
// is API: optim/prox is.
package proxk
