// Package cifar10 reads the CIFAR-10 image classification data set in its
// official binary layout, downloads it on request, and serves shuffled,
// augmented and normalised mini-batches, as the CIFAR-10 experiments of the
// ProxGen paper (Section 4 and Appendix B of arXiv:2007.07484) and their
// PyTorch reference code use them.
//
// The binary release (cifar-10-binary.tar.gz) unpacks to a folder
// cifar-10-batches-bin holding data_batch_1.bin … data_batch_5.bin (the
// 50,000 training images) and test_batch.bin (10,000 test images). Each file
// is a sequence of 3073-byte records: one label byte in 0..9 followed by the
// 32×32 image as three 1024-byte planes (red, green, blue), each row-major.
//
// Typical use:
//
//	ds, err := cifar10.Load("/tmp/cifar10")
//	...
//	for epoch := range epochs {
//		l := cifar10.NewLoader(ds.Train, cifar10.LoaderConfig{
//			BatchSize: 128, Shuffle: true, Augment: true, DropLast: true,
//			Seed: seed, Epoch: epoch,
//		})
//		for b, ok := l.Next(); ok; b, ok = l.Next() {
//			x := autograd.FromSlice(b.X, b.N, 3, 32, 32)
//			...
//		}
//		l.Close()
//	}
//
// Nothing in this package touches the network unless Download is called.
package cifar10

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/proxgen/proxgen/internal/cifarinfo"
)

// Image geometry and record layout of the binary release.
const (
	Height     = cifarinfo.Height        // image height in pixels
	Width      = cifarinfo.Width         // image width in pixels
	Channels   = cifarinfo.Channels      // colour planes, in the order R, G, B
	ImageSize  = cifarinfo.ImageSize     // bytes (and float32 values) per image: 3072
	RecordSize = cifarinfo.RecordSize    // bytes per record in a .bin file: 3073
	NumClasses = cifarinfo.NumClasses    // number of classes; labels are 0..9
	FolderName = "cifar-10-batches-bin"  // folder the official tarball unpacks to
	recordsPer = 10000                   // records per file in the official release
	fileBytes  = recordsPer * RecordSize // size of each official .bin file
	planeSize  = Height * Width          // bytes per colour plane
)

// TrainFiles returns a new slice of the names of the five training files,
// in the order Load concatenates them.
func TrainFiles() []string { return append([]string(nil), trainFiles[:]...) }

// trainFiles are the names of the five training files.
var trainFiles = [...]string{
	"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
	"data_batch_4.bin", "data_batch_5.bin",
}

// TestFile is the name of the test file.
const TestFile = "test_batch.bin"

// ClassNames returns a new slice of the class names indexed by label, as
// in batches.meta.txt.
func ClassNames() []string { return cifarinfo.ClassNames() }

// Split is a set of labelled images held as raw bytes.
type Split struct {
	// Images holds Len() images of ImageSize bytes each, every image stored
	// as in the binary files: R, G and B planes, each 32×32 row-major.
	Images []uint8
	// Labels holds one label in 0..NumClasses-1 per image.
	Labels []uint8
}

// Dataset is the full CIFAR-10 data set.
type Dataset struct {
	Train *Split // 50,000 images from data_batch_1..5.bin
	Test  *Split // 10,000 images from test_batch.bin
}

// Len returns the number of images in s.
func (s *Split) Len() int { return len(s.Labels) }

// Image returns the ImageSize bytes of image i (a view, not a copy).
func (s *Split) Image(i int) []uint8 {
	return s.Images[i*ImageSize : (i+1)*ImageSize : (i+1)*ImageSize]
}

// Subset returns the first n images of s (all of them when n >= Len() or
// n < 0). The result shares memory with s. The official files are in random
// order, so the first n images are a fair sample; each class holds roughly
// n/10 of them.
func (s *Split) Subset(n int) *Split {
	if n < 0 || n > s.Len() {
		n = s.Len()
	}
	return &Split{
		Images: s.Images[: n*ImageSize : n*ImageSize],
		Labels: s.Labels[:n:n],
	}
}

// ClassCounts returns how many images of each class s holds.
func (s *Split) ClassCounts() [NumClasses]int {
	var c [NumClasses]int
	for _, l := range s.Labels {
		c[l]++
	}
	return c
}

// Validate checks that s is consistent: whole images, one label per image,
// labels in range.
func (s *Split) Validate() error {
	if len(s.Images) != len(s.Labels)*ImageSize {
		return fmt.Errorf("cifar10: split has %d image bytes for %d labels, want %d",
			len(s.Images), len(s.Labels), len(s.Labels)*ImageSize)
	}
	for i, l := range s.Labels {
		if int(l) >= NumClasses {
			return fmt.Errorf("cifar10: image %d has label %d, want 0..%d", i, l, NumClasses-1)
		}
	}
	return nil
}

