//go:build !purego

package kernels

// shiftAsm: ShiftStores has an AVX2 kernel (run while useAsm).
const shiftAsm = true

// shiftStoresAsm is ShiftStores' loop for n a positive multiple of 8,
// strides and w in bytes (mode 0 plain, 1 ReLU, 2 residual and ReLU);
// left points at the value before the channel's first shifted one.
//
//go:noescape
func shiftStoresAsm(img, left, right *float32, ld int, x *float32, ldx int, r *float32, ldr int, c, n, w int, mode int)

// splitStoresAsm is SplitStores' loop for w/2 a positive multiple of 8
// (cols in bytes), strides in bytes.
//
//go:noescape
func splitStoresAsm(dst *float32, ld, ps int, x *float32, ldx int, c, h, cols int)
