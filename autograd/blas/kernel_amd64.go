//go:build !purego

package blas

//go:generate go run gen_kernels.go

// cpuid executes CPUID with the given EAX and ECX inputs.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// xgetbv returns XCR0, the register in which the operating system reports
// which register states it saves on context switches. Call it only when
// CPUID reports OSXSAVE.
func xgetbv() (eax, edx uint32)

// kernelAVX512 is the 12×32 AVX-512 micro-kernel in kernel_amd64.s.
//
//go:noescape
func kernelAVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// kernelAVX2 is the 6×16 AVX2+FMA micro-kernel in kernel_amd64.s.
//
//go:noescape
func kernelAVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// cpuFeatures reports whether the CPU and operating system support the
// AVX2+FMA and AVX-512F kernels.
func cpuFeatures() (avx2, avx512 bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false, false
	}
	xcr0, _ := xgetbv()
	const (
		sseAVXState = 1<<1 | 1<<2        // XMM and upper YMM halves
		avx512State = 1<<5 | 1<<6 | 1<<7 // opmask, upper ZMM halves, ZMM16-31
	)
	if xcr0&sseAVXState != sseAVXState {
		return false, false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const (
		avx2Bit    = 1 << 5
		avx512FBit = 1 << 16
	)
	avx2 = ebx7&avx2Bit != 0
	avx512 = avx2 && ebx7&avx512FBit != 0 && xcr0&avx512State == avx512State
	return avx2, avx512
}

// archKernels returns the assembly kernels this CPU can run, best last.
func archKernels() []*microKernel {
	avx2, avx512 := cpuFeatures()
	var ks []*microKernel
	if avx2 {
		ks = append(ks, &microKernel{
			name: "avx2",
			mr:   6, nr: 16,
			mc: 144, kc: 256, nc: 3072,
			run: runAVX2,
		})
	}
	if avx512 {
		ks = append(ks, &microKernel{
			name: "avx512",
			mr:   12, nr: 32,
			mc: 480, kc: 256, nc: 3072,
			run: runAVX512,
		})
	}
	return ks
}

func runAVX512(kc int, ap, bp, c []float32, ldc int, alpha, beta float32) {
	_ = ap[kc*12-1]
	_ = bp[kc*32-1]
	_ = c[11*ldc+31]
	kernelAVX512(kc, &ap[0], &bp[0], &c[0], ldc, alpha, beta)
}

func runAVX2(kc int, ap, bp, c []float32, ldc int, alpha, beta float32) {
	_ = ap[kc*6-1]
	_ = bp[kc*16-1]
	_ = c[5*ldc+15]
	kernelAVX2(kc, &ap[0], &bp[0], &c[0], ldc, alpha, beta)
}
