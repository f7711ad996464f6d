package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"unicode/utf8"
)

// order returns the tensor names in the order Write lays them out: by
// element size, largest first, then by name. Every tensor then starts at a
// file offset that is a multiple of its element size, because the header
// ends on a multiple of 8.
func (f *File) order() []string {
	names := f.Names()
	sort.SliceStable(names, func(i, j int) bool {
		return f.Tensors[names[i]].DType.Size() > f.Tensors[names[j]].DType.Size()
	})
	return names
}

// validate reports the first problem that would make f unwritable.
func (f *File) validate() error {
	for k, v := range f.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: metadata %q: not valid UTF-8", k)
		}
	}
	for _, name := range f.Names() {
		if name == metadataKey {
			return fmt.Errorf("safetensors: tensor name %q is reserved for metadata", name)
		}
		if !utf8.ValidString(name) {
			return fmt.Errorf("safetensors: tensor name %q is not valid UTF-8", name)
		}
		if err := f.Tensors[name].validate(); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
	}
	return nil
}

// appendJSONString appends s as a JSON string without HTML escaping, as
// the reference implementation writes it.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// header returns the 8-byte length prefix and the padded JSON header for
// the tensors in the given order. The JSON is compact, metadata first with
// sorted keys, then the tensors with fields dtype, shape, data_offsets.
func (f *File) header(names []string) []byte {
	b := make([]byte, 8, 256)
	b = append(b, '{')
	if len(f.Metadata) > 0 {
		keys := make([]string, 0, len(f.Metadata))
		for k := range f.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = appendJSONString(b, metadataKey)
		b = append(b, ":{"...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, f.Metadata[k])
		}
		b = append(b, '}')
		if len(names) > 0 {
			b = append(b, ',')
		}
	}
	var off int64
	for i, name := range names {
		t := f.Tensors[name]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, `:{"dtype":`...)
		b = appendJSONString(b, string(t.DType))
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, off, 10)
		off += int64(len(t.Data))
		b = append(b, ',')
		b = strconv.AppendInt(b, off, 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for len(b)%8 != 0 {
		b = append(b, ' ')
	}
	binary.LittleEndian.PutUint64(b, uint64(len(b)-8))
	return b
}

// Write writes f to w in safetensors format: compact JSON header padded
// with spaces to a multiple of 8 bytes, metadata (if any) with sorted
// keys, tensors ordered by element size (largest first) and then by name
// so that each tensor is aligned to its element size. It returns an error,
// before writing anything, if a tensor's Data does not match its dtype and
// shape, a dtype is unknown, a name is "__metadata__", or a string is not
// valid UTF-8.
func Write(w io.Writer, f *File) error {
	if err := f.validate(); err != nil {
		return err
	}
	names := f.order()
	return f.write(w, names, f.header(names))
}

// write writes the validated f, whose header for the tensor order names
// is header, to w.
func (f *File) write(w io.Writer, names []string, header []byte) error {
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("safetensors: writing header: %w", err)
	}
	for _, name := range names {
		if _, err := w.Write(f.Tensors[name].Data); err != nil {
			return fmt.Errorf("safetensors: writing tensor %q: %w", name, err)
		}
	}
	return nil
}

// Marshal returns f encoded as by Write, in a buffer of exactly the file's
// size (growing one would copy a large checkpoint several times over).
func Marshal(f *File) ([]byte, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	names := f.order()
	header := f.header(names)
	size := len(header)
	for _, t := range f.Tensors {
		size += len(t.Data)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if err := f.write(buf, names, header); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFileAtomic writes f to path so that path holds either its old
// content or the complete new file, never a partial one: it writes a
// temporary file in the same directory, syncs it to disk, renames it over
// path and syncs the directory. On failure the temporary file is removed
// and path is untouched. A new file gets mode 0644; an existing file keeps
// its mode.
func WriteFileAtomic(path string, f *File) error {
	if err := f.validate(); err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error { return Write(w, f) })
}

// testHookBeforeRename, when set by tests, runs after the temporary file is
// written and synced; an error from it aborts the write.
var testHookBeforeRename func(tmpName string) error

// writeAtomic creates path atomically with the content fill writes.
func writeAtomic(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("safetensors: %s exists and is not a regular file", path)
		}
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: creating temporary file for %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if err := fill(tmp); err != nil {
		return fmt.Errorf("%w (writing %s)", err, tmpName)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("safetensors: syncing %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: closing %s: %w", tmpName, err)
	}
	if testHookBeforeRename != nil {
		if err := testHookBeforeRename(tmpName); err != nil {
			return err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if runtime.GOOS != "windows" { // Windows cannot sync a directory handle
		d, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("safetensors: syncing directory of %s: %w", path, err)
		}
		serr := d.Sync()
		cerr := d.Close()
		if err := errors.Join(serr, cerr); err != nil {
			return fmt.Errorf("safetensors: syncing directory of %s: %w", path, err)
		}
	}
	return nil
}
