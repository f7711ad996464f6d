package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// FaultEnv is the environment variable that injects faults into the file
// writes of a Loop, for fault-injection tests of programs built on this
// package. It is read once by Loop.Run; unset (the normal case) it does
// nothing. Values:
//
//	crash:N  kill the process (SIGKILL on Unix) at the N-th write event
//	         of the run, counted from 1. Every file write has the events
//	         "half the data written to the temporary file", "temporary file
//	         complete and synced" and "renamed into place, directory not yet
//	         synced"; a checkpoint write also has "previous generation
//	         linked" before its rename.
//	full:N   fail every write once N bytes in all have been written by the
//	         run, as a full disk does.
const FaultEnv = "PROXGEN_TRAIN_FAULT"

// errDiskFull is the error of an injected full disk.
var errDiskFull = errors.New("no space left on device (injected by " + FaultEnv + ")")

// faults is the fault injection of one run, parsed from FaultEnv.
type faults struct {
	crashAt int   // event number to die at; 0: never
	events  int   // events so far
	budget  int64 // bytes left before writes fail; <0: unlimited
}

func parseFaults(s string) (*faults, error) {
	f := &faults{budget: -1}
	if s == "" {
		return f, nil
	}
	kind, n, ok := strings.Cut(s, ":")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 0 {
		return nil, fmt.Errorf("%s=%q: want crash:N or full:N", FaultEnv, s)
	}
	switch kind {
	case "crash":
		f.crashAt = int(v)
	case "full":
		f.budget = v
	default:
		return nil, fmt.Errorf("%s=%q: want crash:N or full:N", FaultEnv, s)
	}
	return f, nil
}

// event counts a write event and kills the process at the chosen one.
func (f *faults) event() {
	f.events++
	if f.crashAt > 0 && f.events == f.crashAt {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
		select {} // wait for the signal to land
	}
}

// write writes b to fh, failing as a full disk would when the budget is
// spent, with an event after the first half.
func (f *faults) write(fh *os.File, b []byte) error {
	half := len(b) / 2
	for i, part := range [][]byte{b[:half], b[half:]} {
		if f.budget >= 0 {
			if int64(len(part)) > f.budget {
				n, _ := fh.Write(part[:f.budget])
				f.budget -= int64(n)
				return errDiskFull
			}
			f.budget -= int64(len(part))
		}
		if _, err := fh.Write(part); err != nil {
			return err
		}
		if i == 0 {
			f.event()
		}
	}
	return nil
}

// tmpPattern is the pattern of the temporary files written for name.
func tmpPattern(name string) string { return "." + name + ".tmp-*" }

// removeStale removes the temporary files that an interrupted write of
// one of names in dir left behind.
func removeStale(dir string, names []string) error {
	for _, n := range names {
		matches, err := filepath.Glob(filepath.Join(dir, tmpPattern(n)))
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

// writeAtomic replaces path by data so that path holds either its old
// content or the new one: temporary file in the same folder, fsync,
// rename, fsync of the folder. When keep is not empty, the old file is
// first hard-linked to keep (replacing it atomically), so keep holds the
// previous generation. On failure the temporary file is removed.
func (f *faults) writeAtomic(path string, data []byte, keep string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("writing %s: it exists and is not a regular file", path)
	}
	tmp, err := os.CreateTemp(dir, tmpPattern(base))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if err := f.write(tmp, data); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	f.event()
	if keep != "" {
		if err := linkReplace(path, keep); err != nil {
			return err
		}
		f.event()
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	f.event()
	return syncDir(dir)
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
