//go:build !linux

package sweep

import "os/exec"

// startChild starts cmd. Only Linux has a parent-death signal; elsewhere a
// runner killed with SIGKILL leaves its children running until they end.
func startChild(cmd *exec.Cmd) (wait func() error, err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}
