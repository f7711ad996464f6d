// Package atomicfile replaces files so that a crash at any moment leaves
// either the old content or the complete new content, never a mix.
//
// Write creates a temporary file in the destination's folder, writes and
// syncs it, optionally keeps the previous generation under a second name
// (a hard link, or a copy where the file system has none), renames the
// temporary file over the destination and syncs the folder. Every file
// that this engine writes for later reading (model files, checkpoints,
// metrics, summaries) goes through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// Options adjusts one Write. The zero value writes the data plainly.
type Options struct {
	// Keep, when not empty, names a file that receives the previous
	// content of the destination (if there was one) before the rename,
	// replacing Keep atomically; it then holds the previous generation.
	Keep string
	// Fill, when not nil, writes the data to the temporary file in place
	// of a plain Write; fault-injection tests use it to fail or stop
	// part-way.
	Fill func(w io.Writer, data []byte) error
	// Event, when not nil, runs after each durable step: the temporary
	// file written and synced, the previous generation kept (with Keep),
	// and the rename (before the folder is synced). A non-nil error
	// aborts the write before the next step.
	Event func() error
}

// TempPattern is the os.CreateTemp pattern of the temporary files
// written for a destination called name; RemoveStale removes those an
// interrupted write left behind.
func TempPattern(name string) string { return "." + name + ".tmp-*" }

// Write replaces the file at path with data, atomically. A new file gets
// mode 0644; an existing one keeps its mode. On failure the temporary
// file is removed and path is untouched; the error names path.
func Write(path string, data []byte, opt Options) error {
	return WriteFunc(path, func(w io.Writer) error {
		if opt.Fill != nil {
			return opt.Fill(w, data)
		}
		_, err := w.Write(data)
		return err
	}, opt)
}

// WriteFunc is Write with the content streamed by fill into the
// temporary file (opt.Fill is not used).
func WriteFunc(path string, fill func(w io.Writer) error, opt Options) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	mode := os.FileMode(0o644)
	if st, err := os.Lstat(path); err == nil {
		if !st.Mode().IsRegular() {
			return errors.New("it exists and is not a regular file")
		}
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, TempPattern(base))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	event := func() error {
		if opt.Event == nil {
			return nil
		}
		return opt.Event()
	}
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := event(); err != nil {
		return err
	}
	if opt.Keep != "" {
		if err := linkReplace(path, opt.Keep); err != nil {
			return err
		}
		if err := event(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if err := event(); err != nil {
		return err
	}
	return syncDir(dir)
}

// RemoveStale removes the temporary files that interrupted writes of the
// files names in dir left behind.
func RemoveStale(dir string, names []string) error {
	for _, n := range names {
		matches, err := filepath.Glob(filepath.Join(dir, TempPattern(n)))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing the stale temporary file %s: %w", m, err)
			}
		}
	}
	return nil
}

// linkReplace makes keep a second name of the file at path (if there is
// one), replacing keep atomically.
func linkReplace(path, keep string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dir, base := filepath.Split(keep)
	if dir == "" {
		dir = "."
	}
	tmp := filepath.Join(dir, "."+base+".tmp-link")
	os.Remove(tmp)
	if err := os.Link(path, tmp); err != nil {
		// A file system without hard links: copy.
		if err := copyFile(path, tmp); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("keeping the previous generation as %s: %w", keep, err)
		}
	}
	err := os.Rename(tmp, keep)
	// When keep already was a name of the same file, rename does nothing
	// and leaves tmp behind.
	os.Remove(tmp)
	if err != nil {
		return fmt.Errorf("keeping the previous generation as %s: %w", keep, err)
	}
	return nil
}

// syncDir flushes the directory entry changes of dir to disk.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" { // a directory handle cannot be synced
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	return errors.Join(serr, d.Close())
}

// copyFile copies the file src to the new file dst and syncs it.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	return errors.Join(werr, serr, f.Close())
}
