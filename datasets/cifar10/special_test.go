//go:build unix

package cifar10

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpecialFiles checks that a directory or a FIFO in place of a data
// file is refused at once with a message saying so (opening a FIFO would
// block until a writer comes).
func TestSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.bin")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	sub := filepath.Join(dir, "sub.bin")
	os.Mkdir(sub, 0o755)
	for path, want := range map[string]string{fifo: "is not a regular file", sub: "is a directory"} {
		if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}
