package cifar10

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tarEntry is one entry of a test tarball.
type tarEntry struct {
	name     string
	typeflag byte
	body     []byte
	linkname string
}

// makeTarball returns a gzip-compressed tarball of entries.
func makeTarball(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.linkname}
		if e.typeflag == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fixtureTarball is a small archive laid out like the official one.
func fixtureTarball(t *testing.T) []byte {
	entries := []tarEntry{{name: FolderName + "/", typeflag: tar.TypeDir}}
	for f, name := range append(TrainFiles(), TestFile) {
		entries = append(entries, tarEntry{name: FolderName + "/" + name, typeflag: tar.TypeReg, body: fixtureFile(f, fixtureRecords[name])})
	}
	entries = append(entries, tarEntry{name: FolderName + "/batches.meta.txt", typeflag: tar.TypeReg, body: []byte(strings.Join(ClassNames(), "\n"))})
	return makeTarball(t, entries)
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// archiveServer serves body with Range support and records the requests.
type archiveServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	ranges   []string
	sent     int64
}

func newArchiveServer(t *testing.T, body []byte, handler func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool) *archiveServer {
	s := &archiveServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.mu.Unlock()
		if handler != nil && handler(s, w, r) {
			return
		}
		cw := &countingWriter{ResponseWriter: w, s: s}
		http.ServeContent(cw, r, ArchiveName, time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(s.Close)
	return s
}

type countingWriter struct {
	http.ResponseWriter
	s *archiveServer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.s.mu.Lock()
	c.s.sent += int64(len(p))
	c.s.mu.Unlock()
	return c.ResponseWriter.Write(p)
}

func checkDownloaded(t *testing.T, dir, cache string) {
	t.Helper()
	if dir != filepath.Join(cache, FolderName) {
		t.Fatalf("Download returned %s, want %s", dir, filepath.Join(cache, FolderName))
	}
	ds, err := LoadWith(dir, LoadOptions{AllowSubset: true})
	if err != nil {
		t.Fatalf("Load after download: %v", err)
	}
	if ds.Train.Len() != 13 || ds.Test.Len() != 5 {
		t.Fatalf("downloaded data has %d/%d images", ds.Train.Len(), ds.Test.Len())
	}
	leftovers, _ := filepath.Glob(filepath.Join(cache, "*"))
	hidden, _ := filepath.Glob(filepath.Join(cache, ".*"))
	if len(leftovers) != 1 || len(hidden) != 0 {
		t.Fatalf("cache holds %v %v, want only %s", leftovers, hidden, FolderName)
	}
}

func TestDownload(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, nil)
	cache := filepath.Join(t.TempDir(), "cache")
	var progress bytes.Buffer
	opt := DownloadOptions{CacheDir: cache, URL: srv.URL + "/c.tar.gz", MD5: md5hex(body), Progress: &progress}
	dir, err := DownloadWith(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
	if srv.requests != 1 || srv.ranges[0] != "" {
		t.Fatalf("%d requests with ranges %q, want one plain request", srv.requests, srv.ranges)
	}
	out := progress.String()
	if !strings.Contains(out, "100.0%") || !strings.Contains(out, ArchiveName) || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress output %q lacks the final state", out)
	}
	// A second call finds the data and stays offline.
	dir2, err := DownloadWith(context.Background(), opt)
	if err != nil || dir2 != dir {
		t.Fatalf("second call: %s, %v", dir2, err)
	}
	if srv.requests != 1 {
		t.Fatalf("second call made a request")
	}
}

func TestDownloadResumesPartialFile(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, nil)
	cache := t.TempDir()
	half := int64(len(body) / 2)
	if err := os.WriteFile(filepath.Join(cache, ArchiveName+".part"), body[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
	if want := fmt.Sprintf("bytes=%d-", half); srv.requests != 1 || srv.ranges[0] != want {
		t.Fatalf("requests %d with ranges %q, want one with %q", srv.requests, srv.ranges, want)
	}
	if srv.sent != int64(len(body))-half {
		t.Fatalf("server sent %d bytes, want the missing %d", srv.sent, int64(len(body))-half)
	}
}

func TestDownloadRecoversFromDroppedConnection(t *testing.T) {
	body := fixtureTarball(t)
	cut := len(body) / 3
	srv := newArchiveServer(t, body, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		if s.requests > 1 {
			return false
		}
		// First request: promise the whole file, send a third, hang up.
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return true
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nAccept-Ranges: bytes\r\n\r\n", len(body))
		buf.Write(body[:cut])
		buf.Flush()
		return true
	})
	cache := t.TempDir()
	dir, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
	if want := fmt.Sprintf("bytes=%d-", cut); srv.requests != 2 || srv.ranges[1] != want {
		t.Fatalf("requests %d with ranges %q, want a resume with %q", srv.requests, srv.ranges, want)
	}
}

func TestDownloadRestartsWhenRangeIgnored(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body) // 200 with the whole file, whatever the Range
		return true
	})
	cache := t.TempDir()
	// A stale partial file of garbage must not end up in the result.
	if err := os.WriteFile(filepath.Join(cache, ArchiveName+".part"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
}

func TestDownloadCompletePartialFile(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, nil)
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, ArchiveName+".part"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
	// The server answers 416 with a short error text, not the archive.
	if want := fmt.Sprintf("bytes=%d-", len(body)); srv.requests != 1 || srv.ranges[0] != want || srv.sent >= 100 {
		t.Fatalf("%d requests with ranges %q sent %d bytes, want one 416 answer to %q", srv.requests, srv.ranges, srv.sent, want)
	}
}

