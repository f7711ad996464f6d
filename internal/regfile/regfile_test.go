//go:build unix

package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRefusesWhatIsNotARegularFile: a FIFO (no writer: opening it
// blocking would never return), a symlink to /dev/zero, a directory and a
// file over the bound are each an error at once; a symlink to a regular
// file reads.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 1001), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("content"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "a FIFO"}, {zero, "a character device"}, {dir, "a directory"}, {big, "over the limit of 1000"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(c.path, 1000); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want %q", c.path, err, c.want)
			}
			if c.path == big && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: %v is not ErrTooLarge", c.path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadFile blocked", c.path)
		}
	}
	if b, err := ReadFile(link, 1000); err != nil || string(b) != "content" {
		t.Errorf("symlink to a regular file: %q, %v", b, err)
	}
}
