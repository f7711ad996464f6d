package train

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// openPTY opens a pseudo-terminal of cols columns and returns its
// terminal side, or nil (the test is then skipped) when the system has
// none.
func openPTY(t *testing.T, cols int) (*os.File, int) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
		return nil, 0
	}
	t.Cleanup(func() { ptmx.Close() })
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) error {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); e != 0 {
			return e
		}
		return nil
	}
	var unlock int32
	if err := ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	var n uint32
	if err := ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Skipf("pseudo-terminal number: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	ws := struct{ Row, Col, X, Y uint16 }{Row: 24, Col: uint16(cols)}
	if err := ioctl(ptmx, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatalf("setting the pseudo-terminal's size: %v", err)
	}
	return pts, cols
}
