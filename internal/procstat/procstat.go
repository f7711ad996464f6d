// Package procstat reads what the process has used so far: its CPU time
// and its peak resident set size, for the benchmark and load-test
// programs.
package procstat

import (
	"bytes"
	"os"
	"strconv"
)

// PeakRSS returns the peak resident set size of the process in bytes (the
// kernel's high-water mark, VmHWM in /proc/self/status); ok is false
// where there is no such file (outside Linux).
func PeakRSS() (bytes int64, ok bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseVmHWM(b)
}

// parseVmHWM returns the VmHWM line of a /proc/<pid>/status file in bytes.
func parseVmHWM(status []byte) (int64, bool) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// CPUPerOp calls op n times and returns the process's CPU time per call
// in milliseconds (all threads, so a call that keeps two cores busy counts
// twice its wall time): the steadier figure on a machine shared with other
// work. ok is false where CPUTime is not available.
func CPUPerOp(n int, op func()) (ms float64, ok bool) {
	c0, ok0 := CPUTime()
	for range n {
		op()
	}
	c1, ok1 := CPUTime()
	if !ok0 || !ok1 || n <= 0 {
		return 0, false
	}
	return float64(c1-c0) / 1e6 / float64(n), true
}
