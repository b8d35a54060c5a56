package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

const gseBase = "/api/c/compapi/v2/gse/"

func specWire(procName, start string) map[string]any {
	return map[string]any{
		"identity": map[string]any{"index_key": "", "proc_name": procName, "setup_path": "/data/gsetest/",
			"pid_path": "/data/gsetest/" + procName + ".pid", "config_path": "/data/gsetest/" + procName + ".conf",
			"log_path": "/data/gsetest/logs/", "user": "root"},
		"control": map[string]any{"start_cmd": start, "stop_cmd": "./stop.sh", "restart_cmd": "./restart.sh",
			"reload_cmd": "./reload.sh", "kill_cmd": "./kill.sh", "version_cmd": "./version.sh", "health_cmd": "./health.sh"},
		"resource":       map[string]any{"cpu": 30.0, "mem": 10.0},
		"monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 5, "op_timeout": 60},
	}
}

type procInfosReply struct {
	Count     *int       `json:"count"`
	ProcInfos []procInfo `json:"proc_infos"`
}

// TestProcInfoLifecycle: register (850 the second time), operate through
// the meta form, status, update, unregister, all synchronous per host.
func TestProcInfoLifecycle(t *testing.T) {
	e := newEnv(t, testConfig())
	meta := map[string]any{"namespace": "gse", "name": "proc-new", "labels": map[string]any{"proc_name": "proc-new"}}
	h0 := map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0, "bk_supplier_id": 0}
	h1 := map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1, "bk_supplier_id": 2}
	k0, k1 := "0:0:10.0.0.1:gse:proc-new", "1:2:10.0.0.1:gse:proc-new"

	reg := func(hosts ...any) map[string]gseEntry {
		t.Helper()
		r := e.post(gseBase+"register_proc_info/", withAuth(map[string]any{"meta": meta, "hosts": hosts, "spec": specWire("proc-new", "./start.sh")}))
		if !r.Result {
			t.Fatalf("register: %d %s", r.Code, r.Message)
		}
		return decode[map[string]gseEntry](t, r.Data)
	}
	got := reg(h0)
	if len(got) != 1 || *got[k0].ErrorCode != 0 || *got[k0].ErrorMsg != "success" || *got[k0].Content != "" {
		t.Fatalf("first register: %+v", got)
	}
	got = reg(h0, h1)
	if len(got) != 2 || *got[k0].ErrorCode != model.CodeAlreadyRegistered || *got[k1].ErrorCode != 0 {
		t.Fatalf("second register: want 850 for %s and 0 for %s, got %v", k0, k1, got)
	}
	if !strings.Contains(*got[k0].ErrorMsg, "already exists") {
		t.Fatalf("850 message %q", *got[k0].ErrorMsg)
	}

	// operate_proc (meta only) starts it on both hosts.
	r := e.post(gseBase+"operate_proc/", withAuth(map[string]any{"meta": meta, "op_type": 0, "hosts": []any{h0, h1}}))
	if !r.Result {
		t.Fatalf("operate_proc: %s", r.Message)
	}
	id := decode[map[string]string](t, r.Data)["task_id"]
	res := e.pollGSE("get_proc_operate_result", id)
	if len(res) != 2 || *res[k0].ErrorCode != 0 || *res[k1].ErrorCode != 0 {
		t.Fatalf("start results: %v", res)
	}
	controlContent(t, []byte(*res[k1].Content), "proc-new")

	// get_proc_status: running, hosted, with a pid; v1 keeps the supplier.
	r = e.post(gseBase+"get_proc_status/", withAuth(map[string]any{"meta": meta, "hosts": []any{h0, h1}}))
	st := decode[procInfosReply](t, r.Data)
	if !r.Result || len(st.ProcInfos) != 2 {
		t.Fatalf("get_proc_status: %s %s", r.Message, r.Data)
	}
	for _, p := range st.ProcInfos {
		if p.Status != procRunning || p.Flag != procRunning || !p.IsAuto || p.PID <= 0 || p.Meta.Name != "proc-new" {
			t.Fatalf("status entry %+v: want running, hosted, pid", p)
		}
	}
	if st.ProcInfos[1].Host.SupplierID != 2 {
		t.Fatalf("v1 status host %+v: want bk_supplier_id 2", st.ProcInfos[1].Host)
	}
	// The raw reply has exactly the documented fields.
	var rawInfos struct {
		ProcInfos []map[string]json.RawMessage `json:"proc_infos"`
	}
	_ = json.Unmarshal(r.Data, &rawInfos)
	for _, f := range []string{"meta", "host", "flag", "status", "isauto", "message", "pid", "version", "register_time",
		"last_start_time", "report_time", "cpu_usage", "mem_usage", "fd", "disk", "net"} {
		if _, ok := rawInfos.ProcInfos[0][f]; !ok {
			t.Errorf("proc_infos entry lacks %q", f)
		}
	}
	// v2 by agent_id_list.
	r = e.post(gseBase+"get_proc_status_v2/", withAuth(map[string]any{"meta": meta, "agent_id_list": []any{"1:10.0.0.1"}}))
	if st := decode[procInfosReply](t, r.Data); len(st.ProcInfos) != 1 || st.ProcInfos[0].AgentID != "1:10.0.0.1" {
		t.Fatalf("get_proc_status_v2: %s", r.Data)
	}

	// update_proc_info replaces the spec.
	r = e.post(gseBase+"update_proc_info/", withAuth(map[string]any{"meta": meta, "hosts": []any{h1}, "spec": specWire("proc-new", "./start.sh --fast")}))
	if up := decode[map[string]gseEntry](t, r.Data); !r.Result || *up[k1].ErrorCode != 0 {
		t.Fatalf("update: %s %s", r.Message, r.Data)
	}
	defs, _ := e.eng.Processes(context.Background(), backend.ProcQuery{Namespace: "gse", Name: "proc-new"})
	if len(defs) != 1 || defs[0].Process.Spec.Control.StartCmd != "./start.sh --fast" || len(defs[0].Hosts) != 2 {
		t.Fatalf("after update: %+v", defs)
	}

	// unregister_proc_info: the agent stops hosting (op 4), the host leaves the definition.
	r = e.post(gseBase+"unregister_proc_info/", withAuth(map[string]any{"meta": meta, "hosts": []any{h0}}))
	un := decode[map[string]gseEntry](t, r.Data)
	if !r.Result || len(un) != 1 || *un[k0].ErrorCode != 0 {
		t.Fatalf("unregister: %s %s", r.Message, r.Data)
	}
	defs, _ = e.eng.Processes(context.Background(), backend.ProcQuery{Namespace: "gse", Name: "proc-new"})
	if len(defs) != 1 || len(defs[0].Hosts) != 1 || defs[0].Hosts[0].CloudID != 1 {
		t.Fatalf("after unregistering one host: %+v", defs)
	}
	// operate_proc on the host it left is refused.
	r = e.post(gseBase+"operate_proc/", withAuth(map[string]any{"meta": meta, "op_type": 2, "hosts": []any{h0}}))
	if r.Result || !strings.Contains(r.Message, "hosts[0]") {
		t.Fatalf("operate on an unregistered host: %v %s", r.Result, r.Message)
	}
	r = e.post(gseBase+"unregister_proc_info/", withAuth(map[string]any{"meta": meta, "hosts": []any{h0, h1}}))
	un = decode[map[string]gseEntry](t, r.Data)
	if len(un) != 2 || *un[k0].ErrorCode != 0 || *un[k1].ErrorCode != 0 {
		t.Fatalf("unregister both: %s", r.Data)
	}
	if defs, _ = e.eng.Processes(context.Background(), backend.ProcQuery{Namespace: "gse", Name: "proc-new"}); len(defs) != 0 {
		t.Fatalf("definition still there after its last host left: %+v", defs)
	}
}

