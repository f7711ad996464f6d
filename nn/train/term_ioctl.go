//go:build linux || darwin || freebsd

package train

import (
	"syscall"
	"unsafe"
)

// ioctlColumns returns the width of the terminal open as fd, or 0 when fd
// is not a terminal.
func ioctlColumns(fd uintptr) int {
	var ws struct{ Row, Col, Xpixel, Ypixel uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0
	}
	return int(ws.Col)
}
