package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"testing"
	"time"

	"gseproc/model"
)

var taskIDRe = regexp.MustCompile(`^GSETASK:\d{14}:\d+$`)

// envelopeKeys checks the reply has every documented envelope field.
func envelopeKeys(t *testing.T, r reply) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"result", "code", "message", "data", "permission", "request_id"} {
		if _, ok := m[k]; !ok {
			t.Errorf("reply lacks %q: %s", k, r.raw)
		}
	}
	if len(r.RequestID) != 32 || r.Header.Get("X-Request-Id") != r.RequestID {
		t.Errorf("request_id %q, header %q: want the same 32 hex digits", r.RequestID, r.Header.Get("X-Request-Id"))
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jobResultReply is get_proc_result's data.
type jobResultReply struct {
	Status int `json:"status"`
	Result map[string]struct {
		Content   json.RawMessage `json:"content"`
		ErrorCode *int            `json:"error_code"`
		ErrorMsg  *string         `json:"error_msg"`
	} `json:"result"`
}

// pollJob polls get_proc_result until every entry is final (bounded).
func (e *env) pollJob(path string, scope map[string]any, taskID string) jobResultReply {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		body := withAuth(map[string]any{"bk_gse_taskid": taskID})
		for k, v := range scope {
			body[k] = v
		}
		r := e.post(path, body)
		if !r.Result || r.Code != 0 {
			e.t.Fatalf("get_proc_result: %d %s", r.Code, r.Message)
		}
		d := decode[jobResultReply](e.t, r.Data)
		running := d.Status != 0
		for _, en := range d.Result {
			if en.ErrorCode == nil || en.ErrorMsg == nil {
				e.t.Fatalf("entry without error_code/error_msg: %s", r.Data)
			}
			running = running || *en.ErrorCode == model.CodeRunning
		}
		if !running {
			return d
		}
		if time.Now().After(deadline) || i > 2000 {
			e.t.Fatalf("task %s still running after 15s: %s", taskID, r.Data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type gseEntry struct {
	ErrorCode *int    `json:"error_code"`
	ErrorMsg  *string `json:"error_msg"`
	Content   *string `json:"content"`
}

// pollGSE polls get_proc_operate_result(_v2) until no entry is 115 and the
// top-level code is not 1000115 (bounded).
func (e *env) pollGSE(endpoint, taskID string) map[string]gseEntry {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		r := e.post("/api/c/compapi/v2/gse/"+endpoint+"/", withAuth(map[string]any{"task_id": taskID}))
		switch {
		case r.Code == CodeTaskNotDispatched:
			if r.Result {
				e.t.Fatal("1000115 with result true")
			}
		case r.Code != 0 || !r.Result:
			e.t.Fatalf("%s: %d %s", endpoint, r.Code, r.Message)
		default:
			m := decode[map[string]gseEntry](e.t, r.Data)
			running := false
			for k, en := range m {
				if en.ErrorCode == nil || en.ErrorMsg == nil || en.Content == nil {
					e.t.Fatalf("entry %s lacks error_code/error_msg/content: %s", k, r.Data)
				}
				running = running || *en.ErrorCode == model.CodeRunning
			}
			if !running {
				return m
			}
		}
		if time.Now().After(deadline) || i > 2000 {
			e.t.Fatalf("task %s still running after 15s", taskID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// controlContent checks content is GSE's control shape {"value":[{...}]}.
func controlContent(t *testing.T, content []byte, procName string) {
	t.Helper()
	var c struct {
		Value []struct {
			ProcName  string `json:"procName"`
			SetupPath string `json:"setupPath"`
			Result    string `json:"result"`
		} `json:"value"`
	}
	if err := json.Unmarshal(content, &c); err != nil || len(c.Value) != 1 {
		t.Fatalf("content %s: want {\"value\":[one item]} (%v)", content, err)
	}
	if c.Value[0].ProcName != procName || c.Value[0].Result == "" {
		t.Fatalf("content %s: want procName %q and a result", content, procName)
	}
}

// TestSeedExamplesVerbatim posts every document's example request exactly
// as written and checks the documented reply, then reads the task's
// results back with the documented keys and codes.
func TestSeedExamplesVerbatim(t *testing.T) {
	e := newEnv(t, testConfig())
	cases := []struct {
		seed     string
		path     string
		idField  string
		resultAt string         // result endpoint
		scope    map[string]any // for get_proc_result
		key      string
		procName string
		okCodes  []int
		gseV2Key string
	}{
		{seed: "seed000_operate_process", path: "/api/c/compapi/v3/job/operate_process/", idField: "bk_gse_taskid",
			resultAt: "/api/c/compapi/v3/job/get_proc_result/", scope: map[string]any{"bk_scope_type": "biz", "bk_scope_id": "1"},
			key: "/usr/local/xxx/gseagent:0:10.0.0.1", procName: "gseagent", okCodes: []int{0, model.CodeNotRunning}},
		{seed: "seed001_manage_proc", path: "/api/c/compapi/v2/job/manage_proc/", idField: "bk_gse_taskid",
			resultAt: "/api/c/compapi/v2/job/get_proc_result/", scope: map[string]any{"bk_biz_id": 1},
			key: "key_test:0:10.0.0.1", procName: "nginx", okCodes: []int{0, model.CodeAlreadyRegistered}},
		{seed: "seed002_operate_proc", path: "/api/c/compapi/v2/job/operate_proc/", idField: "bk_gse_taskid",
			resultAt: "/api/c/compapi/v2/job/get_proc_result/", scope: map[string]any{"bk_biz_id": 1},
			key: "/usr/local/xxx/gseagent:0:10.0.0.1", procName: "gseagent", okCodes: []int{0, model.CodeNotRunning}},
		{seed: "seed003_manage_proc_scope", path: "/api/c/compapi/v3/job/manage_proc/", idField: "bk_gse_taskid",
			resultAt: "/api/c/compapi/v3/job/get_proc_result/", scope: map[string]any{"bk_scope_type": "biz", "bk_scope_id": "1"},
			key: "key_test:0:10.0.0.1", procName: "nginx", okCodes: []int{0, model.CodeAlreadyRegistered}},
		{seed: "seed004_gse_operate_proc", path: "/api/c/compapi/v2/gse/operate_proc/", idField: "task_id",
			resultAt: "get_proc_operate_result", key: "1:2:10.0.0.1:gse:proc-test", gseV2Key: "1:10.0.0.1:gse:proc-test",
			procName: "proc-test", okCodes: []int{0, model.CodeAlreadyRunning}},
	}
	for _, tc := range cases {
		t.Run(tc.seed, func(t *testing.T) {
			e.t = t
			r := e.post(tc.path, readFile(t, "testdata/"+tc.seed+".request.json"))
			envelopeKeys(t, r)
			if !r.Result || r.Code != 0 {
				t.Fatalf("reply %d: %s", r.Status, r.raw)
			}
			// The documented reply's data has exactly these keys.
			var doc struct {
				Result bool           `json:"result"`
				Code   int            `json:"code"`
				Data   map[string]any `json:"data"`
			}
			if err := json.Unmarshal(readFile(t, "testdata/"+tc.seed+".response.json"), &doc); err != nil {
				t.Fatal(err)
			}
			got := decode[map[string]string](t, r.Data)
			if fmt.Sprint(keysOf(got)) != fmt.Sprint(keysOf(doc.Data)) || doc.Result != r.Result || doc.Code != r.Code {
				t.Fatalf("data keys %v, documented %v", keysOf(got), keysOf(doc.Data))
			}
			id := got[tc.idField]
			if !taskIDRe.MatchString(id) {
				t.Fatalf("%s %q is not GSETASK:yyyymmddHHMMSS:seq", tc.idField, id)
			}
			var code int
			var content []byte
			if tc.scope != nil {
				res := e.pollJob(tc.resultAt, tc.scope, id)
				en, ok := res.Result[tc.key]
				if !ok || len(res.Result) != 1 {
					t.Fatalf("result keys %v, want [%s]", keysOf(res.Result), tc.key)
				}
				code, content = *en.ErrorCode, en.Content
			} else {
				res := e.pollGSE(tc.resultAt, id)
				en, ok := res[tc.key]
				if !ok || len(res) != 1 {
					t.Fatalf("result keys %v, want [%s]", keysOf(res), tc.key)
				}
				code, content = *en.ErrorCode, []byte(*en.Content)
				v2 := e.pollGSE("get_proc_operate_result_v2", id)
				if _, ok := v2[tc.gseV2Key]; !ok || len(v2) != 1 {
					t.Fatalf("v2 result keys %v, want [%s]", keysOf(v2), tc.gseV2Key)
				}
			}
			okCode := false
			for _, c := range tc.okCodes {
				okCode = okCode || c == code
			}
			if !okCode {
				t.Fatalf("error_code %d, want one of %v (content %s)", code, tc.okCodes, content)
			}
			controlContent(t, content, tc.procName)
		})
	}
}
