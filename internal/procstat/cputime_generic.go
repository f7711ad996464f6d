//go:build !unix

package procstat

import "time"

// CPUTime reports that the process's CPU time is not available here.
func CPUTime() (d time.Duration, ok bool) { return 0, false }
