//go:build !amd64 || purego

package kernels

// shiftAsm: ShiftStores has no assembly kernel here.
const shiftAsm = false

func shiftStoresAsm(img, left, right *float32, ld int, x *float32, ldx int, r *float32, ldr int, c, n, w int, mode int) {
	panic("kernels: no ShiftStores kernel")
}
