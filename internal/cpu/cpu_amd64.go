//go:build !purego

package cpu

// cpuid executes CPUID with the given EAX and ECX inputs.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// xgetbv returns XCR0, the register in which the operating system reports
// which register states it saves on context switches. Call it only when
// CPUID reports OSXSAVE.
func xgetbv() (eax, edx uint32)

func detect() Features {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return Features{}
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fmaBit  = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if ecx1&(osxsave|avx) != osxsave|avx {
		return Features{}
	}
	xcr0, _ := xgetbv()
	const (
		sseAVXState = 1<<1 | 1<<2        // XMM and upper YMM halves
		avx512State = 1<<5 | 1<<6 | 1<<7 // opmask, upper ZMM halves, ZMM16-31
	)
	if xcr0&sseAVXState != sseAVXState {
		return Features{}
	}
	maxSub7, ebx7, _, _ := cpuid(7, 0)
	const (
		avx2Bit     = 1 << 5
		avx512FBit  = 1 << 16
		avx512BWBit = 1 << 30
		avx512VLBit = 1 << 31
		bf16Bit     = 1 << 5 // leaf 7, subleaf 1, EAX
	)
	f := Features{
		AVX2: ebx7&avx2Bit != 0,
		FMA:  ecx1&fmaBit != 0,
	}
	f.AVX512F = f.AVX2 && f.FMA && ebx7&avx512FBit != 0 && xcr0&avx512State == avx512State
	f.AVX512BW = f.AVX512F && ebx7&avx512BWBit != 0
	f.AVX512VL = f.AVX512F && ebx7&avx512VLBit != 0
	if f.AVX512BW && maxSub7 >= 1 {
		eax71, _, _, _ := cpuid(7, 1)
		f.AVX512BF16 = eax71&bf16Bit != 0
	}
	return f
}
