package cifar10

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proxgen/proxgen/internal/dirs"
)

// Official location and checksum of the binary release.
const (
	URL         = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
	MD5         = "c32a1d4ab5d03f1284b67883e8d87530"
	ArchiveName = "cifar-10-binary.tar.gz"
)

// DefaultCacheDir returns the folder Download uses when given none:
// os.UserCacheDir()/proxgen/cifar10.
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cifar10: no cache folder: %w", err)
	}
	return filepath.Join(base, "proxgen", "cifar10"), nil
}

// DownloadOptions configures DownloadWith. The zero value downloads the
// official release into DefaultCacheDir without progress output.
type DownloadOptions struct {
	// CacheDir is the folder that receives the archive and the extracted
	// cifar-10-batches-bin folder; empty means DefaultCacheDir().
	CacheDir string
	// URL of the archive; empty means the official URL.
	URL string
	// MD5 is the expected hex MD5 of the archive; empty means the official
	// checksum. Tests inject the checksum of their own small archive.
	MD5 string
	// Progress, when not nil, receives a progress bar (carriage-return
	// updated lines, a newline at the end).
	Progress io.Writer
	// Client performs the requests; nil means a client without overall
	// timeout (cancel through the context instead).
	Client *http.Client
	// Attempts is how many times an interrupted transfer is resumed
	// before giving up; zero means 5.
	Attempts int
	// KeepArchive keeps the verified archive in CacheDir after extraction;
	// by default it is removed once the data are in place.
	KeepArchive bool
}

// Download makes sure CIFAR-10 is present in cacheDir (DefaultCacheDir when
// empty), downloading and extracting the official binary release if needed,
// and returns the cifar-10-batches-bin folder, ready for Load. See
// DownloadWith.
func Download(ctx context.Context, cacheDir string, progress io.Writer) (string, error) {
	return DownloadWith(ctx, DownloadOptions{CacheDir: cacheDir, Progress: progress})
}

// DownloadWith makes sure the data set is present in opt.CacheDir and
// returns its cifar-10-batches-bin folder.
//
// When that folder already holds all six files nothing is fetched. Otherwise
// the archive is downloaded to a ".part" file next to its final name; an
// interrupted transfer (also one interrupted in an earlier run) is resumed
// with an HTTP Range request, or restarted from scratch when the server does
// not honour ranges. The complete archive's MD5 must equal opt.MD5; a
// mismatch deletes the partial file and reports both sums. The archive is
// then extracted into a temporary folder, rejecting entries that would
// escape it, and renamed into place, so a crash never leaves a half-written
// data folder behind.
//
// A failed download leaves no folder that it created empty behind (a
// partial archive, which the next call resumes, stays).
func DownloadWith(ctx context.Context, opt DownloadOptions) (_ string, err error) {
	if opt.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return "", err
		}
		opt.CacheDir = d
	}
	if opt.URL == "" {
		opt.URL = URL
	}
	if opt.MD5 == "" {
		opt.MD5 = MD5
	}
	opt.MD5 = strings.ToLower(opt.MD5)
	if opt.Client == nil {
		opt.Client = &http.Client{}
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 5
	}
	final := filepath.Join(opt.CacheDir, FolderName)
	if complete(final) {
		return final, nil
	}
	created, err := dirs.MkdirAll(opt.CacheDir)
	if err != nil {
		return "", fmt.Errorf("cifar10: creating cache folder: %w", err)
	}
	defer func() {
		if err != nil {
			dirs.RemoveEmpty(opt.CacheDir, created)
		}
	}()
	archive := filepath.Join(opt.CacheDir, ArchiveName)
	if sum, err := fileMD5(archive); err == nil && sum == opt.MD5 {
		// A verified archive from an earlier run: just extract it.
	} else {
		if err := fetch(ctx, opt, archive); err != nil {
			return "", err
		}
	}
	if err := extract(archive, opt.CacheDir); err != nil {
		return "", err
	}
	if !complete(final) {
		return "", fmt.Errorf("cifar10: archive %s did not contain %s with all six data files", opt.URL, FolderName)
	}
	if !opt.KeepArchive {
		os.Remove(archive)
	}
	return final, nil
}

