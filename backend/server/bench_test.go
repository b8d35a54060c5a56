package server

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

func benchPost(b *testing.B, e *env, path string, body []byte, wantCode int) {
	b.Helper()
	c := e.hs.Client()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Post(e.hs.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r struct{ Code int }
		if err := json.Unmarshal(raw, &r); err != nil || r.Code != wantCode {
			b.Fatalf("code %d, want %d: %s", r.Code, wantCode, raw)
		}
	}
}

// BenchmarkJobOperateProc: seed 002 posted over HTTP, through the gateway
// checks, to a task created on the engine.
func BenchmarkJobOperateProc(b *testing.B) {
	e := newEnv(b, testConfig())
	benchPost(b, e, "/api/c/compapi/v2/job/operate_proc/", readFile(b, "testdata/seed002_operate_proc.request.json"), 0)
}

// BenchmarkGetProcOperateResult: one result query of a finished task.
func BenchmarkGetProcOperateResult(b *testing.B) {
	e := newEnv(b, testConfig())
	r := e.post("/api/c/compapi/v2/gse/operate_proc/", readFile(b, "testdata/seed004_gse_operate_proc.request.json"))
	var d struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(r.Data, &d)
	e.pollGSE("get_proc_operate_result", d.TaskID)
	body, _ := json.Marshal(withAuth(map[string]any{"task_id": d.TaskID}))
	benchPost(b, e, "/api/c/compapi/v2/gse/get_proc_operate_result/", body, 0)
}

// BenchmarkRejectInvalid: a request with type errors refused with every field named.
func BenchmarkRejectInvalid(b *testing.B) {
	e := newEnv(b, testConfig())
	m := seedMap(b, "seed002_operate_proc")
	m["op_type"] = "x"
	m["process_infos"].([]any)[0].(map[string]any)["cpu_lmt"] = "y"
	body, _ := json.Marshal(m)
	benchPost(b, e, "/api/c/compapi/v2/job/operate_proc/", body, CodeArgument)
}
