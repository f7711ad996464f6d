//go:build !amd64 || purego

package conv

// haveAVX2 is false where the assembly kernels are not built.
const haveAVX2 = false
