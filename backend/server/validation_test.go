package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestValidation: bad input gets result false, a documented code and a
// message naming every offending field; nothing is dispatched.
func TestValidation(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHosts = 5
	cfg.MaxBodyBytes = 16 << 10
	e := newEnv(t, cfg)
	const (
		jobOp     = "/api/c/compapi/v2/job/operate_proc/"
		jobManage = "/api/c/compapi/v3/job/manage_proc/"
		jobResult = "/api/c/compapi/v2/job/get_proc_result/"
		gseOp     = "/api/c/compapi/v2/gse/operate_proc/"
		gseV2     = "/api/c/compapi/v2/gse/operate_proc_v2/"
		gseMulti  = "/api/c/compapi/v2/gse/operate_proc_multi/"
		gseResult = "/api/c/compapi/v2/gse/get_proc_operate_result/"
		gseSync   = "/api/c/compapi/v2/gse/sync_proc_status/"
		gseStatus = "/api/c/compapi/v2/gse/get_proc_status/"
		gseReg    = "/api/c/compapi/v2/gse/register_proc_info/"
	)
	seed002 := func(edit func(m map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			m := seedMap(t, "seed002_operate_proc")
			edit(m)
			b, _ := json.Marshal(m)
			return b
		}
	}
	info0 := func(m map[string]any) map[string]any { return m["process_infos"].([]any)[0].(map[string]any) }
	seed004 := func(edit func(m map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			m := withAuth(seedMap(t, "seed004_gse_operate_proc"))
			edit(m)
			b, _ := json.Marshal(m)
			return b
		}
	}
	raw := func(s string) func(t *testing.T) []byte { return func(*testing.T) []byte { return []byte(s) } }
	js := func(m map[string]any) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { b, _ := json.Marshal(withAuth(m)); return b }
	}
	hosts := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"ip": fmt.Sprintf("10.0.0.%d", i+1), "bk_cloud_id": 0}
		}
		return out
	}
	v2spec := func() map[string]any {
		return map[string]any{
			"identity":             map[string]any{"proc_name": "p", "setup_path": "/data/p", "pid_path": "/data/p/p.pid", "user": "root"},
			"control":              map[string]any{"start_cmd": "./start.sh", "stop_cmd": "./stop.sh"},
			"alive_monitor_policy": map[string]any{"auto_type": 1},
		}
	}

	cases := []struct {
		name   string
		path   string
		body   func(t *testing.T) []byte
		code   int
		fields []string // every one must be named in the message
	}{
		{"malformed JSON", jobOp, raw(`{"bk_biz_id": 1, "op_type": `), CodeArgument, []string{"malformed JSON"}},
		{"trailing garbage", jobOp, raw(`{"bk_biz_id": 1} {}`), CodeArgument, []string{"more than one value"}},
		{"not an object", jobOp, raw(`[1, 2]`), CodeArgument, []string{"want a JSON object, got an array"}},
		{"empty body", jobOp, raw(``), CodeArgument, []string{"empty request"}},
		{"wrong types everywhere", jobOp, seed002(func(m map[string]any) {
			m["op_type"] = "stop"
			info0(m)["cpu_lmt"] = "high"
			info0(m)["ip_list"] = []any{map[string]any{"bk_cloud_id": "0", "ip": 1}}
			info0(m)["setup_path"] = []any{"/a"}
		}), CodeArgument, []string{"op_type: want an integer, got string \"stop\"", "process_infos[0].cpu_lmt: want a number",
			"process_infos[0].ip_list[0].bk_cloud_id: want an integer", "process_infos[0].ip_list[0].ip: want a string",
			"process_infos[0].setup_path: want a string, got an array"}},
		{"fractional op_type", jobOp, seed002(func(m map[string]any) { m["op_type"] = 1.5 }), CodeArgument, []string{"op_type: want an integer, got 1.5"}},
		{"process_infos not an array", jobOp, seed002(func(m map[string]any) { m["process_infos"] = map[string]any{} }), CodeArgument,
			[]string{"process_infos: want an array, got an object"}},
		{"missing fields", jobOp, seed002(func(m map[string]any) {
			delete(m, "op_type")
			delete(info0(m), "setup_path")
			delete(info0(m), "pid_path")
			delete(info0(m), "ip_list")
		}), CodeIllegalParam, []string{"op_type: required", "process_infos[0].setup_path: required", "process_infos[0].pid_path: required",
			"process_infos[0].ip_list: required"}},
		{"out of range", jobOp, seed002(func(m map[string]any) {
			info0(m)["cpu_lmt"] = 150
			info0(m)["mem_lmt"] = -1
			info0(m)["cmd_shell_ext"] = "py"
			info0(m)["ip_list"] = []any{map[string]any{"bk_cloud_id": -1, "ip": "10.0.0.300"}}
		}), CodeIllegalParam, []string{"process_infos[0].cpu_lmt", "process_infos[0].mem_lmt", "process_infos[0].cmd_shell_ext",
			"process_infos[0].ip_list[0].ip", "process_infos[0].ip_list[0].bk_cloud_id"}},
		{"unknown op_type", jobOp, seed002(func(m map[string]any) { m["op_type"] = 5 }), CodeIllegalParam, []string{"op_type: op_type 5 is not one of"}},
		{"relative path", jobOp, seed002(func(m map[string]any) { info0(m)["setup_path"] = "usr/local" }), CodeIllegalParam,
			[]string{"process_infos[0].setup_path", "not an absolute path"}},
		{"same value_key, different fields", jobOp, seed002(func(m map[string]any) {
			a := info0(m)
			b := map[string]any{}
			for k, v := range a {
				b[k] = v
			}
			b["account"] = "nobody"
			m["process_infos"] = []any{a, b}
		}), CodeIllegalParam, []string{"process_infos[1]: same process", "/usr/local/xxx/gseagent"}},
		{"no process_infos", jobOp, seed002(func(m map[string]any) { m["process_infos"] = []any{} }), CodeIllegalParam, []string{"process_infos: required"}},
		{"no scope", jobOp, seed002(func(m map[string]any) { delete(m, "bk_biz_id") }), CodeIllegalParam, []string{"bk_biz_id: required"}},
		{"bad biz id", jobOp, seed002(func(m map[string]any) { m["bk_biz_id"] = 0 }), CodeIllegalParam, []string{"bk_biz_id: 0 must be > 0"}},
		{"bad scope type", jobOp, seed002(func(m map[string]any) {
			delete(m, "bk_biz_id")
			m["bk_scope_type"], m["bk_scope_id"] = "team", "x"
		}), CodeIllegalParam, []string{"bk_scope_type", "bk_scope_id"}},
		{"too many hosts", jobOp, seed002(func(m map[string]any) { info0(m)["ip_list"] = hosts(6) }), CodeIllegalParam,
			[]string{"process_infos: 6 hosts in one request, more than the limit of 5"}},
		{"oversized body", jobOp, seed002(func(m map[string]any) { info0(m)["start_cmd"] = strings.Repeat("x", 20<<10) }), CodeArgument,
			[]string{"larger than the limit of 16384 bytes"}},
		{"manage_proc op 3", jobManage, func(t *testing.T) []byte {
			m := seedMap(t, "seed003_manage_proc_scope")
			m["op_type"] = 3
			info0(m)["proc_owner"] = ""
			b, _ := json.Marshal(m)
			return b
		}, CodeIllegalParam, []string{"op_type: 3 is not one of 1 register, 2 unregister", "process_infos[0].proc_owner: required"}},
		{"get_proc_result bad id", jobResult, js(map[string]any{"bk_biz_id": 1, "bk_gse_taskid": "TASK-1"}), CodeIllegalParam,
			[]string{"bk_gse_taskid", "GSETASK:YYYYMMDDHHMMSS:seq"}},
		{"get_proc_result unknown task", jobResult, js(map[string]any{"bk_biz_id": 1, "bk_gse_taskid": "GSETASK:20200101000000:424242"}), CodeIllegalParam,
			[]string{"bk_gse_taskid: no task GSETASK:20200101000000:424242 in biz 1"}},
		{"meta: missing name, bad op, no hosts", gseOp, seed004(func(m map[string]any) {
			delete(m["meta"].(map[string]any), "name")
			m["op_type"] = 6
			m["hosts"] = []any{}
		}), CodeArgument, []string{"meta.name: required", "op_type: op_type 6 is not one of", "hosts: required"}},
		{"meta: bad host fields", gseOp, seed004(func(m map[string]any) {
			m["hosts"] = []any{map[string]any{"ip": "x", "bk_cloud_id": 1, "bk_supplier_id": -2}}
		}), CodeArgument, []string{"hosts[0].ip", "hosts[0].bk_supplier_id"}},
		{"meta: labels of the wrong type", gseOp, seed004(func(m map[string]any) {
			m["meta"].(map[string]any)["labels"] = map[string]any{"proc_name": map[string]any{"x": 1}, "ok": 7, "n": nil, "l": []any{"a"}}
		}), CodeArgument, []string{"meta.labels[proc_name]: want a string, number or boolean, got an object",
			"meta.labels[n]: want a string, number or boolean, got null", "meta.labels[l]: want a string, number or boolean, got an array"}},
		{"meta: labels not an object", gseOp, seed004(func(m map[string]any) {
			m["meta"].(map[string]any)["labels"] = []any{"a"}
		}), CodeArgument, []string{"meta.labels: want an object of labels, got an array"}},
		{"meta: not registered", gseOp, seed004(func(m map[string]any) { m["meta"].(map[string]any)["name"] = "ghost" }), CodeArgument,
			[]string{"gse:ghost is not registered"}},
		{"meta: host without the process", gseOp, seed004(func(m map[string]any) {
			m["hosts"] = []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1, "bk_supplier_id": 2},
				map[string]any{"ip": "10.9.9.9", "bk_cloud_id": 2, "bk_supplier_id": 0}}
		}), CodeArgument, []string{"hosts[1]: process gse:proc-test is not registered on host 2:10.9.9.9"}},
		{"meta: too many hosts", gseOp, seed004(func(m map[string]any) { m["hosts"] = hosts(6) }), CodeArgument, []string{"hosts: 6 hosts"}},
		{"v2: no spec", gseV2, seed004(func(m map[string]any) {}), CodeArgument, []string{"spec: required"}},
		{"v2: bad spec", gseV2, seed004(func(m map[string]any) {
			s := v2spec()
			s["identity"].(map[string]any)["pid_path"] = "rel.pid"
			s["resource"] = map[string]any{"cpu": 101, "mem": 10}
			s["alive_monitor_policy"] = map[string]any{"auto_type": 9}
			m["spec"] = s
		}), CodeArgument, []string{"spec.identity.pid_path", "spec.resource.cpu", "spec.alive_monitor_policy.auto_type"}},
		{"multi: empty", gseMulti, js(map[string]any{"proc_operate_req": []any{}}), CodeArgument, []string{"proc_operate_req: required"}},
		{"multi: mixed ops and bad element", gseMulti, js(map[string]any{"proc_operate_req": []any{
			map[string]any{"meta": map[string]any{"namespace": "gse", "name": "a"}, "op_type": 0, "hosts": hosts(1), "spec": v2spec()},
			map[string]any{"meta": map[string]any{"namespace": "gse", "name": "b"}, "op_type": 1, "hosts": hosts(1), "spec": v2spec()},
			map[string]any{"meta": map[string]any{"namespace": "gse"}, "op_type": 0, "hosts": []any{}},
		}}), CodeArgument, []string{"proc_operate_req[1].op_type: 1 differs", "proc_operate_req[2].meta.name: required",
			"proc_operate_req[2].hosts: required", "proc_operate_req[2].spec: required"}},
		{"result: bad task id", gseResult, js(map[string]any{"task_id": "GSETASK:XXXXXXXXXX"}), CodeArgument, []string{"task_id", "want GSETASK:YYYYMMDDHHMMSS:seq"}},
		{"result: no task id", gseResult, js(map[string]any{}), CodeArgument, []string{"task_id: required"}},
		{"result: unknown task", gseResult, js(map[string]any{"task_id": "GSETASK:20200101000000:99"}), CodeArgument, []string{"task_id: no task"}},
		{"sync: page out of range", gseSync, js(map[string]any{"meta": map[string]any{"namespace": "gse"}, "page": map[string]any{"start": -1, "limit": 5000}}),
			CodeArgument, []string{"page.start", "page.limit: 5000 is out of range [1,1000]"}},
		{"status: no namespace", gseStatus, js(map[string]any{"meta": map[string]any{}, "hosts": hosts(1)}), CodeArgument, []string{"meta.namespace: required"}},
		{"register: no spec", gseReg, js(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "x"}, "hosts": hosts(1)}), CodeArgument,
			[]string{"spec: required"}},
		{"agent_id_list bad", gseStatus, js(map[string]any{"meta": map[string]any{"namespace": "gse"}, "agent_id_list": []any{"10.0.0.1"}}), CodeArgument,
			[]string{"agent_id_list[0]"}},
	}
	before := e.taskCount()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			r := e.do(http.MethodPost, tc.path, tc.body(t), nil)
			if r.Result || r.Code != tc.code || r.Status != http.StatusOK {
				t.Fatalf("got result %v code %d status %d: %s\nwant code %d in a 200 reply", r.Result, r.Code, r.Status, r.Message, tc.code)
			}
			for _, f := range tc.fields {
				if !strings.Contains(r.Message, f) {
					t.Errorf("message does not name %q:\n%s", f, r.Message)
				}
			}
		})
	}
	e.t = t
	if after := e.taskCount(); after != before {
		t.Fatalf("%d tasks were created by invalid requests", after-before)
	}
}

// TestLenientInput: what real clients send and the documents allow.
func TestLenientInput(t *testing.T) {
	e := newEnv(t, testConfig())
	cases := []struct {
		name string
		edit func(m map[string]any)
	}{
		{"unknown fields ignored", func(m map[string]any) {
			m["nodeman_spec"] = map[string]any{"x": []any{1, 2}}
			m["process_infos"].([]any)[0].(map[string]any)["future_field"] = true
		}},
		{"bk_biz_id as a string", func(m map[string]any) { m["bk_biz_id"] = "1" }},
		{"bk_scope_id as a number", func(m map[string]any) {
			delete(m, "bk_biz_id")
			m["bk_scope_type"], m["bk_scope_id"] = "biz", 1
		}},
		{"bk_username instead of bk_token", func(m map[string]any) {
			delete(m, "bk_token")
			m["bk_username"] = "admin"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			m := seedMap(t, "seed002_operate_proc")
			tc.edit(m)
			if r := e.post("/api/c/compapi/v3/job/operate_proc", m); !r.Result {
				t.Fatalf("refused: %d %s", r.Code, r.Message)
			}
		})
	}
}
