//go:build !purego

package blas

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCPUFeatures compares the CPUID/XGETBV detection with the flags the
// Linux kernel reports, which already account for operating-system support.
func TestCPUFeatures(t *testing.T) {
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
	avx2, avx512 := cpuFeatures()
	if want := has("avx2") && has("fma") && has("avx"); avx2 != want {
		t.Errorf("avx2 detected %v, /proc/cpuinfo says %v", avx2, want)
	}
	if want := has("avx2") && has("fma") && has("avx512f"); avx512 != want {
		t.Errorf("avx512 detected %v, /proc/cpuinfo says %v", avx512, want)
	}
	t.Logf("kernels: %v", Kernels())
}