func TestDownloadMD5Mismatch(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, nil)
	cache := t.TempDir()
	_, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL})
	if err == nil {
		t.Fatal("download with the official MD5 of a fake archive succeeded")
	}
	for _, want := range []string{"MD5 " + md5hex(body), "want " + MD5} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(cache, "*")); len(files) != 0 {
		t.Fatalf("cache holds %v after a bad download", files)
	}
}

func TestDownloadOffline(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	_, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: t.TempDir(), URL: url, Attempts: 2})
	if err == nil || !strings.Contains(err.Error(), "offline?") || !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("offline download: error %v", err)
	}
}

func TestDownloadHTTPError(t *testing.T) {
	srv := newArchiveServer(t, nil, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		http.NotFound(w, r)
		return true
	})
	_, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: t.TempDir(), URL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %v, want a 404", err)
	}
	if srv.requests != 1 {
		t.Fatalf("%d requests, want 1 (404 is not retried)", srv.requests)
	}
}

func TestDownloadCancelled(t *testing.T) {
	body := fixtureTarball(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv := newArchiveServer(t, body, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:10])
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done()
		return true
	})
	cache := t.TempDir()
	_, err := DownloadWith(ctx, DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if srv.requests != 1 {
		t.Fatalf("%d requests after cancellation", srv.requests)
	}
}

func TestExtractRejectsUnsafeEntries(t *testing.T) {
	good := tarEntry{name: FolderName + "/test_batch.bin", typeflag: tar.TypeReg, body: fixtureFile(5, 1)}
	tests := []struct {
		entry tarEntry
		want  string
	}{
		{tarEntry{name: "../evil.txt", typeflag: tar.TypeReg, body: []byte("x")}, "leaves the extraction folder"},
		{tarEntry{name: FolderName + "/../../evil.txt", typeflag: tar.TypeReg, body: []byte("x")}, "leaves the extraction folder"},
		{tarEntry{name: "/tmp/evil.txt", typeflag: tar.TypeReg, body: []byte("x")}, "absolute path"},
		{tarEntry{name: FolderName + "/link", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"}, "unsupported type"},
		{tarEntry{name: FolderName + "/hard", typeflag: tar.TypeLink, linkname: "../../x"}, "unsupported type"},
	}
	for _, tc := range tests {
		root := t.TempDir()
		cache := filepath.Join(root, "a", "b")
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		archive := filepath.Join(cache, ArchiveName)
		if err := os.WriteFile(archive, makeTarball(t, []tarEntry{good, tc.entry}), 0o644); err != nil {
			t.Fatal(err)
		}
		err := extract(archive, cache)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.entry.name) {
			t.Errorf("entry %q: error %v, want %q", tc.entry.name, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(root, "evil.txt")); err == nil {
			t.Errorf("entry %q escaped the cache folder", tc.entry.name)
		}
		if _, err := os.Stat(filepath.Join(cache, FolderName)); err == nil {
			t.Errorf("entry %q: a partial data folder was left in place", tc.entry.name)
		}
		if hidden, _ := filepath.Glob(filepath.Join(cache, ".extract-*")); len(hidden) != 0 {
			t.Errorf("temporary folders left: %v", hidden)
		}
	}
}

func TestDownloadArchiveWithoutData(t *testing.T) {
	body := makeTarball(t, []tarEntry{{name: "readme.txt", typeflag: tar.TypeReg, body: []byte("hi")}})
	srv := newArchiveServer(t, body, nil)
	_, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: t.TempDir(), URL: srv.URL, MD5: md5hex(body)})
	if err == nil || !strings.Contains(err.Error(), "has no "+FolderName) {
		t.Fatalf("error %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-9/*", 0, -1, true},
		{"bytes */500", -1, 500, true},
		{"bits 0-9/10", 0, 0, false},
		{"bytes 0-9", 0, 0, false},
		{"bytes x-9/10", 0, 0, false},
	}
	for _, tc := range tests {
		s, tot, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (s != tc.start || tot != tc.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", tc.in, s, tot, ok)
		}
	}
}

func TestDownloadBadContentRangeRestarts(t *testing.T) {
	body := fixtureTarball(t)
	srv := newArchiveServer(t, body, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		if s.requests > 1 {
			return false
		}
		// Answer the resume request with the wrong range.
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-9/%d", len(body)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body[:10])
		return true
	})
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, ArchiveName+".part"), body[:50], 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := DownloadWith(context.Background(), DownloadOptions{CacheDir: cache, URL: srv.URL, MD5: md5hex(body)})
	if err != nil {
		t.Fatal(err)
	}
	checkDownloaded(t, dir, cache)
	if srv.requests != 2 || srv.ranges[0] != "bytes=50-" || srv.ranges[1] != "" {
		t.Fatalf("requests %d with ranges %q, want a resume then a fresh start", srv.requests, srv.ranges)
	}
}
