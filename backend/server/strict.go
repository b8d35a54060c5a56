package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"gseproc/model"
)

// Strict decoding. encoding/json matches keys case-insensitively, lets
// the last of duplicate keys win and replaces invalid UTF-8 silently, so a
// body could mean one thing to gseproc and another to a gateway, proxy or
// audit log in front of it ({"op_type": 2, "OP_TYPE": 9}). Before a body
// is decoded, strictScan refuses duplicate keys and invalid UTF-8 anywhere
// in it, and checkStruct (decode.go) refuses a key that matches a field
// only when case is ignored; each names the field.

// strictScan walks body and returns a ValidationError for the first
// duplicate key or string with invalid UTF-8 (keys included), or nil.
// Syntax errors are left to the decoder, which reports them with their
// offset: at the first byte that is not JSON the walk stops with nil.
// It reads the bytes once without decoding values (every API call passes
// through it: a json.Decoder's Token per token was 85 allocations an
// operate_proc call).
func strictScan(body []byte) error {
	s := strictScanner{b: body}
	s.space()
	if err := s.value(); err != errNotJSON {
		return err
	}
	return nil
}

// errNotJSON stops strictScanner's walk where the input is not JSON.
var errNotJSON = errors.New("not JSON")

// scanMaxDepth bounds the nesting strictScan walks (encoding/json refuses
// deeper input too): deeper, the walk stops and the decoder reports it.
const scanMaxDepth = 10000

// scanStep is one level of strictScanner's path: an object's key (empty
// while the key is read) or an array's index.
type scanStep struct {
	obj bool
	key []byte
	idx int
}

type strictScanner struct {
	b    []byte
	i    int
	path []scanStep // where the walk is, for a refusal's field
}

// fieldPath names steps, then extra (a key), as a field: "body" when
// both are empty.
func fieldPath(steps []scanStep, extra string) string {
	var b strings.Builder
	for _, p := range steps {
		if p.obj {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(p.key)
		} else {
			fmt.Fprintf(&b, "[%d]", p.idx)
		}
	}
	if extra != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(extra)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

func (s *strictScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value walks the value at s.i.
func (s *strictScanner) value() error {
	if s.i >= len(s.b) || len(s.path) >= scanMaxDepth {
		return errNotJSON
	}
	switch s.b[s.i] {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		raw, err := s.str()
		if err != nil {
			return err
		}
		if !utf8.Valid(raw) {
			return model.ValidationError{{Field: fieldPath(s.path, ""), Reason: "not valid UTF-8"}}
		}
		return nil
	}
	// A number, true, false or null: its bytes up to a delimiter.
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if s.i == start {
				return errNotJSON
			}
			return nil
		}
		s.i++
	}
	if s.i == start {
		return errNotJSON
	}
	return nil
}

// str reads the string at s.i (its opening quote) and returns its bytes
// between the quotes, escapes as written.
func (s *strictScanner) str() ([]byte, error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++ // the escaped byte is never the closing quote
		case '"':
			s.i = j + 1
			return s.b[start:j], nil
		}
	}
	return nil, errNotJSON
}

// next reads the separator after an element: more is true after a comma,
// false after the closing byte end.
func (s *strictScanner) next(end byte) (more bool, err error) {
	s.space()
	if s.i >= len(s.b) {
		return false, errNotJSON
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, nil
	case end:
		s.i++
		return false, nil
	}
	return false, errNotJSON
}

func (s *strictScanner) object() error {
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	s.path = append(s.path, scanStep{obj: true})
	defer func() { s.path = s.path[:len(s.path)-1] }()
	var buf [16][]byte
	seen := buf[:0]              // the keys so far, unescaped
	var many map[string]struct{} // the same, once there are more
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errNotJSON
		}
		raw, err := s.str()
		if err != nil {
			return err
		}
		if !utf8.Valid(raw) {
			return model.ValidationError{{Field: fieldPath(s.path[:len(s.path)-1], printable(string(raw))), Reason: "key is not valid UTF-8"}}
		}
		key := raw
		if bytes.IndexByte(raw, '\\') >= 0 {
			var k string
			if json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &k) != nil {
				return errNotJSON
			}
			key = []byte(k)
		}
		dup := false
		if many != nil {
			_, dup = many[string(key)]
			many[string(key)] = struct{}{}
		} else {
			for _, k := range seen {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			seen = append(seen, key)
			if len(seen) == len(buf) {
				many = make(map[string]struct{}, 2*len(seen))
				for _, k := range seen {
					many[string(k)] = struct{}{}
				}
			}
		}
		if dup {
			return model.ValidationError{{Field: fieldPath(s.path[:len(s.path)-1], string(key)), Reason: "duplicate key: each field may appear once"}}
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errNotJSON
		}
		s.i++
		s.space()
		s.path[len(s.path)-1].key = key
		if err := s.value(); err != nil {
			return err
		}
		if more, err := s.next('}'); !more {
			return err
		}
	}
}

func (s *strictScanner) array() error {
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	s.path = append(s.path, scanStep{})
	defer func() { s.path = s.path[:len(s.path)-1] }()
	for n := 0; ; n++ {
		s.path[len(s.path)-1].idx = n
		s.space()
		if err := s.value(); err != nil {
			return err
		}
		if more, err := s.next(']'); !more {
			return err
		}
	}
}

// printable is s with invalid UTF-8 shown as escapes, for a message.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// strictUnmarshal decodes one JSON object into dst under the strict rules
// (for JSON carried outside the body, e.g. the X-Bkapi-Authorization
// header).
func strictUnmarshal(data []byte, dst any) error {
	if err := strictScan(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	return decodeInto(data, obj, dst)
}
