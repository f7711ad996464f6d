package cpu_test

import (
	"fmt"

	"github.com/proxgen/proxgen/internal/cpu"
)

// fmaPath is how a kernel chooses its implementation: the AVX2 assembly
// needs both AVX2 and FMA, otherwise it runs the pure-Go loop.
func fmaPath(f cpu.Features) string {
	if f.AVX2 && f.FMA {
		return "avx2+fma assembly"
	}
	return "pure Go"
}

// Example prints the features of this machine (the output depends on it,
// so it is not checked).
func Example() {
	fmt.Printf("%+v: %s\n", cpu.X86, fmaPath(cpu.X86))
}

// ExampleFeatures dispatches on Features values as the kernels of autograd
// and optim do on cpu.X86.
func ExampleFeatures() {
	for _, f := range []cpu.Features{{}, {AVX2: true}, {AVX2: true, FMA: true}, {AVX2: true, FMA: true, AVX512F: true}} {
		fmt.Printf("%+v: %s\n", f, fmaPath(f))
	}
	// Output:
	// {AVX2:false FMA:false AVX512F:false AVX512BW:false AVX512VL:false AVX512BF16:false}: pure Go
	// {AVX2:true FMA:false AVX512F:false AVX512BW:false AVX512VL:false AVX512BF16:false}: pure Go
	// {AVX2:true FMA:true AVX512F:false AVX512BW:false AVX512VL:false AVX512BF16:false}: avx2+fma assembly
	// {AVX2:true FMA:true AVX512F:true AVX512BW:false AVX512VL:false AVX512BF16:false}: avx2+fma assembly
}
