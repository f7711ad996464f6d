// Package regfile opens and reads files that must be regular files of
// bounded size, without blocking on what stands at the path instead: a
// FIFO, a device such as /dev/zero (through a symlink or not), a socket or
// a directory is an error at once, not a read that never ends.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Open opens the regular file at path for reading, following symlinks. It
// opens non-blocking (O_NONBLOCK where the system has it), so that a FIFO
// at path does not block the open until a writer comes, and then requires
// the opened file to be a regular file. The error names path.
func Open(path string) (*os.File, os.FileInfo, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		fh.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (%s)", path, kind(st.Mode()))
	}
	return fh, st, nil
}

// ErrTooLarge is returned (wrapped) by ReadFile for a file over its bound.
var ErrTooLarge = errors.New("file too large")

// ReadFile returns the content of the regular file at path (Open), which
// may hold at most max bytes; a file over max, or one that grows past its
// size while it is read, is an error wrapping ErrTooLarge. It allocates
// the file's size once.
func ReadFile(path string, max int64) ([]byte, error) {
	fh, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d: %w", path, st.Size(), max, ErrTooLarge)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var one [1]byte
	if n, _ := fh.Read(one[:]); n > 0 {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read: %w", path, st.Size(), ErrTooLarge)
	}
	return b, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