// ErrNoFolder is the error of Open for a data folder that does not exist
// when no download into it was asked for.
var ErrNoFolder = errors.New("does not exist")

// OpenOptions configures Open.
type OpenOptions struct {
	// Dir is the data folder: the cifar-10-batches-bin folder or one
	// holding it. Empty means DefaultCacheDir, where missing data are
	// downloaded unless NoDownload is set.
	Dir string
	// Download allows downloading into a Dir that does not exist yet.
	// Without it, a Dir that does not exist is an error (a mistyped path
	// is reported, no folder is created and nothing is fetched); a Dir
	// that exists but holds none of the data files is downloaded into
	// unless NoDownload is set.
	Download bool
	// NoDownload never downloads: missing data are an error.
	NoDownload bool
	// LoadOptions apply to reading the files (AllowSubset).
	LoadOptions
	// Fetch configures a download (URL, checksum, progress, client); its
	// CacheDir is ignored in favour of the data folder.
	Fetch DownloadOptions
}

// Open finds, downloads when allowed and needed, and loads the data set
// as opt says. A folder holding some but not all data files is an error
// (broken data, not missing data), as is a data folder named explicitly
// that does not exist unless opt.Download is set. A message goes to
// opt.Fetch.Progress before a download.
func Open(ctx context.Context, opt OpenOptions) (*Dataset, error) {
	dir := opt.Dir
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && !opt.Download {
		return nil, fmt.Errorf("cifar10: data folder %s %w (a mistyped path?)", dir, ErrNoFolder)
	}
	if _, err := ResolveDir(dir); err != nil {
		if opt.NoDownload || partial(dir) {
			return nil, err
		}
		if opt.Fetch.Progress != nil {
			url := opt.Fetch.URL
			if url == "" {
				url = URL
			}
			fmt.Fprintf(opt.Fetch.Progress, "CIFAR-10 not found in %s; downloading %s\n", dir, url)
		}
		fetch := opt.Fetch
		fetch.CacheDir = dir
		if _, err := DownloadWith(ctx, fetch); err != nil {
			return nil, fmt.Errorf("downloading CIFAR-10: %w", err)
		}
	}
	return LoadWith(dir, opt.LoadOptions)
}

// partial reports whether dir holds some of the data set's files, so that
// a failed ResolveDir means broken data rather than missing data (which
// would be downloaded).
func partial(dir string) bool {
	for _, d := range []string{dir, filepath.Join(dir, FolderName)} {
		for _, f := range append([]string{TestFile}, trainFiles[:]...) {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				return true
			}
		}
	}
	return false
}

// complete reports whether dir holds every data file of the release.
func complete(dir string) bool {
	for _, name := range append(TrainFiles(), TestFile) {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 || fi.Size()%RecordSize != 0 {
			return false
		}
	}
	return true
}

