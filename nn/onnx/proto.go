package onnx

import (
	"encoding/binary"
	"math"
)

// Protocol-buffer wire types (https://protobuf.dev/programming-guides/encoding/).
const (
	wireVarint = 0 // int32, int64, enum, bool
	wireI64    = 1 // fixed64, double
	wireLen    = 2 // string, bytes, embedded message, packed repeated field
	wireI32    = 5 // fixed32, float
)

// encoder appends protocol-buffer fields to a byte slice. Fields are
// written in the order of the calls; a zero scalar or empty string is
// still written (the proto3 default would be the same value, so readers
// see no difference), which keeps the encoder free of special cases.
type encoder struct{ b []byte }

// varint appends v as a base-128 varint.
func (e *encoder) varint(v uint64) {
	e.b = binary.AppendUvarint(e.b, v)
}

// tag appends the key of field number field with wire type wt.
func (e *encoder) tag(field int, wt int) {
	e.varint(uint64(field)<<3 | uint64(wt))
}

// int appends an int32/int64/enum field. Negative values take ten bytes,
// as the wire format's two's-complement varints do.
func (e *encoder) int(field int, v int64) {
	e.tag(field, wireVarint)
	e.varint(uint64(v))
}

// float appends a float field (fixed 32 bits, little-endian).
func (e *encoder) float(field int, v float32) {
	e.tag(field, wireI32)
	e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(v))
}

// bytes appends a length-delimited field holding p.
func (e *encoder) bytes(field int, p []byte) {
	e.tag(field, wireLen)
	e.varint(uint64(len(p)))
	e.b = append(e.b, p...)
}

// string appends a string field.
func (e *encoder) string(field int, s string) {
	e.tag(field, wireLen)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// message appends an embedded message field whose content fill writes.
// The content is encoded first into the tail of the buffer, then its
// length is inserted before it.
func (e *encoder) message(field int, fill func(*encoder)) {
	e.tag(field, wireLen)
	start := len(e.b)
	fill(e)
	n := len(e.b) - start
	var lenBuf [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lenBuf[:], uint64(n))
	e.b = append(e.b, lenBuf[:k]...) // grow by k bytes
	copy(e.b[start+k:], e.b[start:start+n])
	copy(e.b[start:], lenBuf[:k])
}

// packedInts appends a packed repeated int64 field (nothing when vs is
// empty, as the wire format leaves out empty packed fields).
func (e *encoder) packedInts(field int, vs []int64) {
	if len(vs) == 0 {
		return
	}
	e.message(field, func(e *encoder) {
		for _, v := range vs {
			e.varint(uint64(v))
		}
	})
}
