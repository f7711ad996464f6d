package serve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// scanner is a strict, bounded JSON reader over a request body: keys are
// matched exactly (case-sensitively) and may not repeat, every array
// and object is counted against its limit while it is read (an element
// over the limit is refused before it is decoded), nesting is bounded,
// and nothing is allocated for what is only skipped. encoding/json
// matches keys case-insensitively, takes the last of repeated keys and
// decodes a whole array before its length can be checked; the protocol
// parser uses this instead.
type scanner struct {
	b []byte
	i int
}

// errAt returns an error that names the byte offset where it was found.
func (s *scanner) errAt(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// describe names the token at the current position for an error.
func (s *scanner) describe() string {
	switch c := s.peek(); {
	case c == 0:
		return "the end of the body"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	default:
		return fmt.Sprintf("%q", c)
	}
}

func (s *scanner) expect(c byte, what string) error {
	if s.peek() != c {
		return s.errAt("want %s, found %s", what, s.describe())
	}
	s.i++
	return nil
}

// next reads what follows an element of an array or object that end
// closes: true after ',' (another element follows), false after end.
// after names the element for the error.
func (s *scanner) next(end byte, after string) (bool, error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case end:
		s.i++
		return false, nil
	}
	return false, s.errAt("want ',' or '%c' after %s, found %s", end, after, s.describe())
}

// object reads an object of at most maxKeys members; fn reads the value
// of each key. A repeated key is an error.
func (s *scanner) object(maxKeys int, fn func(key string) error) error {
	if err := s.expect('{', "an object"); err != nil {
		return err
	}
	var seen []string
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errAt("want a key (a string), found %s", s.describe())
		}
		key, err := s.str(maxKeyLen)
		if err != nil {
			return err
		}
		for _, k := range seen {
			if k == key {
				return s.errAt("key %q given twice", key)
			}
		}
		if len(seen) == maxKeys {
			return s.errAt("more than %d keys in one object", maxKeys)
		}
		seen = append(seen, key)
		if err := s.expect(':', "':'"); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		if more, err := s.next('}', "the value of "+strconv.Quote(key)); !more {
			return err
		}
	}
}

// array reads an array of at most max elements (what names them); fn
// reads element i. The element past max is refused before it is read.
func (s *scanner) array(max int, what string, fn func(i int) error) error {
	if err := s.expect('[', "an array"); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for i := 0; ; i++ {
		if i == max {
			return s.errAt("more than %d %s", max, what)
		}
		if err := fn(i); err != nil {
			return err
		}
		if more, err := s.next(']', fmt.Sprintf("element %d of %s", i, what)); !more {
			return err
		}
	}
}

// Limits of the strings and containers that are not tensor data.
const (
	maxKeyLen    = 256     // bytes of a key
	maxStringLen = 4 << 10 // bytes of a name, datatype, id or parameter value
	maxParams    = 16      // members of a "parameters" object
	maxDims      = 8       // dimensions of a shape
	maxDepth     = 16      // nesting of a skipped value
)

// strSpan checks the string at the current position and returns its
// contents (between the quotes, still escaped) and whether it has escapes
// or invalid UTF-8 (then encoding/json must unquote it).
func (s *scanner) strSpan() (span []byte, slow bool, err error) {
	if err := s.expect('"', "a string"); err != nil {
		return nil, false, err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			span = s.b[start:s.i]
			s.i++
			return span, slow || !utf8.Valid(span), nil
		case c == '\\':
			slow = true
			if s.i+1 >= len(s.b) {
				return nil, false, s.errAt("unterminated string")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false, s.errAt("unterminated string")
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, false, s.errAt("invalid \\u escape in a string")
					}
				}
				s.i += 6
			default:
				return nil, false, s.errAt("invalid escape \\%c in a string", s.b[s.i+1])
			}
		case c < 0x20:
			return nil, false, s.errAt("control character %#x in a string", c)
		default:
			s.i++
		}
	}
	return nil, false, s.errAt("unterminated string")
}

// str reads a string of at most max bytes as it stands in the body.
func (s *scanner) str(max int) (string, error) {
	at := s.i
	span, slow, err := s.strSpan()
	if err != nil {
		return "", err
	}
	if len(span) > max {
		s.i = at
		return "", s.errAt("a string of %d bytes, over the limit of %d", len(span), max)
	}
	if !slow {
		return string(span), nil
	}
	var v string
	// The span was checked: this only unescapes (and replaces invalid
	// UTF-8 as encoding/json does).
	if err := json.Unmarshal(s.b[at:s.i], &v); err != nil {
		s.i = at
		return "", s.errAt("%v", err)
	}
	return v, nil
}

