// Package dirs creates folders so that they can be removed again when the
// work that needed them fails: a failed download or a refused run leaves
// no empty folder behind.
package dirs

import (
	"os"
	"path/filepath"
)

// MkdirAll is os.MkdirAll (mode 0o755) that also returns the outermost
// folder it created ("" when dir existed), for RemoveEmpty.
func MkdirAll(dir string) (created string, err error) {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		created = d
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return created, os.MkdirAll(dir, 0o755)
}

// RemoveEmpty removes dir and its parents up to and including created
// while they are empty; created == "" (MkdirAll created nothing) removes
// nothing.
func RemoveEmpty(dir, created string) {
	if created == "" {
		return
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if os.Remove(d) != nil || d == created {
			return
		}
	}
}
