package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gseproc/backend/config"
	"gseproc/model"
)

// Fuzz targets for every request decoder of the API, one per family. The
// seeds are the documents' examples (testdata/*.request.json) sent to
// every endpoint of the family, so they run as ordinary tests; `make
// fuzz` fuzzes each for FUZZTIME.
//
// Whatever the body, the server answers with its envelope, never an
// internal error (a panic is recovered as one), and a body the strict
// scan refuses is never accepted.

var (
	jobEndpoints = []string{
		"/api/c/compapi/v2/job/operate_proc/", "/api/c/compapi/v2/job/operate_process/",
		"/api/c/compapi/v3/job/manage_proc/", "/api/c/compapi/v2/job/get_proc_result/",
	}
	gseEndpoints = []string{
		"/api/c/compapi/v2/gse/operate_proc/", "/api/c/compapi/v2/gse/operate_proc_v2/",
		"/api/c/compapi/v2/gse/operate_proc_multi/", "/api/c/compapi/v2/gse/get_proc_operate_result/",
		"/api/c/compapi/v2/gse/get_proc_operate_result_v2/", "/api/c/compapi/v2/gse/register_proc_info/",
		"/api/c/compapi/v2/gse/update_proc_info/", "/api/c/compapi/v2/gse/unregister_proc_info/",
		"/api/c/compapi/v2/gse/get_proc_status/", "/api/c/compapi/v2/gse/sync_proc_status/",
		"/api/c/compapi/v2/gse/get_agent_status/", "/api/c/compapi/v2/gse/get_agent_info/",
		"/api/v2/proc/operate_proc_multi/", "/api/v2/cluster/list_agent_state/", "/api/v2/task/get_task_state/",
	}
	nativeEndpoints = []string{"/api/v1/operate", "/api/v1/hosts", "/api/v1/processes"}
)

// docSeeds are the documents' example request bodies.
func docSeeds(f *testing.F) [][]byte {
	f.Helper()
	names, err := filepath.Glob("testdata/*.request.json")
	if err != nil || len(names) == 0 {
		f.Fatalf("no seeds in testdata: %v", err)
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func fuzzFamily(f *testing.F, endpoints []string, extra ...string) {
	cfg := testConfig()
	// unregister_proc_info waits for its task up to sync_timeout: short,
	// so one input cannot hold the fuzzer for long.
	cfg.SyncTimeout = config.Duration(50 * time.Millisecond)
	e := newEnv(f, cfg)
	h := e.srv.Handler()
	seeds := docSeeds(f)
	for _, s := range extra {
		seeds = append(seeds, []byte(s))
	}
	for i := range endpoints {
		for _, s := range seeds {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, ep uint8, body []byte) {
		path := endpoints[int(ep)%len(endpoints)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set(AuthHeader, `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"fuzz"}`)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var env envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s: reply is not the envelope: %v\n%s", path, err, rec.Body.Bytes())
		}
		if rec.Code == http.StatusInternalServerError || env.Code == CodeSystem {
			t.Fatalf("%s: internal error for body %q: %s", path, body, rec.Body.Bytes())
		}
		if env.Result && json.Valid(body) && strictScan(body) != nil {
			t.Fatalf("%s: accepted a body the strict scan refuses: %q", path, body)
		}
	})
}

func FuzzJobAPI(f *testing.F) {
	fuzzFamily(f, jobEndpoints,
		`{"bk_biz_id": 1, "op_type": 2, "OP_TYPE": 9, "process_infos": []}`,
		`{"bk_biz_id": "1", "op_type": 2, "process_infos": [{"setup_path": "/a/../b", "proc_name": "x;y", "pid_path": "/p", "ip_list": [{"ip": "fe80::1%zz"}]}]}`)
}

func FuzzGSEAPI(f *testing.F) {
	fuzzFamily(f, gseEndpoints,
		`{"meta": {"namespace": "gse", "name": "proc-test"}, "op_type": 2, "agent_id_list": ["0:10.0.0.1", "0200000002abcdef0123"]}`,
		`{"proc_operate_req": [{"meta": {"namespace": "gse", "name": "a"}, "op_type": 0, "hosts": [{"ip": "::ffff:10.0.0.1", "bk_cloud_id": 1}]}]}`,
		`{"task_id": "GSETASK:20200101000000:1", "meta": {"namespace": "gse"}, "page": {"start": 0, "limit": 10}}`)
}

func FuzzNativeAPI(f *testing.F) {
	fuzzFamily(f, nativeEndpoints,
		`{"op_type": 2, "selector": {"namespace": "gse", "hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 1}]}}`,
		`{"process": {"meta": {"namespace": "web", "name": "n"}, "spec": {"identity": {"proc_name": "n", "setup_path": "/a", "pid_path": "/a/p"}}}, "hosts": [{"ip": "10.0.0.1"}]}`,
		`{"namespace": "gse", "hosts": [{"ip": "FE80::1"}], "limit": 3}`)
}

// FuzzStrictScan: the scan never panics, and on valid JSON it lets through
// only bodies in valid UTF-8 without a duplicate key (counted here
// independently: the keys encoding/json keeps against the colons outside
// strings).
func FuzzStrictScan(f *testing.F) {
	for _, s := range docSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"a": 1, "a": 2}`))
	f.Add([]byte("{\"a\": \"\xff\"}"))
	f.Add([]byte(`[{"x": [{"y": 1, "y": 1}]}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := strictScan(body)
		if !json.Valid(body) {
			return
		}
		if ref := strictScanTokens(body); fmt.Sprint(err) != fmt.Sprint(ref) {
			t.Fatalf("strictScan(%q) = %v, the token walk says %v", body, err, ref)
		}
		if err != nil {
			if len(err.Error()) == 0 {
				t.Fatal("empty refusal")
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("let invalid UTF-8 through: %q", body)
		}
		// UseNumber: a valid number beyond float64 (1E1000) is JSON too.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if kept, colons := countKeys(v), colonsOutsideStrings(body); kept != colons {
			t.Fatalf("let a duplicate key through (%d keys kept of %d): %q", kept, colons, body)
		}
	})
}

