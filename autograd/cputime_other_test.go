//go:build !unix

package autograd_test

import "time"

// cpuTime reports that process CPU time is not available here.
func cpuTime() (time.Duration, bool) { return 0, false }
