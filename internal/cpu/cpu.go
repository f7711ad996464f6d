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
	// AVX512BW is AVX-512 Byte and Word (VPERMW and the other 16-bit
	// element instructions), with AVX512F.
	AVX512BW bool
	// AVX512VL is AVX-512 Vector Length (the AVX-512 instructions on YMM
	// and XMM registers, Y16-Y31 included), with AVX512F.
	AVX512VL bool
	// AVX512BF16 is AVX512_BF16 (VCVTNE2PS2BF16, VDPBF16PS: bfloat16
	// conversions and pairwise dot products accumulated in float32), with
	// AVX512F and AVX512BW, as on AMD Zen 4 and Intel since Cooper Lake.
	AVX512BF16 bool
}
