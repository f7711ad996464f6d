//go:build !unix

package main

import "time"

// gemmCPUTime reports that process CPU time is not available here.
func gemmCPUTime() (time.Duration, bool) { return 0, false }