// ResolveDir returns the cifar-10-batches-bin folder for dir, which may be
// that folder itself or a folder containing it. It reports an error naming
// both candidates when neither holds the expected files.
func ResolveDir(dir string) (string, error) {
	inner := filepath.Join(dir, FolderName)
	if fi, err := os.Stat(inner); err == nil && fi.IsDir() {
		return inner, nil
	}
	if _, err := os.Stat(filepath.Join(dir, TestFile)); err == nil {
		return dir, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("cifar10: data folder: %w", err)
	}
	return "", fmt.Errorf("cifar10: %s holds neither a %s folder nor %s (prepare or download the binary release first)",
		dir, FolderName, TestFile)
}

// ErrRecordCount is the error of Load for a file whose record count is
// not the official release's.
var ErrRecordCount = errors.New("not the official record count")

// LoadOptions configures LoadWith. The zero value is Load's strict
// reading of the official release.
type LoadOptions struct {
	// AllowSubset accepts files with any whole number (at least one) of
	// records instead of exactly the official 10,000 each: tiny fixtures,
	// or a deliberately reduced copy of the data set.
	AllowSubset bool
}

// Load reads the training and test splits from dir, which may be the
// cifar-10-batches-bin folder or the folder containing it. Every file must
// exist and hold exactly the official 10,000 valid records, so a file cut
// at a record boundary is refused rather than silently giving fewer
// images (LoadWith with AllowSubset accepts fewer). Errors name the file
// and, for bad content, the record.
func Load(dir string) (*Dataset, error) { return LoadWith(dir, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(dir string, opt LoadOptions) (*Dataset, error) {
	bin, err := ResolveDir(dir)
	if err != nil {
		return nil, err
	}
	// Check that every file exists before reading 150 MB.
	// Their sizes also give the training split's final size: reserving it
	// up front keeps loading from holding the copies of a growing slice
	// (another 300 MB at the peak).
	names := append(TrainFiles(), TestFile)
	var trainRecords int64
	for i, name := range names {
		st, err := os.Stat(filepath.Join(bin, name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("cifar10: missing file %s in %s", name, bin)
			}
			return nil, fmt.Errorf("cifar10: %w", err)
		}
		if i < len(trainFiles) && st.Mode().IsRegular() {
			trainRecords += st.Size() / RecordSize
		}
	}
	train := &Split{}
	if trainRecords <= maxReserve {
		train.Images = make([]uint8, 0, trainRecords*ImageSize)
		train.Labels = make([]uint8, 0, trainRecords)
	}
	for _, name := range trainFiles {
		if err := readInto(train, filepath.Join(bin, name), !opt.AllowSubset); err != nil {
			return nil, err
		}
	}
	test := &Split{}
	if err := readInto(test, filepath.Join(bin, TestFile), !opt.AllowSubset); err != nil {
		return nil, err
	}
	return &Dataset{Train: train, Test: test}, nil
}

// ReadFile reads one .bin file of the binary release, which may hold any
// whole number (at least one) of records.
func ReadFile(path string) (*Split, error) {
	s := &Split{}
	if err := readInto(s, path, false); err != nil {
		return nil, err
	}
	return s, nil
}

// readInto appends the records of the file at path to s. With official,
// the file must hold exactly the official number of records.
func readInto(s *Split, path string, official bool) error {
	// Stat before opening: opening a FIFO would block until a writer
	// comes, and a directory is no data file.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory"
		}
		return fmt.Errorf("cifar10: %s is %s, not a data file of records of %d bytes", path, what, RecordSize)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cifar10: missing file %s", path)
		}
		return fmt.Errorf("cifar10: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cifar10: %w", err)
	}
	size := fi.Size()
	if size == 0 {
		return fmt.Errorf("cifar10: %s is empty, want records of %d bytes (official files are %d bytes)",
			path, RecordSize, fileBytes)
	}
	if size%RecordSize != 0 {
		return fmt.Errorf("cifar10: %s: size %d is not a multiple of the %d-byte record: record %d is truncated (%d of %d bytes; official files are %d bytes)",
			path, size, RecordSize, size/RecordSize, size%RecordSize, RecordSize, fileBytes)
	}
	n := int(size / RecordSize)
	if official && n != recordsPer {
		return fmt.Errorf("cifar10: %s holds %d records, the official release %d (%w; a truncated or foreign file?)",
			path, n, recordsPer, ErrRecordCount)
	}
	s.Images = growBytes(s.Images, n*ImageSize)
	s.Labels = growBytes(s.Labels, n)
	r := bufio.NewReaderSize(f, 64*RecordSize)
	rec := make([]byte, RecordSize)
	for i := range n {
		if _, err := io.ReadFull(r, rec); err != nil {
			return fmt.Errorf("cifar10: %s: reading record %d: %w", path, i, err)
		}
		if int(rec[0]) >= NumClasses {
			return fmt.Errorf("cifar10: %s: record %d (byte offset %d) has label %d, want 0..%d",
				path, i, int64(i)*RecordSize, rec[0], NumClasses-1)
		}
		s.Labels = append(s.Labels, rec[0])
		s.Images = append(s.Images, rec[1:]...)
	}
	return nil
}

// maxReserve bounds the number of training records Load reserves room for
// from the file sizes alone (ten times the official 50,000), so that a
// huge file fails in readInto's checks rather than in one giant allocation.
const maxReserve = 10 * 5 * recordsPer

// growBytes makes room for n more bytes in b without changing its length.
func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}