// number reads a number as JSON defines it and returns its text.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, s.errAt("want a number, found %s", s.describe())
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			return nil, s.errAt("malformed number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.i = i
			return nil, s.errAt("malformed number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return b[start:i], nil
}

// integer reads a number that must be an integer within int64.
func (s *scanner) integer() (int64, error) {
	at := s.i
	num, err := s.number()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		s.i = at
		return 0, s.errAt("%s is not an integer", num)
	}
	return n, nil
}

// literal reads true, false or null.
func (s *scanner) literal(lit string) error {
	s.ws()
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.errAt("want %s, found %s", lit, s.describe())
	}
	s.i += len(lit)
	return nil
}

// skip checks the value at the current position, nested at most depth
// deep, and moves past it; it allocates nothing.
func (s *scanner) skip(depth int) error {
	if depth == 0 {
		return s.errAt("values nested more than %d deep", maxDepth)
	}
	switch c := s.peek(); {
	case c == '{':
		s.i++
		if s.peek() == '}' {
			s.i++
			return nil
		}
		for {
			if _, _, err := s.strSpan(); err != nil {
				return err
			}
			if err := s.expect(':', "':'"); err != nil {
				return err
			}
			if err := s.skip(depth - 1); err != nil {
				return err
			}
			if more, err := s.next('}', "a value"); !more {
				return err
			}
		}
	case c == '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth - 1); err != nil {
				return err
			}
			if more, err := s.next(']', "an element"); !more {
				return err
			}
		}
	case c == '"':
		_, _, err := s.strSpan()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		_, err := s.number()
		return err
	}
}

// param reads a parameter value: a string, a number (as float64) or a
// boolean, the types the protocol allows.
func (s *scanner) param() (any, error) {
	switch c := s.peek(); {
	case c == '"':
		return s.str(maxStringLen)
	case c == 't':
		return true, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == '-' || c >= '0' && c <= '9':
		at := s.i
		num, err := s.number()
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			s.i = at
			return nil, s.errAt("%s is out of range", num)
		}
		return f, nil
	default:
		return nil, s.errAt("a parameter is a string, a number or a boolean, found %s", s.describe())
	}
}

// params reads a "parameters" object.
func (s *scanner) params() (map[string]any, error) {
	p := map[string]any{}
	err := s.object(maxParams, func(key string) error {
		v, err := s.param()
		if err != nil {
			return fmt.Errorf("parameter %q: %w", key, err)
		}
		p[key] = v
		return nil
	})
	return p, err
}

// end requires nothing but white space after the value.
func (s *scanner) end() error {
	if s.peek() != 0 {
		return s.errAt("data after the request object")
	}
	return nil
}

// tensor reads a tensor's data array, whose shape is dims: either flat
// (one array of all the elements) or nested exactly as dims. elem reads
// the element with row-major index k; an element past the count is
// refused before it is read, and a short array is an error.
func (s *scanner) tensor(dims []int64, elem func(k int) error) error {
	if err := s.expect('[', "an array"); err != nil {
		return err
	}
	s.i-- // read again below
	total := int64(1)
	for _, d := range dims {
		total *= d
	}
	shape := dimsText(dims)
	nested := len(dims) > 1 && s.nestedNext()
	if !nested {
		dims = []int64{total}
	}
	k := 0
	var walk func(level int) error
	walk = func(level int) error {
		n := int(dims[level])
		got := 0
		err := s.array(n, fmt.Sprintf("elements at depth %d (the shape %s needs %d there)", level+1, shape, n), func(int) error {
			got++
			if level+1 < len(dims) {
				if s.peek() != '[' {
					return s.errAt("want an array at depth %d (the data is nested as the shape), found %s", level+2, s.describe())
				}
				return walk(level + 1)
			}
			if s.peek() == '[' {
				return s.errAt("an array at depth %d: the data is flat or nested exactly as the shape", level+2)
			}
			err := elem(k)
			k++
			return err
		})
		if err != nil {
			return err
		}
		if got != n {
			return s.errAt("%d elements at depth %d, the shape %s needs %d", got, level+1, shape, n)
		}
		return nil
	}
	return walk(0)
}

// nestedNext tells whether the array at the current position starts with
// an array.
func (s *scanner) nestedNext() bool {
	at := s.i
	defer func() { s.i = at }()
	s.i++ // '['
	return s.peek() == '['
}

func dimsText(dims []int64) string {
	b := []byte{'['}
	for i, d := range dims {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
