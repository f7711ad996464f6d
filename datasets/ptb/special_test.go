//go:build unix

package ptb

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpecialFiles checks that a directory or a FIFO in place of a text
// file is refused at once with a message saying so.
func TestSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.txt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	sub := filepath.Join(dir, "sub.txt")
	os.Mkdir(sub, 0o755)
	for path, want := range map[string]string{fifo: "is not a regular file", sub: "is a directory"} {
		if _, _, err := BuildVocab(path); err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "ptb:") != 1 {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}
