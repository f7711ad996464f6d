//go:build !unix

package infer_test

import "time"

// cpuTime is not measured on this platform.
func cpuTime() time.Duration { return 0 }