// TestOperateV2AndMulti posts the reference's operate_proc_v2 and
// operate_proc_multi examples and reads the results by v2 key.
func TestOperateV2AndMulti(t *testing.T) {
	e := newEnv(t, testConfig())
	el := map[string]any{
		"meta":    map[string]any{"namespace": "gse", "name": "proc-test-1", "labels": map[string]any{"proc_name": "proc-test-1"}},
		"op_type": 0,
		"hosts":   []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1}},
		"spec": map[string]any{
			"identity": map[string]any{"index_key": "", "proc_name": "proc-test-1", "setup_path": "/data/gsetest/",
				"pid_path": "/data/gsetest/proc-test-1.pid", "config_path": "/data/gsetest/proc-test-1.conf",
				"log_path": "/data/gsetest/logs/", "user": "root"},
			"control": map[string]any{"start_cmd": "./start.sh", "stop_cmd": "./stop.sh", "restart_cmd": "./restart.sh",
				"reload_cmd": "./reload.sh", "kill_cmd": "./kill.sh", "version_cmd": "./version.sh", "health_cmd": "./health.sh"},
			"alive_monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 5, "stop_check_secs": 5,
				"start_retries": 3, "start_interval": 20, "crotab_rule": ""},
			"warn_report_policy": map[string]any{"report_id": 0},
			"configmap":          []any{map[string]any{"path": "", "md5": ""}},
		},
	}
	r := e.post(gseBase+"operate_proc_multi/", withAuth(map[string]any{"proc_operate_req": []any{el}}))
	if !r.Result || r.Message != "success" {
		t.Fatalf("multi: %s", r.Message)
	}
	id := decode[map[string]string](t, r.Data)["task_id"]
	res := e.pollGSE("get_proc_operate_result_v2", id)
	en, ok := res["1:10.0.0.1:gse:proc-test-1"]
	if !ok || len(res) != 1 || (*en.ErrorCode != 0 && *en.ErrorCode != model.CodeAlreadyRunning) {
		t.Fatalf("multi result: %v", res)
	}
	el["op_type"] = 2
	r = e.post(gseBase+"operate_proc_v2/", withAuth(el))
	if !r.Result {
		t.Fatalf("v2: %s", r.Message)
	}
	id = decode[map[string]string](t, r.Data)["task_id"]
	res = e.pollGSE("get_proc_operate_result_v2", id)
	en = res["1:10.0.0.1:gse:proc-test-1"]
	if en.ErrorCode == nil || *en.ErrorCode != 0 {
		t.Fatalf("status result: %v", res)
	}
	// op 2 content is the status shape.
	var sc struct {
		IP      string `json:"ip"`
		Process []struct {
			ProcName string `json:"procname"`
			Instance []struct {
				PID    int  `json:"pid"`
				IsAuto bool `json:"isAuto"`
			} `json:"instance"`
		} `json:"process"`
	}
	if err := json.Unmarshal([]byte(*en.Content), &sc); err != nil || sc.IP != "10.0.0.1" || len(sc.Process) != 1 ||
		sc.Process[0].ProcName != "proc-test-1" || len(sc.Process[0].Instance) != 1 || sc.Process[0].Instance[0].PID <= 0 {
		t.Fatalf("status content %s (%v)", *en.Content, err)
	}
	// Several elements, same op: one task over all of them.
	el2 := map[string]any{}
	b, _ := json.Marshal(el)
	_ = json.Unmarshal(b, &el2)
	el2["hosts"] = []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}}
	r = e.post(gseBase+"operate_proc_multi/", withAuth(map[string]any{"proc_operate_req": []any{el, el2}}))
	if !r.Result {
		t.Fatalf("multi of 2: %s", r.Message)
	}
	id = decode[map[string]string](t, r.Data)["task_id"]
	if res = e.pollGSE("get_proc_operate_result_v2", id); len(res) != 2 {
		t.Fatalf("multi of 2 results: %v", keysOf(res))
	}
}

