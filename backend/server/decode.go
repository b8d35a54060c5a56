package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gseproc/backend/server/wire"
	"gseproc/model"
)

// readBody returns the request's JSON text: the body for any method, or,
// for a request without a body, its query parameters as a JSON object
// (values that parse as JSON numbers, booleans, arrays or objects keep
// their type; the rest are strings). Bodies over limit are refused.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: CodeArgument,
					msg: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)}
			}
			return nil, errArg("reading request body: " + err.Error())
		}
		body = b
	}
	if len(bytes.TrimSpace(body)) == 0 && len(r.URL.Query()) > 0 {
		for k, vs := range r.URL.Query() {
			for _, s := range append(vs, k) {
				if !utf8.ValidString(s) {
					return nil, validationError(CodeArgument, model.ValidationError{{Field: printable(k), Reason: "query parameter is not valid UTF-8"}})
				}
			}
		}
		return queryJSON(r), nil
	}
	return body, nil
}

// queryJSON turns query parameters into a JSON object.
func queryJSON(r *http.Request) []byte {
	q := r.URL.Query()
	obj := make(map[string]json.RawMessage, len(q))
	for k, vs := range q {
		raw := make([]json.RawMessage, len(vs))
		for i, v := range vs {
			raw[i] = queryValue(v)
		}
		if len(raw) == 1 {
			obj[k] = raw[0]
		} else {
			b, _ := json.Marshal(raw)
			obj[k] = b
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

func queryValue(v string) json.RawMessage {
	t := strings.TrimSpace(v)
	if t != "" && json.Valid([]byte(t)) && (t[0] == '{' || t[0] == '[' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9') || t == "true" || t == "false") {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(v)
	return b
}

// parseObject checks that body is one JSON object and returns it
// generically (numbers as json.Number), for the gateway fields and the
// type check.
func parseObject(body []byte) (map[string]any, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errArg("empty request: want a JSON object body (or query parameters)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, errArg(fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errArg("malformed JSON: unexpected end of input")
		}
		return nil, errArg("malformed JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errArg("malformed JSON: more than one value in the body")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errArg(fmt.Sprintf("want a JSON object, got %s", jsonKind(v)))
	}
	if err := strictScan(body); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	return obj, nil
}

// decodeInto type-checks obj against dst's type, naming every field whose
// JSON type is wrong, then decodes body into dst. Unknown fields are
// ignored.
func decodeInto(body []byte, obj map[string]any, dst any) error {
	v := &model.Validator{}
	typeCheck(v, obj, reflect.TypeOf(dst).Elem(), "")
	if err := v.Err(); err != nil {
		return err
	}
	if err := json.Unmarshal(body, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return model.ValidationError{{Field: te.Field, Reason: "want " + te.Type.String() + ", got JSON " + te.Value}}
		}
		return model.ValidationError{{Field: "body", Reason: err.Error()}}
	}
	return nil
}

// jsonChecker is implemented by wire types that accept more than one JSON
// type; it returns "" when v is acceptable, else what is wanted.
type jsonChecker interface{ checkJSON(v any) string }

var (
	checkerType     = reflect.TypeFor[jsonChecker]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	labelsType      = reflect.TypeFor[model.Labels]()
	hostsType       = reflect.TypeFor[wire.Hosts]()
	hostType        = reflect.TypeFor[model.Host]()
)

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// typeCheck walks a generically decoded JSON value against the Go type it
// will be decoded into and records every mismatch under its path
// ("process_infos[0].ip_list[1].bk_cloud_id").
func typeCheck(v *model.Validator, val any, t reflect.Type, path string) {
	if val == nil {
		return // null leaves the zero value, as encoding/json does
	}
	if t == rawMessageType {
		return
	}
	if t == labelsType {
		checkLabels(v, val, path)
		return
	}
	if t == hostsType {
		checkHosts(v, val, path)
		return
	}
	if reflect.PointerTo(t).Implements(checkerType) {
		if want := reflect.New(t).Interface().(jsonChecker).checkJSON(val); want != "" {
			v.Addf(path, "want %s, got %s", want, jsonKind(val))
		}
		return
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		typeCheck(v, val, t.Elem(), path)
	case reflect.Interface:
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			v.Addf(path, "want an object, got %s", jsonKind(val))
			return
		}
		checkStruct(v, obj, t, path)
	case reflect.Slice, reflect.Array:
		arr, ok := val.([]any)
		if !ok {
			v.Addf(path, "want an array, got %s", jsonKind(val))
			return
		}
		for i, e := range arr {
			typeCheck(v, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		obj, ok := val.(map[string]any)
		if !ok {
			v.Addf(path, "want an object, got %s", jsonKind(val))
			return
		}
		var keys []string // rare: made only when a key differs by case
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			typeCheck(v, obj[k], t.Elem(), path+"["+k+"]")
		}
	case reflect.String:
		if _, ok := val.(string); !ok {
			v.Addf(path, "want a string, got %s", jsonKind(val))
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			v.Addf(path, "want true or false, got %s", jsonKind(val))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := val.(json.Number)
		if !ok {
			v.Addf(path, "want an integer, got %s", jsonKind(val))
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			v.Addf(path, "want an integer, got %s", n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := val.(json.Number)
		if !ok {
			v.Addf(path, "want a non-negative integer, got %s", jsonKind(val))
			return
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			v.Addf(path, "want a non-negative integer, got %s", n)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := val.(json.Number)
		if !ok {
			v.Addf(path, "want a number, got %s", jsonKind(val))
			return
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			v.Addf(path, "want a number, got %s", n)
		}
	}
}

// checkHosts checks a wire.Hosts list: each entry a "cloud:ip" text
// ParseHostText takes, or a host object; every wrong entry named.
func checkHosts(v *model.Validator, val any, path string) {
	arr, ok := val.([]any)
	if !ok {
		v.Addf(path, "want an array of hosts (\"cloud:ip\" or {ip, bk_cloud_id}), got %s", jsonKind(val))
		return
	}
	for i, e := range arr {
		field := fmt.Sprintf("%s[%d]", path, i)
		switch x := e.(type) {
		case string:
			if _, err := wire.ParseHostText(x); err != nil {
				v.Add(field, err.Error())
			}
		case map[string]any:
			typeCheck(v, x, hostType, field)
		default:
			v.Addf(field, "want a host (\"cloud:ip\" or {ip, bk_cloud_id}), got %s", jsonKind(e))
		}
	}
}

// checkLabels names every label whose value model.LabelText refuses.
func checkLabels(v *model.Validator, val any, path string) {
	obj, ok := val.(map[string]any)
	if !ok {
		v.Addf(path, "want an object of labels, got %s", jsonKind(val))
		return
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := model.LabelText(obj[k]); !ok {
			v.Addf(path+"["+k+"]", "want a string, number or boolean, got %s", jsonKind(obj[k]))
		}
	}
}

// checkStruct checks each JSON field of t (embedded structs flattened;
// names matched exactly). A key that would match a field only when case
// is ignored, as encoding/json would match it, is refused.
func checkStruct(v *model.Validator, obj map[string]any, t reflect.Type, path string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				checkStruct(v, obj, ft, path)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			if k != name && strings.EqualFold(k, name) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v.Addf(join(path, k), "unknown field: field names are case-sensitive (did you mean %q?)", name)
		}
		if val, ok := obj[name]; ok {
			typeCheck(v, val, f.Type, join(path, name))
		}
	}
}

func jsonKind(val any) string {
	switch x := val.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return "string " + strconv.Quote(x)
	case json.Number:
		return "number " + string(x)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", val)
}

// flexString is a string that also accepts a JSON number (bk_scope_id is
// documented as a string; some clients send the number).
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexString(n.String())
	return nil
}

func (flexString) checkJSON(v any) string {
	switch v.(type) {
	case string, json.Number:
		return ""
	}
	return "a string"
}

// flexInt is an integer that also accepts a string of digits (bk_biz_id:
// JOB's Java server accepts "1").
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return err
		}
		*f = flexInt(n)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexInt(n)
	return nil
}

func (flexInt) checkJSON(v any) string {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return "an integer"
	}
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return "an integer"
	}
	return ""
}

// stringField returns obj[key] when it is a string.
func stringField(obj map[string]any, key string) string {
	s, _ := obj[key].(string)
	return s
}
