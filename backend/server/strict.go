package server

import (
	"bytes"
	"encoding/json"
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

// scanFrame is one open object or array of strictScan's walk.
type scanFrame struct {
	obj   bool
	keys  map[string]bool
	key   string // objects: the key whose value is read next
	inKey bool   // objects: the next token is a key
	idx   int    // arrays: index of the next element
}

// strictScan walks body's tokens and returns a ValidationError for the
// first duplicate key or string with invalid UTF-8 (keys included), or
// nil. Syntax errors are left to the decoder, which reports them with
// their offset.
func strictScan(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var st []*scanFrame
	path := func(extra string) string {
		var b strings.Builder
		for _, f := range st {
			switch {
			case f.obj && !f.inKey:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			case !f.obj:
				fmt.Fprintf(&b, "[%d]", f.idx)
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
	done := func() {
		if n := len(st); n > 0 {
			if top := st[n-1]; top.obj {
				top.inKey = true
			} else {
				top.idx++
			}
		}
	}
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		cur := dec.InputOffset()
		raw := body[prev:cur] // the token and the separators before it (ASCII)
		prev = cur
		var top *scanFrame
		if n := len(st); n > 0 {
			top = st[n-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				st = append(st, &scanFrame{obj: true, keys: map[string]bool{}, inKey: true})
			case '[':
				st = append(st, &scanFrame{})
			default:
				st = st[:len(st)-1]
				done()
			}
			continue
		}
		if top != nil && top.obj && top.inKey {
			k, _ := tok.(string)
			if !utf8.Valid(raw) {
				// k has the bad bytes replaced already: name the raw key.
				if i, j := bytes.IndexByte(raw, '"'), bytes.LastIndexByte(raw, '"'); i >= 0 && j > i {
					k = string(raw[i+1 : j])
				}
				return model.ValidationError{{Field: path(printable(k)), Reason: "key is not valid UTF-8"}}
			}
			if top.keys[k] {
				return model.ValidationError{{Field: path(k), Reason: "duplicate key: each field may appear once"}}
			}
			top.keys[k] = true
			top.key, top.inKey = k, false
			continue
		}
		if _, ok := tok.(string); ok && !utf8.Valid(raw) {
			return model.ValidationError{{Field: path(""), Reason: "not valid UTF-8"}}
		}
		done()
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
