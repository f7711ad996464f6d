package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataErrors checks the data errors that used to pass: a -data folder
// that does not exist (a typo) is exit 1 naming -download, with no folder
// created; files with fewer records than the official release are exit 1
// naming -allow-subset.
func TestDataErrors(t *testing.T) {
	base := t.TempDir()
	typo := filepath.Join(base, "cifra10")
	out := filepath.Join(base, "run")
	code, _, stderr := runCmd(context.Background(), "-data", typo, "-out", out, "-epochs", "1", "-progress", "none")
	if code != exitError || !strings.Contains(stderr, typo+" does not exist") || !strings.Contains(stderr, "-download") {
		t.Errorf("missing -data folder: exit %d, %q", code, stderr)
	}
	for _, d := range []string{typo, out} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s was created (%v)", d, err)
		}
	}
	data := writeFixture(t, 4, 10)
	code, _, stderr = runCmd(context.Background(), "-data", data, "-out", out, "-epochs", "1", "-batch", "8", "-progress", "none")
	if code != exitError || !strings.Contains(stderr, "holds 4 records, the official release 10000") || !strings.Contains(stderr, "-allow-subset") {
		t.Errorf("files of 4 records: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was created for a run that never started (%v)", out, err)
	}
}