// fileMD5 returns the hex MD5 of the file at p.
func fileMD5(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fetch downloads opt.URL into archive (via archive+".part"), resuming
// after interruptions, and verifies its MD5.
func fetch(ctx context.Context, opt DownloadOptions, archive string) error {
	part := archive + ".part"
	bar := &progressBar{w: opt.Progress, name: ArchiveName}
	for attempt := 1; ; attempt++ {
		err := fetchOnce(ctx, opt, part, bar)
		if err == nil {
			break
		}
		var perm *permanentError
		if errors.As(err, &perm) || ctx.Err() != nil {
			bar.finish()
			return err
		}
		if attempt >= opt.Attempts {
			bar.finish()
			if _, serr := os.Stat(part); serr == nil {
				return fmt.Errorf("%w (gave up after %d attempts; the next call resumes from %s)", err, attempt, part)
			}
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		// Brief back-off before resuming; cut short by cancellation.
		select {
		case <-ctx.Done():
			bar.finish()
			return fmt.Errorf("cifar10: download %s: %w", opt.URL, ctx.Err())
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	bar.finish()
	sum, err := fileMD5(part)
	if err != nil {
		return fmt.Errorf("cifar10: checking download: %w", err)
	}
	if sum != opt.MD5 {
		os.Remove(part)
		return fmt.Errorf("cifar10: downloaded %s has MD5 %s, want %s (file deleted; try again)", opt.URL, sum, opt.MD5)
	}
	if err := os.Rename(part, archive); err != nil {
		return fmt.Errorf("cifar10: %w", err)
	}
	return nil
}

// permanentError marks a download failure that retrying will not fix.
type permanentError struct{ err error }

// Error returns the wrapped error's message.
func (e *permanentError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *permanentError) Unwrap() error { return e.err }

// fetchOnce makes one request for the rest of the file, appending to part.
// A nil error means the server says the file is complete.
func fetchOnce(ctx context.Context, opt DownloadOptions, part string, bar *progressBar) error {
	var have int64
	if fi, err := os.Stat(part); err == nil {
		have = fi.Size()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, opt.URL, nil)
	if err != nil {
		return &permanentError{fmt.Errorf("cifar10: download %s: %w", opt.URL, err)}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := opt.Client.Do(req)
	if err != nil {
		return fmt.Errorf("cifar10: download %s failed (offline? you can also place %s in %s by hand): %w",
			opt.URL, FolderName, opt.CacheDir, err)
	}
	defer resp.Body.Close()
	var flags int
	switch resp.StatusCode {
	case http.StatusOK:
		// Server sends the whole file: start over.
		have = 0
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		bar.setTotal(resp.ContentLength)
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			// Cannot append safely: start over on the next attempt.
			os.Remove(part)
			return fmt.Errorf("cifar10: download %s: asked for bytes from %d, server sent Content-Range %q",
				opt.URL, have, resp.Header.Get("Content-Range"))
		}
		flags = os.O_WRONLY | os.O_APPEND
		bar.setTotal(total)
	case http.StatusRequestedRangeNotSatisfiable:
		// The partial file is already complete (or longer than the file);
		// the MD5 check decides.
		if _, total, ok := parseContentRange(resp.Header.Get("Content-Range")); ok {
			bar.setTotal(total)
		}
		bar.update(have)
		return nil
	default:
		err := fmt.Errorf("cifar10: download %s: server answered %s", opt.URL, resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return err
		}
		return &permanentError{err}
	}
	f, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return &permanentError{fmt.Errorf("cifar10: %w", err)}
	}
	bar.update(have)
	_, copyErr := io.Copy(f, &countingReader{r: resp.Body, onRead: func(k int64) { have += k; bar.update(have) }})
	if err := f.Close(); err != nil && copyErr == nil {
		copyErr = err
	}
	if copyErr != nil {
		return fmt.Errorf("cifar10: download %s interrupted after %d bytes: %w", opt.URL, have, copyErr)
	}
	return nil
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*", giving
// -1) or "bytes */TOTAL" (START is then -1).
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total = t
	}
	if rng == "*" {
		return -1, total, true
	}
	a, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	st, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return st, total, true
}

// countingReader reports the number of bytes read through it.
type countingReader struct {
	r      io.Reader
	onRead func(int64)
}

// Read reads from the underlying reader and reports the count.
func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.onRead(int64(n))
	}
	return n, err
}

// progressBar draws "name [=====>    ]  45.0%  74/163 MB  12.3 MB/s".
type progressBar struct {
	w       io.Writer
	name    string
	total   int64
	cur     int64
	start   time.Time
	startAt int64
	last    time.Time
	drawn   bool
}

func (p *progressBar) setTotal(t int64) {
	if t > 0 {
		p.total = t
	}
}

