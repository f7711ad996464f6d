//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package train

import "os"

// flock reports that this system has no flock: LockDir creates the lock
// file exclusively instead.
func flock(f *os.File) error { return errNoFlock }

// processAlive reports whether a process with this pid exists (as far as
// os.FindProcess can tell: on Windows it opens the process).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
