package model

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
)

// Labels are a definition's free-form labels. In a request a value may be
// a JSON string, number or boolean (the process-config manager sends
// bk_process_id as a number); a number or boolean is kept as the text the
// client sent ("42", "1.5", "true"). Anything else (null, an array, an
// object) is refused. LabelText is that rule; the decoder and the server's
// type check both use it.
type Labels map[string]string

// LabelText returns the label text of a generically decoded JSON value
// (decoded with UseNumber: string, json.Number, bool) and whether a label
// may have that value.
func LabelText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// UnmarshalJSON decodes an object of label values by LabelText.
func (l *Labels) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*l = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	out := make(Labels, len(m))
	for k, v := range m {
		s, ok := LabelText(v)
		if !ok {
			return &json.UnmarshalTypeError{Value: jsonKindName(v), Type: reflect.TypeFor[string](), Field: k}
		}
		out[k] = s
	}
	*l = out
	return nil
}

func jsonKindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

// LabelSet is a host's labels as sorted pairs: keys and values in turn,
// by key, each key once. A set is never changed once made, so hosts with
// the same labels may hold one set and a listing may hand it over as it
// is (the dispatcher keeps one set for every host carrying those labels):
// a reader may keep it, and tells one set from another by identity
// (Same) without comparing their pairs.
type LabelSet []string

// Len is the number of labels in l.
func (l LabelSet) Len() int { return len(l) / 2 }

// Pair is l's i-th label (by key).
func (l LabelSet) Pair(i int) (key, value string) { return l[2*i], l[2*i+1] }

// Map is l as a map of its own (nil for an empty set).
func (l LabelSet) Map() map[string]string {
	if len(l) < 2 {
		return nil
	}
	m := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		m[l[i]] = l[i+1]
	}
	return m
}

// Same reports whether l and o are one set (the same memory), not only
// equal: a listing of 100,000 hosts sharing ~60,000 sets finds a set it
// has seen by its address.
func (l LabelSet) Same(o LabelSet) bool {
	return len(l) == len(o) && (len(l) == 0 || &l[0] == &o[0])
}

// MakeLabelSet is m's labels as a set of their own (nil when m has none).
func MakeLabelSet(m map[string]string) LabelSet {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	l := make(LabelSet, 0, 2*len(m))
	for _, k := range keys {
		l = append(l, k, m[k])
	}
	return l
}
