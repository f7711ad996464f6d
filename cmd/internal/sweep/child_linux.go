//go:build linux

package sweep

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startChild starts cmd so that it dies with this process: in its own
// process group (a terminal's Ctrl-C reaches this process, which stops
// the children with SIGINT itself), and with SIGTERM as its parent-death
// signal, so that a runner killed with SIGKILL does not leave a child
// training on and holding its run folder's lock: the child saves its
// checkpoint and exits. The parent-death signal follows the thread that
// forked the child, so the calling goroutine keeps that thread until the
// child has exited (wait is called on it).
func startChild(cmd *exec.Cmd) (wait func() error, err error) {
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() error {
		defer runtime.UnlockOSThread()
		return cmd.Wait()
	}, nil
}
