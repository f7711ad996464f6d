package train

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// MarshalJSON encodes v as encoding/json does, except that a float that
// is NaN or ±Inf, which encoding/json refuses, is written as null. Metrics
// of a run that diverged or whose perplexity overflowed (exp of a loss
// above 709) therefore still encode; a reader gets null (or, decoding
// into a float64 with encoding/json, the field's zero value) for them.
// Struct fields follow their json tags (name, omitempty, "-"); values
// implementing json.Marshaler encode themselves.
func MarshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeNull(&b, reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

func encodeNull(b *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	if v.Type().Implements(marshalerType) || (v.Kind() != reflect.Pointer && reflect.PointerTo(v.Type()).Implements(marshalerType) && v.CanAddr()) {
		return plain(b, v)
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			b.WriteString("null")
			return nil
		}
		return plain(b, v)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return encodeNull(b, v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return plain(b, v)
		}
		fallthrough
	case reflect.Array:
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeNull(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return plain(b, v)
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := plain(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := encodeNull(b, v.MapIndex(k)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case reflect.Struct:
		return encodeStruct(b, v)
	}
	return plain(b, v)
}

func encodeStruct(b *bytes.Buffer, v reflect.Value) error {
	t := v.Type()
	b.WriteByte('{')
	first := true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			if f.Anonymous {
				return fmt.Errorf("train.MarshalJSON: embedded field %s of %s is not supported", f.Name, t)
			}
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		if strings.Contains(opts, "omitempty") && isEmpty(fv) {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		if err := plain(b, reflect.ValueOf(name)); err != nil {
			return err
		}
		b.WriteByte(':')
		if strings.Contains(opts, "string") {
			if err := plain(b, fv); err != nil {
				return err
			}
			continue
		}
		if err := encodeNull(b, fv); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// plain appends the encoding/json encoding of v.
func plain(b *bytes.Buffer, v reflect.Value) error {
	j, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	b.Write(j)
	return nil
}

// isEmpty reports whether encoding/json's omitempty leaves v out.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Struct:
		return false
	}
	return v.IsZero()
}
