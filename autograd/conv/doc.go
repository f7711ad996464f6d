// Package conv is the convolution engine: the dense 2-D convolution of
// float32 images in (N, C, H, W) layout and its gradients on plain slices
// (Forward, Backward), the convolutions prepared once for inference
// (Plan, with its chained and padded sparse blocks) and the sparse
// weights whose zeros a product skips (SparseWeight, ForwardSparse,
// SparseWeight.Linear). It knows nothing of tensors or of automatic
// differentiation: package autograd's Conv2d ops call Forward and
// Backward, and nn/infer, which decides how each layer of a loaded
// network runs, holds Plans and SparseWeights.
//
// The algorithms, each chosen by a rule measured per layer (or forced by
// Config.Algo):
//
//   - im2col.go: im2col and a GEMM (autograd/blas), the wide layout for
//     stride 1 and col2im for the input gradient of the other strides
//     above 1;
//   - gather.go: the im2col matrix read in place from one padded copy of
//     each image (blas.GatherA), in the wide, flat or phase layout, and
//     the weight gradient as gathered dot products;
//   - phasegrad.go: the input gradient of stride-2 convolutions with
//     kernels of more than four taps by the four phases of the input, each a
//     gathered product over one padded copy of the output gradient;
//   - winograd.go: Winograd's F(2×2, 3×3), its transforms with AVX2
//     kernels (winograd_amd64.s, registered with internal/impl as package
//     "conv" and tested against the Go loops); winoweight.go: its weight
//     gradient, F(2×2, 3×3) transposed, with the AVX2 transforms of the
//     output gradients beside the others;
//   - blocked.go: package nchwc's channel-blocked Winograd for the output
//     and the input gradient, images converted to its layout and back;
//   - bf16.go: the bfloat16 products of a geometry from Geom.BF16;
//   - plan.go, chain.go: Plan, the filters packed once, the epilogue (bias,
//     residual, ReLU) applied while the output is in the cache, a small
//     batch split over the workers by rows or filter halves;
//   - sparse.go: SparseWeight (compressed sparse rows) and the sparse
//     product on the padded image, the phase layout or im2col.
//
// Every result is bit-identical for any number of workers
// (internal/parallel). A Geom, a Plan and a SparseWeight are safe for
// concurrent use; the scratch buffers the calls share are free lists
// owned by this package.
package conv
