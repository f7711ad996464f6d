//go:build !amd64 || purego

package blas

// gatherPack is packStrided's fast path where the CPU has one (amd64 with
// AVX-512): none here, so it reports false.
func gatherPack(src []float32, ld, kcb, w, width int, dst []float32) bool { return false }

// copyPack packs whole panels faster where the CPU can (amd64 with
// AVX-512): not here, so it reports false.
func copyPack(src []float32, ld, kcb, np, w int, dst []float32) bool { return false }
