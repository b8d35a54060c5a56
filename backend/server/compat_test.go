package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gseproc/backend/simulator"
	"gseproc/model"
)

// The compatibility suite: testdata/clients/<client>.json holds the
// requests one real client sends, in the order it sends them (written from
// gse-api.md and clients.md, not copied from the clients), and what each
// reply must hold. Each file is replayed against the real server over HTTP
// on the demo fleet; every field of every reply is checked.
//
// A step: {name, method (POST), path, header, body, poll, save, expect}.
//   - "${name}" in path, header, body and expect is a value saved earlier,
//     "${agent:cloud:ip}" the simulated agent id of that host.
//   - poll: repeat (bounded) while the reply says "still running": top-level
//     code 1000115, or a per-host error_code 115 anywhere in data.
//   - save: {name: "data.task_id"}: a dotted path into the reply.
//   - expect: the reply's envelope; objects must have exactly the keys
//     given (an object with "$more": true may have more), arrays exactly
//     the elements given, in order. Leaves are equal, or one of "$any"
//     (present), "$string" (a non-empty string), "$number", "$taskid"
//     (GSETASK:...), "$oneof:a|b" (the leaf's text is one of them).
// What the reference leaves open is decided next to the requests ("notes").

type compatFile struct {
	Client string       `json:"client"`
	Notes  []string     `json:"notes"`
	Steps  []compatStep `json:"steps"`
}

type compatStep struct {
	Name   string            `json:"name"`
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Header map[string]string `json:"header"`
	Body   json.RawMessage   `json:"body"`
	Poll   bool              `json:"poll"`
	Save   map[string]string `json:"save"`
	Expect json.RawMessage   `json:"expect"`
}

var placeholderRe = regexp.MustCompile(`\$\{([^}]+)\}`)

func TestCompatClients(t *testing.T) {
	files, err := filepath.Glob("testdata/clients/*.json")
	if err != nil || len(files) < 5 {
		t.Fatalf("client files %v (%v): want one per client", files, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			var cf compatFile
			dec := json.NewDecoder(bytes.NewReader(readFile(t, f)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cf); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			e := newEnv(t, testConfig())
			vars := map[string]string{}
			subst := func(s string) string {
				return placeholderRe.ReplaceAllStringFunc(s, func(m string) string {
					k := m[2 : len(m)-1]
					if hs, ok := strings.CutPrefix(k, "agent:"); ok {
						h, err := model.ParseAgentID(hs)
						if err != nil {
							t.Fatalf("placeholder %s: %v", m, err)
						}
						return simulator.AgentID(h)
					}
					v, ok := vars[k]
					if !ok {
						t.Fatalf("placeholder %s: nothing saved under %q yet", m, k)
					}
					return v
				})
			}
			for i, s := range cf.Steps {
				where := fmt.Sprintf("step %d %q (%s)", i, s.Name, cf.Client)
				method := s.Method
				if method == "" {
					method = http.MethodPost
				}
				var body []byte
				if len(s.Body) > 0 {
					body = []byte(subst(string(s.Body)))
				}
				hdr := map[string]string{}
				for k, v := range s.Header {
					hdr[k] = subst(v)
				}
				var r reply
				deadline := time.Now().Add(20 * time.Second)
				for n := 0; ; n++ {
					e.t = t
					r = e.do(method, subst(s.Path), body, hdr)
					checkOpenAPI(t, method, subst(s.Path), body, hdr, r, false)
					if !s.Poll || !stillRunning(r) {
						break
					}
					if time.Now().After(deadline) || n > 2000 {
						t.Fatalf("%s: still running after 20s: %s", where, r.raw)
					}
					time.Sleep(10 * time.Millisecond)
				}
				var got any
				if err := json.Unmarshal(r.raw, &got); err != nil {
					t.Fatal(err)
				}
				if len(s.Expect) > 0 {
					var want any
					if err := json.Unmarshal([]byte(subst(string(s.Expect))), &want); err != nil {
						t.Fatalf("%s: expect: %v", where, err)
					}
					if errs := matchJSON("", want, got); len(errs) > 0 {
						t.Fatalf("%s: %s %s\n%s\nreply: %s", where, method, s.Path, strings.Join(errs, "\n"), r.raw)
					}
				}
				for name, p := range s.Save {
					v, ok := lookupJSON(got, p)
					if !ok {
						t.Fatalf("%s: save %s: no %s in %s", where, name, p, r.raw)
					}
					vars[name] = fmt.Sprint(v)
				}
			}
		})
	}
}

