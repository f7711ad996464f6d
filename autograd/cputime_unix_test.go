//go:build unix

package autograd_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system, all threads) the process
// has used so far.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
