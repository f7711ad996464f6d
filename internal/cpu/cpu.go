// Package cpu reports which x86 vector instruction sets the CPU and the
// operating system support, read with CPUID and XGETBV at start-up, so that
// the assembly kernels of autograd and optim can pick their implementation.
package cpu

// X86 holds the features found at start-up; all are false on other
// architectures and with the purego build tag.
var X86 = detect()

// Features lists the vector instruction sets the kernels use.
type Features struct {
	// AVX2 is AVX2 with the YMM state saved by the operating system.
	AVX2 bool
	// FMA is the FMA3 extension (with AVX and the YMM state).
	FMA bool
	// AVX512F is AVX-512 Foundation with the opmask and ZMM states saved.
	AVX512F bool
}
