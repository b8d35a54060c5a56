package server

import (
	"encoding/json"
	"testing"
)

// TestLabelValuesNotStrings: the process-config manager sends
// meta.labels.bk_process_id as a number; numbers and booleans are kept as
// the text the client sent, and status queries answer them as strings.
func TestLabelValuesNotStrings(t *testing.T) {
	e := newEnv(t, testConfig())
	meta := map[string]any{"namespace": "GSEKIT_BIZ_1", "name": "nginx_1",
		"labels": json.RawMessage(`{"bk_process_name": "nginx", "bk_process_id": 42, "weight": 1.50, "canary": true}`)}
	host := map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}
	r := e.post(gseBase+"update_proc_info/", withAuth(map[string]any{"meta": meta, "hosts": []any{host}, "spec": specWire("nginx", "./start.sh")}))
	if !r.Result {
		t.Fatalf("update_proc_info refused: %d %s", r.Code, r.Message)
	}
	r = e.post(gseBase+"get_proc_status_v2/", withAuth(map[string]any{"meta": map[string]any{"namespace": "GSEKIT_BIZ_1", "name": "nginx_1"}, "hosts": []any{host}}))
	d := decode[procInfosReply](t, r.Data)
	if !r.Result || len(d.ProcInfos) != 1 {
		t.Fatalf("get_proc_status_v2: %d %s %s", r.Code, r.Message, r.Data)
	}
	want := map[string]string{"bk_process_name": "nginx", "bk_process_id": "42", "weight": "1.50", "canary": "true"}
	got := d.ProcInfos[0].Meta.Labels
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
}
