package model

import (
	"bytes"
	"encoding/json"
	"reflect"
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
