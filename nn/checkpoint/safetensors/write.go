package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/proxgen/proxgen/internal/atomicfile"
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
			return fmt.Errorf("safetensors: tensor %q: %w", name, err)
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

// WriteFileAtomic writes Sealed(f) to path so that path holds either its
// old content or the complete new file, never a partial one (see package
// internal/atomicfile: temporary file in the same folder, fsync, rename,
// fsync of the folder). On failure the temporary file is removed and path
// is untouched. A new file gets mode 0644; an existing file keeps its
// mode.
func WriteFileAtomic(path string, f *File) error {
	if err := f.validate(); err != nil {
		return err
	}
	sealed := Sealed(f)
	names := sealed.order()
	header := sealed.header(names)
	if err := atomicfile.WriteFunc(path, func(w io.Writer) error { return sealed.write(w, names, header) }, atomicfile.Options{}); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// ChecksumKey is the metadata entry that carries a file's checksum:
// "crc32c:" and eight hexadecimal digits, the CRC-32C (Castagnoli) of
// the header that Write produces for the file without this entry,
// followed by the tensor data. Sealed adds it; Read verifies it and
// removes it from the metadata it returns.
//
// The key is reserved: Read refuses a file whose ChecksumKey entry is not
// a valid seal of the file, and a file with a trace of a seal but no
// ChecksumKey entry (SealKey; a key that contains "checksum" in any case;
// a value that starts with "crc32c" in any case). So damage to the seal
// itself — a renamed key, a changed prefix — is an error, not an
// unsealed file. A file without any of these (PyTorch's, one written
// before seals) is read unchecked.
const ChecksumKey = "checksum"

// SealKey is the metadata entry, "sealed": "crc32c", that Sealed adds
// besides ChecksumKey and the checksum covers: the mark of a file this
// engine sealed, so that a file that has it but no valid ChecksumKey
// entry is refused. Read removes it from the metadata it returns.
const SealKey = "sealed"

// checksumPrefix starts the value of a ChecksumKey entry.
const checksumPrefix = "crc32c:"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sealed returns a copy of f (sharing its tensors) whose metadata
// carries the checksum of its header and data under ChecksumKey,
// replacing one f may already hold. Every file this engine writes for
// later reading is sealed, so that a flipped bit anywhere in it (header
// or data) is an error when it is read, not a silently different model.
func Sealed(f *File) *File {
	g := &File{Tensors: f.Tensors, Metadata: maps.Clone(f.Metadata)}
	delete(g.Metadata, ChecksumKey)
	if g.Metadata == nil {
		g.Metadata = map[string]string{}
	}
	g.Metadata[SealKey] = strings.TrimSuffix(checksumPrefix, ":")
	sum := g.checksum(g.order())
	g.Metadata[ChecksumKey] = fmt.Sprintf("%s%08x", checksumPrefix, sum)
	return g
}

// checksum returns the CRC-32C of f's header for the tensor order names
// followed by the tensors' data in that order.
func (f *File) checksum(names []string) uint32 {
	sum := crc32.Checksum(f.header(names), castagnoli)
	for _, name := range names {
		sum = crc32.Update(sum, castagnoli, f.Tensors[name].Data)
	}
	return sum
}