// TestSyncProcStatus pages through a namespace.
func TestSyncProcStatus(t *testing.T) {
	e := newEnv(t, testConfig())
	all := map[string]bool{}
	total := -1
	for start := 0; ; start += 7 {
		r := e.post(gseBase+"sync_proc_status/", withAuth(map[string]any{"meta": map[string]any{"namespace": "gse"}, "page": map[string]any{"start": start, "limit": 7}}))
		d := decode[procInfosReply](t, r.Data)
		if !r.Result || d.Count == nil {
			t.Fatalf("sync: %s %s", r.Message, r.Data)
		}
		if total >= 0 && *d.Count != total {
			t.Fatalf("count changed %d -> %d", total, *d.Count)
		}
		total = *d.Count
		for _, p := range d.ProcInfos {
			k := p.Host.Model().AgentID() + ":" + p.Meta.Namespace + ":" + p.Meta.Name
			if all[k] || p.Meta.Namespace != "gse" {
				t.Fatalf("entry %s repeated or outside gse", k)
			}
			all[k] = true
		}
		if len(d.ProcInfos) < 7 {
			break
		}
		if start > 10000 {
			t.Fatal("paging does not end")
		}
	}
	if total < 6 || len(all) != total {
		t.Fatalf("%d entries paged, count %d (want >= 6: proc-test and proc-test-1 on 3 demo hosts)", len(all), total)
	}
	for _, k := range []string{"0:10.0.0.1:gse:proc-test", "1:10.0.0.1:gse:proc-test", "0:127.0.0.1:gse:proc-test-1"} {
		if !all[k] {
			t.Errorf("sync misses %s", k)
		}
	}
}

