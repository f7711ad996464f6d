//go:build unix

package regfile

import "syscall"

const nonblock = syscall.O_NONBLOCK
