package cifar10

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRefusesSubset checks that Load wants the official record count
// in every file, as a file cut at a record boundary must not pass as a
// smaller data set, and that LoadWith accepts one when asked.
func TestLoadRefusesSubset(t *testing.T) {
	root := t.TempDir()
	writeFixture(t, root)
	_, err := Load(root)
	if err == nil || !strings.Contains(err.Error(), "data_batch_1.bin holds 3 records, the official release 10000") {
		t.Fatalf("Load of a fixture with 3 records per file: error %v, want a refusal naming the file and both counts", err)
	}
	if _, err := LoadWith(root, LoadOptions{AllowSubset: true}); err != nil {
		t.Fatalf("LoadWith AllowSubset: %v", err)
	}
}

// TestLoadOfficialCounts checks that files with the official record count
// load (all-zero records are valid: label 0, black images). The files are
// sparse, but reading them still takes 184 MB of memory.
func TestLoadOfficialCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 184 MB")
	}
	bin := filepath.Join(t.TempDir(), FolderName)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(TrainFiles(), TestFile) {
		f, err := os.Create(filepath.Join(bin, name))
		if err != nil {
			t.Fatal(err)
		}
		size := int64(fileBytes)
		if name == TrainFiles()[2] {
			size -= 10 * RecordSize // 9,990 records: cut at a record boundary
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if _, err := Load(bin); err == nil || !strings.Contains(err.Error(), "data_batch_3.bin holds 9990 records") {
		t.Fatalf("Load with 9,990 records in data_batch_3.bin: error %v", err)
	}
	if err := os.Truncate(filepath.Join(bin, TrainFiles()[2]), fileBytes); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Train.Len() != 50000 || ds.Test.Len() != 10000 {
		t.Fatalf("%d training and %d test images, want 50000 and 10000", ds.Train.Len(), ds.Test.Len())
	}
}

// failingServer answers 404 and counts requests.
func failingServer(t *testing.T) *archiveServer {
	return newArchiveServer(t, nil, func(s *archiveServer, w http.ResponseWriter, r *http.Request) bool {
		http.NotFound(w, r)
		return true
	})
}

// TestOpenMissingFolder checks that a data folder named explicitly that
// does not exist is an error that creates nothing and fetches nothing,
// unless a download is asked for.
func TestOpenMissingFolder(t *testing.T) {
	base := t.TempDir()
	typo := filepath.Join(base, "cifra10", "inner")
	srv := failingServer(t)
	_, err := Open(context.Background(), OpenOptions{Dir: typo, Fetch: DownloadOptions{URL: srv.URL}})
	if err == nil || !strings.Contains(err.Error(), typo) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Open of a missing folder: error %v, want one naming it", err)
	}
	if srv.requests != 0 {
		t.Fatalf("%d download requests for a missing folder, want none", srv.requests)
	}
	if _, err := os.Stat(filepath.Join(base, "cifra10")); !os.IsNotExist(err) {
		t.Fatalf("Open created %s (stat: %v)", filepath.Join(base, "cifra10"), err)
	}

	// Asked for, a download fills the missing folder.
	body := fixtureTarball(t)
	good := newArchiveServer(t, body, nil)
	ds, err := Open(context.Background(), OpenOptions{Dir: typo, Download: true, LoadOptions: LoadOptions{AllowSubset: true},
		Fetch: DownloadOptions{URL: good.URL, MD5: md5hex(body)}})
	if err != nil {
		t.Fatalf("Open with Download: %v", err)
	}
	if ds.Train.Len() != 13 {
		t.Fatalf("%d training images after the download, want 13", ds.Train.Len())
	}
}

// TestFailedDownloadLeavesNoFolder checks that a failed download removes
// the folders it created (here the whole default cache path) and keeps
// folders that existed.
func TestFailedDownloadLeavesNoFolder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	t.Setenv("HOME", home)
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	srv := failingServer(t)
	_, err = Open(context.Background(), OpenOptions{Fetch: DownloadOptions{URL: srv.URL}})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Open with a failing download: error %v", err)
	}
	for d := cache; d != home; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("a failed download left %s behind (stat: %v)", d, err)
		}
	}
	// An existing, empty folder stays.
	dir := t.TempDir()
	if _, err := Open(context.Background(), OpenOptions{Dir: dir, Fetch: DownloadOptions{URL: srv.URL}}); err == nil {
		t.Fatal("Open with a failing download succeeded")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a failed download removed the existing folder %s: %v", dir, err)
	}
}

// TestOpenPartialData checks that a folder holding some data files is
// broken data, not missing data: no download.
func TestOpenPartialData(t *testing.T) {
	root := t.TempDir()
	bin := writeFixture(t, root)
	os.Remove(filepath.Join(bin, TestFile))
	srv := failingServer(t)
	_, err := Open(context.Background(), OpenOptions{Dir: root, Fetch: DownloadOptions{URL: srv.URL}})
	if err == nil || srv.requests != 0 {
		t.Fatalf("Open of partial data: error %v after %d requests, want an error and none", err, srv.requests)
	}
}