// TestGetWithQueryAndBody: GET with query parameters or a JSON body, and
// the path without the trailing slash.
func TestGetWithQueryAndBody(t *testing.T) {
	e := newEnv(t, testConfig())
	r := e.post("/api/c/compapi/v2/gse/operate_proc", readFile(t, "testdata/seed004_gse_operate_proc.request.json"))
	id := decode[map[string]string](t, r.Data)["task_id"]
	e.pollGSE("get_proc_operate_result", id)
	q := url.Values{"task_id": {id}, "bk_app_code": {"esb_test"}, "bk_app_secret": {"xxx"}, "bk_username": {"admin"}}
	r = e.do(http.MethodGet, gseBase+"get_proc_operate_result_v2/?"+q.Encode(), nil, nil)
	if !r.Result {
		t.Fatalf("GET with query: %s", r.Message)
	}
	if m := decode[map[string]gseEntry](t, r.Data); m["1:10.0.0.1:gse:proc-test"].ErrorCode == nil {
		t.Fatalf("GET with query: %s", r.Data)
	}
	b, _ := json.Marshal(withAuth(map[string]any{"task_id": id}))
	if r = e.do(http.MethodGet, gseBase+"get_proc_operate_result/", b, nil); !r.Result {
		t.Fatalf("GET with a JSON body: %s", r.Message)
	}
	// JOB get_proc_result by query, scope given as numbers.
	r = e.post("/api/c/compapi/v2/job/operate_proc/", readFile(t, "testdata/seed002_operate_proc.request.json"))
	jid := decode[map[string]string](t, r.Data)["bk_gse_taskid"]
	q = url.Values{"bk_gse_taskid": {jid}, "bk_biz_id": {"1"}, "bk_app_code": {"esb_test"}, "bk_app_secret": {"xxx"}, "bk_token": {"t"}}
	if r = e.do(http.MethodGet, "/api/c/compapi/v2/job/get_proc_result?"+q.Encode(), nil, nil); !r.Result {
		t.Fatalf("GET get_proc_result: %s", r.Message)
	}
	// The task is not visible from another biz.
	q.Set("bk_biz_id", "2")
	q.Set("bk_app_code", "narrow")
	q.Set("bk_app_secret", "pw")
	q.Set("bk_username", "alice")
	if r = e.do(http.MethodGet, "/api/c/compapi/v2/job/get_proc_result?"+q.Encode(), nil, nil); r.Result || !strings.Contains(r.Message, "no task") {
		t.Fatalf("task of biz 1 read from biz 2: %v %s", r.Result, r.Message)
	}
}

// TestRunningCodes: while hosts are slow, entries are 115 (and the task
// may be 1000115 before dispatch); then they become final.
func TestRunningCodes(t *testing.T) {
	sc := quietSim()
	sc.LatencyMedian = config.Duration(400 * time.Millisecond)
	sc.LatencyP99 = config.Duration(600 * time.Millisecond)
	e := newEnvSim(t, testConfig(), sc)
	r := e.post("/api/c/compapi/v2/gse/operate_proc/", readFile(t, "testdata/seed004_gse_operate_proc.request.json"))
	id := decode[map[string]string](t, r.Data)["task_id"]
	r = e.post(gseBase+"get_proc_operate_result/", withAuth(map[string]any{"task_id": id}))
	switch r.Code {
	case CodeTaskNotDispatched:
		if r.Result || !strings.Contains(r.Message, "poll again") {
			t.Fatalf("1000115 reply: %v %s", r.Result, r.Message)
		}
	case 0:
		m := decode[map[string]gseEntry](t, r.Data)
		en := m["1:2:10.0.0.1:gse:proc-test"]
		if en.ErrorCode == nil || *en.ErrorCode != model.CodeRunning || *en.ErrorMsg != "handling" || *en.Content != "" {
			t.Fatalf("entry while the host is slow: %s", r.Data)
		}
	default:
		t.Fatalf("code %d %s", r.Code, r.Message)
	}
	// JOB form: data.status 115 while running.
	jr := e.post("/api/c/compapi/v2/job/operate_proc/", readFile(t, "testdata/seed002_operate_proc.request.json"))
	jid := decode[map[string]string](t, jr.Data)["bk_gse_taskid"]
	jr = e.post("/api/c/compapi/v2/job/get_proc_result/", withAuth(map[string]any{"bk_biz_id": 1, "bk_gse_taskid": jid}))
	d := decode[jobResultReply](t, jr.Data)
	if !jr.Result || jr.Code != 0 || (d.Status != model.CodeRunning && d.Status != model.CodeTaskNotDispatched) {
		t.Fatalf("get_proc_result while running: %s", jr.raw)
	}
	res := e.pollGSE("get_proc_operate_result", id)
	if en := res["1:2:10.0.0.1:gse:proc-test"]; *en.ErrorCode == model.CodeRunning {
		t.Fatal("still 115")
	}
	if final := e.pollJob("/api/c/compapi/v2/job/get_proc_result/", map[string]any{"bk_biz_id": 1}, jid); final.Status != 0 {
		t.Fatalf("final status %d", final.Status)
	}
}

