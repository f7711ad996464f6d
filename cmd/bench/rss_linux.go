package main

import "os"

// peakRSS returns the peak resident set size of the process in bytes (the
// kernel's high-water mark, VmHWM in /proc/self/status).
func peakRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseVmHWM(b)
}
