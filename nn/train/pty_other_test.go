//go:build !linux

package train

import (
	"os"
	"testing"
)

// openPTY skips: pseudo-terminals are opened on Linux only.
func openPTY(t *testing.T, cols int) (*os.File, int) {
	t.Skip("pseudo-terminal test on Linux only")
	return nil, 0
}
