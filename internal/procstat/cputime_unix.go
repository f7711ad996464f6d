//go:build unix

package procstat

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user and system, all threads) the process
// has used so far, with microsecond resolution; ok is false where it is
// not available.
func CPUTime() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
