//go:build !linux && !darwin && !freebsd

package train

// ioctlColumns returns 0: this platform's terminal width is not read.
func ioctlColumns(fd uintptr) int { return 0 }
