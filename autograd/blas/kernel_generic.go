//go:build (!amd64 && !arm64) || purego

package blas

// archKernels returns the assembly kernels of this platform: none.
func archKernels() []*microKernel { return nil }