func (p *progressBar) update(cur int64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if p.start.IsZero() || cur < p.startAt {
		p.start, p.startAt = now, cur // first update, or restarted from scratch
	}
	p.cur = cur
	if p.drawn && now.Sub(p.last) < 100*time.Millisecond && (p.total <= 0 || cur < p.total) {
		return
	}
	p.last, p.drawn = now, true
	p.draw(now)
}

func (p *progressBar) draw(now time.Time) {
	const width = 30
	const mb = 1 << 20
	speed := ""
	if dt := now.Sub(p.start).Seconds(); dt > 0.05 {
		speed = fmt.Sprintf("  %.1f MB/s", float64(p.cur-p.startAt)/mb/dt)
	}
	if p.total > 0 {
		frac := min(float64(p.cur)/float64(p.total), 1)
		fill := int(frac * width)
		bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		if fill < width {
			bar = strings.Repeat("=", fill) + ">" + strings.Repeat(" ", width-fill-1)
		}
		fmt.Fprintf(p.w, "\r%s [%s] %5.1f%%  %.1f/%.1f MB%s", p.name, bar, 100*frac,
			float64(p.cur)/mb, float64(p.total)/mb, speed)
	} else {
		fmt.Fprintf(p.w, "\r%s  %.1f MB%s", p.name, float64(p.cur)/mb, speed)
	}
}

func (p *progressBar) finish() {
	if p.w == nil || !p.drawn {
		return
	}
	p.draw(time.Now())
	fmt.Fprintln(p.w)
	p.drawn = false
}

// extract unpacks the gzip-compressed tar archive into a temporary folder
// inside dir and moves its cifar-10-batches-bin folder to dir. Only regular
// files and folders are written; absolute names, names with "..", and links
// are rejected.
func extract(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("cifar10: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("cifar10: %s is not gzip data: %w", archive, err)
	}
	defer gz.Close()
	tmp, err := os.MkdirTemp(dir, ".extract-")
	if err != nil {
		return fmt.Errorf("cifar10: %w", err)
	}
	defer os.RemoveAll(tmp)
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("cifar10: reading %s: %w", archive, err)
		}
		name, err := safeName(hdr.Name)
		if err != nil {
			return fmt.Errorf("cifar10: %s: %w", archive, err)
		}
		if name == "" {
			continue
		}
		target := filepath.Join(tmp, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("cifar10: %w", err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("cifar10: %w", err)
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("cifar10: %s: entry %q: %w", archive, hdr.Name, err)
			}
			_, cerr := io.Copy(out, tr)
			if err := out.Close(); err != nil && cerr == nil {
				cerr = err
			}
			if cerr != nil {
				return fmt.Errorf("cifar10: extracting %q from %s: %w", hdr.Name, archive, cerr)
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			// Metadata only.
		default:
			return fmt.Errorf("cifar10: %s: entry %q has unsupported type %q (only files and folders are extracted)",
				archive, hdr.Name, hdr.Typeflag)
		}
	}
	src := filepath.Join(tmp, FolderName)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return fmt.Errorf("cifar10: archive %s has no %s folder", archive, FolderName)
	}
	dst := filepath.Join(dir, FolderName)
	// A stale, incomplete folder from an interrupted manual copy would make
	// the rename fail; move it aside first.
	if _, err := os.Lstat(dst); err == nil {
		old := dst + ".old-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.Rename(dst, old); err != nil {
			return fmt.Errorf("cifar10: %w", err)
		}
		defer os.RemoveAll(old)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cifar10: %w", err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("cifar10: %w", err)
	}
	return nil
}

// safeName cleans a tar entry name and rejects names that would leave the
// extraction folder. It returns "" for the root entry.
func safeName(name string) (string, error) {
	n := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(n, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return "", fmt.Errorf("entry %q has an absolute path", name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("entry %q leaves the extraction folder", name)
		}
	}
	n = path.Clean(n)
	if n == "." {
		return "", nil
	}
	return n, nil
}