func TestDispatched(t *testing.T) {
	pending := model.Result{State: model.StatePending}
	running := model.Result{State: model.StateRunning}
	cases := []struct {
		name string
		tv   backend.TaskView
		want bool
	}{
		{"pending task", backend.TaskView{Task: model.Task{Status: model.TaskPending, Targets: 2}, Results: []model.Result{pending, pending}}, false},
		{"running, nothing claimed", backend.TaskView{Task: model.Task{Status: model.TaskRunning, Targets: 2}, Results: []model.Result{pending, pending}}, false},
		{"one running", backend.TaskView{Task: model.Task{Status: model.TaskRunning, Targets: 2}, Results: []model.Result{pending, running}}, true},
		{"cancelled before dispatch", backend.TaskView{Task: model.Task{Status: model.TaskCanceled, Targets: 1}, Results: []model.Result{pending}}, true},
		{"done", backend.TaskView{Task: model.Task{Status: model.TaskDone}}, true},
	}
	for _, tc := range cases {
		if got := dispatched(tc.tv); got != tc.want {
			t.Errorf("%s: dispatched %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGSE2Paths: the bk-gse /api/v2/proc/ spellings with agent_id_list.
func TestGSE2Paths(t *testing.T) {
	e := newEnv(t, testConfig())
	body := withAuth(map[string]any{
		"meta":          map[string]any{"namespace": "gse", "name": "proc-test"},
		"op_type":       2,
		"agent_id_list": []any{"0:10.0.0.1", "0:127.0.0.1"},
		"spec":          specWire("proc-test", "./start.sh"),
	})
	r := e.post("/api/v2/proc/operate_proc_v2", body)
	if !r.Result {
		t.Fatalf("operate_proc_v2: %s", r.Message)
	}
	id := decode[map[string]string](t, r.Data)["task_id"]
	deadline := time.Now().Add(15 * time.Second)
	for {
		r = e.post("/api/v2/proc/get_proc_operate_result_v2", withAuth(map[string]any{"task_id": id}))
		m := decode[map[string]gseEntry](t, r.Data)
		if r.Code == 0 && len(m) == 2 && *m["0:10.0.0.1:gse:proc-test"].ErrorCode == 0 && *m["0:127.0.0.1:gse:proc-test"].ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final v2 results within 15 s: %s", r.raw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSupplierKeysFromAnotherServer: the bk_supplier_id of a v1 request is
// stored with the task, so a second server on the same engine and store
// (or this one after a restart) answers the same v1 result keys.
func TestSupplierKeysFromAnotherServer(t *testing.T) {
	e := newEnv(t, testConfig())
	meta := map[string]any{"namespace": "gse", "name": "proc-test"}
	hosts := []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1, "bk_supplier_id": 2},
		map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}}
	r := e.post(gseBase+"operate_proc/", withAuth(map[string]any{"meta": meta, "op_type": 2, "hosts": hosts}))
	if !r.Result {
		t.Fatalf("operate_proc: %d %s", r.Code, r.Message)
	}
	id := decode[map[string]string](t, r.Data)["task_id"]
	want := []string{"1:2:10.0.0.1:gse:proc-test", "0:0:10.0.0.1:gse:proc-test"}
	first := e.pollGSE("get_proc_operate_result", id)

	srv2 := New(e.eng, testConfig(), nil)
	hs2 := httptest.NewServer(srv2.Handler())
	t.Cleanup(func() { hs2.Close(); _ = srv2.Close() })
	e2 := &env{t: t, srv: srv2, hs: hs2, eng: e.eng, fleet: e.fleet}
	second := e2.pollGSE("get_proc_operate_result", id)
	for _, k := range want {
		if first[k].ErrorCode == nil || second[k].ErrorCode == nil || *first[k].ErrorCode != *second[k].ErrorCode {
			t.Fatalf("key %s: first server %v, second %v", k, first, second)
		}
	}
	if len(first) != 2 || len(second) != 2 {
		t.Fatalf("keys: first server %v, second %v", first, second)
	}
	tv, err := e.eng.Task(context.Background(), id)
	if err != nil || tv.Task.Suppliers["1:10.0.0.1"] != 2 || len(tv.Task.Suppliers) != 1 {
		t.Fatalf("stored suppliers %v (%v)", tv.Task.Suppliers, err)
	}
}
