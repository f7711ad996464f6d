package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/internal/dirs"
)

// LockName is the lock file of a run folder (see LockDir).
const LockName = "run.lock"

// staleUnreadable is how old a lock file without a readable owner must be
// before an exclusive-create lock treats it as stale: its owner died
// between creating and writing it.
const staleUnreadable = 10 * time.Second

// LockedError reports that another process holds a run folder's lock.
type LockedError struct {
	Dir    string
	Holder string // "pid 1234 on host h since 2026-11-27T00:10:00Z", or what the lock file says
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is in use by another run (%s holds %s); wait for it to finish or choose another folder",
		e.Dir, e.Holder, filepath.Join(e.Dir, LockName))
}

// Lock is a held run-folder lock; Release gives it back.
type Lock struct {
	path    string
	f       *os.File // the locked file (flock), or nil (exclusive create)
	created string   // the outermost folder LockDir created, or ""
}

// LockDir takes the lock of the run folder dir, creating the folder when
// it does not exist, so that two programs never run in one folder at
// once. A second process gets a *LockedError naming the holder (its pid,
// host and start time).
//
// Where the system has flock(2) the lock is an advisory lock on
// dir/run.lock, which the kernel releases when its process ends however it
// ends; the file names the holder for the error message. Elsewhere, or
// when the file system refuses flock, the lock is the exclusive creation
// of dir/run.lock holding the owner's pid and host: a lock file left by a
// process of this host that no longer runs is stale and taken over, one of
// another host must be removed by hand (the error says which).
func LockDir(dir string) (*Lock, error) { return lockDir(dir, true) }

// lockDir is LockDir, with flock tried only when useFlock is set.
func lockDir(dir string, useFlock bool) (*Lock, error) {
	created, err := dirs.MkdirAll(dir)
	if err != nil {
		return nil, fmt.Errorf("creating the run folder: %w", err)
	}
	l, err := lockIn(dir, useFlock)
	if err != nil {
		dirs.RemoveEmpty(dir, created)
		return nil, err
	}
	l.created = created
	return l, nil
}

func lockIn(dir string, useFlock bool) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	if useFlock {
		for range 10 {
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return nil, fmt.Errorf("locking %s: %w", dir, err)
			}
			switch err := flock(f); {
			case errors.Is(err, errNoFlock):
				f.Close()
				return lockExclusive(dir, path)
			case errors.Is(err, errLocked):
				f.Close()
				return nil, &LockedError{Dir: dir, Holder: holder(path)}
			case err != nil:
				f.Close()
				return nil, fmt.Errorf("locking %s: %w", path, err)
			}
			// The holder before us may have removed the file between our
			// open and our lock: then we locked a name that is gone.
			if same, err := sameFile(f, path); err != nil || !same {
				f.Close()
				continue
			}
			if err := writeOwner(f); err != nil {
				f.Close()
				return nil, fmt.Errorf("locking %s: %w", path, err)
			}
			return &Lock{path: path, f: f}, nil
		}
		return nil, fmt.Errorf("locking %s: the lock file keeps being replaced", path)
	}
	return lockExclusive(dir, path)
}

// lockExclusive takes the lock by creating path exclusively, taking over
// a stale lock file once. The owner is written to a temporary file first
// and hard-linked to path, so that the lock file appears complete; where
// hard links fail, path is created with O_EXCL and then written.
func lockExclusive(dir, path string) (*Lock, error) {
	for attempt := 0; ; attempt++ {
		err := createLinked(dir, path)
		if err == nil {
			return &Lock{path: path}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("locking %s: %w", dir, err)
		}
		if attempt > 0 || !stale(path) {
			return nil, &LockedError{Dir: dir, Holder: holder(path)}
		}
		// A stale lock: remove it and try once more; two processes that
		// both found it stale race on the exclusive create.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the stale lock %s: %w", path, err)
		}
	}
}

// createLinked creates path holding this process as the owner, failing
// with an error wrapping os.ErrExist when it exists.
func createLinked(dir, path string) error {
	tmp, err := os.CreateTemp(dir, "."+LockName+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	werr := writeOwner(tmp)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return err
	}
	err = os.Link(tmp.Name(), path)
	if err == nil || errors.Is(err, os.ErrExist) {
		return err
	}
	// No hard links here: create exclusively, then write.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := errors.Join(writeOwner(f), f.Close()); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// owner is what a lock file holds.
type owner struct {
	pid   int
	host  string
	since string
}

func (o owner) String() string {
	return fmt.Sprintf("pid %d on host %s since %s", o.pid, o.host, o.since)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// writeOwner writes this process as the owner into f.
func writeOwner(f *os.File) error {
	line := fmt.Sprintf("pid %d\nhost %s\nsince %s\n", os.Getpid(), hostname(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(line), 0); err != nil {
		return err
	}
	return f.Sync()
}

// readOwner parses a lock file; ok is false when it names no owner.
func readOwner(path string) (o owner, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return o, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			o.pid, _ = strconv.Atoi(v)
		case "host":
			o.host = v
		case "since":
			o.since = v
		}
	}
	return o, o.pid > 0 && o.host != ""
}

// holder describes the owner named in the lock file at path.
// A flock holder writes its name just after locking: an empty file is
// read again for a moment.
func holder(path string) string {
	for range 20 {
		if o, ok := readOwner(path); ok {
			return o.String()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "a process that has not written its name"
}

// stale reports whether the lock file at path belongs to no running
// process: its owner is a process of this host that has ended, or it
// names no owner and is older than staleUnreadable.
func stale(path string) bool {
	o, ok := readOwner(path)
	if !ok {
		st, err := os.Stat(path)
		return err == nil && time.Since(st.ModTime()) > staleUnreadable
	}
	return o.host == hostname() && o.pid != os.Getpid() && !processAlive(o.pid)
}

// sameFile reports whether f is still the file named path.
func sameFile(f *os.File, path string) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if err != nil {
		return false, nil
	}
	return os.SameFile(a, b), nil
}

// Release gives the lock back: it removes the lock file (while still
// holding it, so no other process can lock the old file afterwards) and,
// when LockDir created the run folder and it stayed empty, the folder.
func (l *Lock) Release() error {
	if l == nil || l.path == "" {
		return nil
	}
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if l.f != nil {
		err = errors.Join(err, l.f.Close())
	}
	dirs.RemoveEmpty(filepath.Dir(l.path), l.created)
	l.path, l.f = "", nil
	return err
}

// errLocked and errNoFlock are flock's outcomes besides success: another
// process holds the lock; this system or file system has no flock.
var (
	errLocked  = errors.New("locked")
	errNoFlock = errors.New("no flock")
)

// LockDirExclusive is LockDir without flock: the exclusive creation of
// dir/run.lock with stale-lock detection, as on systems without flock.
// It is for file systems where flock is not shared between the machines
// that use the folder (some network file systems) and for tests.
func LockDirExclusive(dir string) (*Lock, error) { return lockDir(dir, false) }
