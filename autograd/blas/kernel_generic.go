//go:build (!amd64 && !arm64) || purego

package blas

// archKernels returns the assembly kernels of this platform: none, so
// nothing registers with internal/impl.
func archKernels() []*microKernel { return nil }