// stillRunning: the reply asks to poll again (1000115, or a 115 entry).
func stillRunning(r reply) bool {
	if r.Code == CodeTaskNotDispatched {
		return true
	}
	return bytes.Contains(r.Data, []byte(`"error_code":115`)) || bytes.Contains(r.Data, []byte(`"status":115`))
}

func lookupJSON(v any, p string) (any, bool) {
	for _, k := range strings.Split(p, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

var taskIDPattern = regexp.MustCompile(`^GSETASK:\d{14}:\d+$`)

// matchJSON compares got with want (see the suite's doc) and lists every
// difference by path.
func matchJSON(path string, want, got any) []string {
	at := path
	if at == "" {
		at = "(reply)"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %s", at, short(got))}
		}
		var errs []string
		more := w["$more"] == true
		keys := make([]string, 0, len(w))
		for k := range w {
			if k != "$more" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				errs = append(errs, fmt.Sprintf("%s.%s: missing", at, k))
				continue
			}
			errs = append(errs, matchJSON(path+"."+k, w[k], gv)...)
		}
		if !more {
			for k := range g {
				if _, ok := w[k]; !ok {
					errs = append(errs, fmt.Sprintf("%s.%s: not expected (%s)", at, k, short(g[k])))
				}
			}
		}
		return errs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements, got %s", at, len(w), short(got))}
		}
		var errs []string
		for i := range w {
			errs = append(errs, matchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return errs
	case string:
		ok := true
		switch {
		case w == "$any":
		case w == "$string":
			s, isStr := got.(string)
			ok = isStr && s != ""
		case w == "$number":
			_, ok = got.(float64)
		case w == "$taskid":
			s, _ := got.(string)
			ok = taskIDPattern.MatchString(s)
		case strings.HasPrefix(w, "$oneof:"):
			ok = false
			for _, alt := range strings.Split(w[len("$oneof:"):], "|") {
				ok = ok || fmt.Sprint(got) == alt
			}
		default:
			s, isStr := got.(string)
			ok = isStr && s == w
		}
		if !ok {
			return []string{fmt.Sprintf("%s: want %s, got %s", at, w, short(got))}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: want %v, got %s", at, want, short(got))}
	}
	return nil
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// TestMatchJSON: the suite's comparison finds every kind of difference.
func TestMatchJSON(t *testing.T) {
	parse := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		want, got string
		errs      int
	}{
		{`{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, 0},
		{`{"a":1}`, `{"a":1,"b":2}`, 1},              // an extra key
		{`{"a":1,"$more":true}`, `{"a":1,"b":2}`, 0}, // allowed
		{`{"a":1,"b":2}`, `{"a":1}`, 1},              // a missing key
		{`{"a":1}`, `{"a":"1"}`, 1},                  // a number is not its text
		{`{"a":"1"}`, `{"a":1}`, 1},
		{`[1,2]`, `[1,2,3]`, 1},
		{`[{"a":1}]`, `[{"a":2}]`, 1},
		{`{"a":null}`, `{"a":null}`, 0},
		{`{"a":null}`, `{"a":{}}`, 1},
		{`{"s":"$string","n":"$number","x":"$any","t":"$taskid","o":"$oneof:0|829"}`,
			`{"s":"v","n":2,"x":null,"t":"GSETASK:20260101000000:7","o":829}`, 0},
		{`{"s":"$string","n":"$number","t":"$taskid","o":"$oneof:0|829"}`,
			`{"s":"","n":"2","t":"GSETASK:XXXX","o":828}`, 4},
	}
	for _, tc := range cases {
		if errs := matchJSON("", parse(tc.want), parse(tc.got)); len(errs) != tc.errs {
			t.Errorf("want %s, got %s: %d differences %v, want %d", tc.want, tc.got, len(errs), errs, tc.errs)
		}
	}
}