// tokenFrame is one open object or array of strictScanTokens' walk.
type tokenFrame struct {
	obj   bool
	keys  map[string]bool
	key   string // objects: the key whose value is read next
	inKey bool   // objects: the next token is a key
	idx   int    // arrays: index of the next element
}

// strictScanTokens is strictScan as it was, on a json.Decoder's tokens:
// the reference strictScan is held to (FuzzStrictScan, TestStrictScan).
func strictScanTokens(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var st []*tokenFrame
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
		var top *tokenFrame
		if n := len(st); n > 0 {
			top = st[n-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				st = append(st, &tokenFrame{obj: true, keys: map[string]bool{}, inKey: true})
			case '[':
				st = append(st, &tokenFrame{})
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

// TestStrictScan: the walk refuses what the token walk refused, naming
// the same field, on bodies shaped to reach each of its paths; it stops
// without a refusal on input that is not JSON (any prefix of a body) or
// nested past its bound.
func TestStrictScan(t *testing.T) {
	many := `{`
	for i := range 40 {
		many += fmt.Sprintf(`"k%d": %d, `, i, i)
	}
	bodies := []string{
		`{}`, `[]`, `{"a": 1}`, ` {"a" : [1, 2.5e3, -0, true, false, null, "x", {}, []] } `,
		`{"a": 1, "a": 2}`, `{"a": 1, "\u0061": 2}`, `{"a\"b": 1, "a\"b": 2}`,
		`[{"x": [{"y": 1, "y": 1}]}]`, `{"p": {"q": [0, {"r": {"s": 1, "s": 2}}]}}`,
		"{\"a\": \"\xff\"}", "{\"a\": [\"ok\", \"\xfe\"]}", "{\"\xff\": 1}", "{\"o\": {\"k\xc3\": 1}}",
		"\"\xff\"", `"ok"`, `12`, `{"a": {}, "b": {}, "a": []}`, `{"a": [], "b": {"a": 1}}`,
		many + `"k3": 0}`, many + `"z": 0}`, `{"": 1, "": 2}`, `{"a": "\\", "a\\": 1}`,
	}
	for _, b := range bodies {
		body := []byte(b)
		got, want := strictScan(body), strictScanTokens(body)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("strictScan(%q) = %v, the token walk says %v", body, got, want)
		}
		for i := range len(body) { // never a panic; a refusal only once its bytes are read
			_ = strictScan(body[:i])
		}
	}
	if err := strictScan([]byte(`{"a": 1, "a": 2}`)); err == nil || !strings.Contains(err.Error(), "a: duplicate key") {
		t.Fatalf("duplicate key: %v", err)
	}
	if err := strictScan([]byte(`[{"x": [{"y": 1, "y": 1}]}]`)); err == nil || !strings.Contains(err.Error(), "[0].x[0].y") {
		t.Fatalf("nested duplicate key: %v", err)
	}
	deep := strings.Repeat("[", scanMaxDepth+10) + `{"a": 1, "a": 2}` + strings.Repeat("]", scanMaxDepth+10)
	if err := strictScan([]byte(deep)); err != nil {
		t.Fatalf("past the depth bound: %v, want the walk stopped (the decoder refuses it)", err)
	}
	var verr model.ValidationError
	if err := strictScan([]byte(many + `"k39": 1}`)); err == nil || !errorsAs(err, &verr) || verr[0].Field != "k39" {
		t.Fatalf("a duplicate among many keys: %v", err)
	}
}

func errorsAs(err error, target *model.ValidationError) bool {
	v, ok := err.(model.ValidationError)
	if ok {
		*target = v
	}
	return ok
}

func countKeys(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += countKeys(e)
		}
	case []any:
		for _, e := range x {
			n += countKeys(e)
		}
	}
	return n
}

func colonsOutsideStrings(b []byte) int {
	n, in, esc := 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && c == ':':
			n++
		}
	}
	return n
}
