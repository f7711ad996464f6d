//go:build !amd64 || purego

package kernels

// shiftAsm: ShiftStores has no assembly kernel here.
const shiftAsm = false

func shiftStoresAsm(img, left, right *float32, ld int, x *float32, ldx int, r *float32, ldr int, c, n, w int, mode int) {
	panic("kernels: no ShiftStores kernel")
}

func splitStoresAsm(dst *float32, ld, ps int, x *float32, ldx int, c, h, cols int) {
	panic("kernels: no SplitStores kernel")
}
