//go:build !purego

package cpu

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestFeatures compares the CPUID/XGETBV detection with the flags the Linux
// kernel reports, which already account for operating-system support.
func TestFeatures(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo")
	}
	var flags []string
	for _, line := range strings.Split(string(info), "\n") {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(val)
			break
		}
	}
	if flags == nil {
		t.Skip("no flags line in /proc/cpuinfo")
	}
	has := func(f string) bool { return slices.Contains(flags, f) }
	if want := has("avx2") && has("avx"); X86.AVX2 != want {
		t.Errorf("AVX2 detected %v, /proc/cpuinfo says %v", X86.AVX2, want)
	}
	if want := has("fma") && has("avx"); X86.FMA != want {
		t.Errorf("FMA detected %v, /proc/cpuinfo says %v", X86.FMA, want)
	}
	if want := has("avx2") && has("fma") && has("avx512f"); X86.AVX512F != want {
		t.Errorf("AVX512F detected %v, /proc/cpuinfo says %v", X86.AVX512F, want)
	}
	if want := X86.AVX512F && has("avx512bw"); X86.AVX512BW != want {
		t.Errorf("AVX512BW detected %v, /proc/cpuinfo says %v", X86.AVX512BW, want)
	}
	if want := X86.AVX512F && has("avx512vl"); X86.AVX512VL != want {
		t.Errorf("AVX512VL detected %v, /proc/cpuinfo says %v", X86.AVX512VL, want)
	}
	if want := X86.AVX512BW && has("avx512_bf16"); X86.AVX512BF16 != want {
		t.Errorf("AVX512BF16 detected %v, /proc/cpuinfo says %v", X86.AVX512BF16, want)
	}
	t.Logf("%+v", X86)
}
