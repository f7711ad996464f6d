//go:build !purego

package blas

// archKernels returns the assembly kernels this CPU can run, best last.
func archKernels() []*microKernel { return nil }
