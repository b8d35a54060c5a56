package server

import (
	"testing"

	"gseproc/model"
)

// nodemanOutcome is how a client that knows only GSE's codes reads a
// per-host error_code (the node manager's table, gse-api.md §7.1): 0 and
// 828 success, 115 pending, anything else failed.
func nodemanOutcome(code int) string {
	switch code {
	case model.CodeSuccess, model.CodeAlreadyRunning:
		return "success"
	case model.CodeRunning:
		return "pending"
	}
	return "failed"
}

// TestOfflineHostAnswers116: real GSE answers 115 for an offline host
// until the caller gives up; gseproc answers 116 at the host's deadline
// (op_timeout). Every field a GSE-codes-only client reads says the host
// failed and the task is over: the GSE and JOB per-host error_code is 116
// (not 0, 115 or 828), the envelope is a success with code 0 (no retry of
// the call), JOB's data.status is 0 (done), and get_task_state lists it as
// timed out with state timeout.
func TestOfflineHostAnswers116(t *testing.T) {
	e := newEnv(t, testConfig())
	off := model.Host{IP: "10.0.0.1", CloudID: 1}
	e.fleet.SetOffline(off, true)
	spec := specWire("proc-test", "./start.sh")
	spec["alive_monitor_policy"] = map[string]any{"op_timeout": 1}
	delete(spec, "monitor_policy")
	r := e.post(rootGSE2+"proc/operate_proc_v2", withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "proc-test"},
		"op_type": 2, "agent_id_list": []string{"1:10.0.0.1", "0:10.0.0.1"}, "spec": spec}))
	if !r.Result {
		t.Fatalf("operate_proc_v2: %d %s", r.Code, r.Message)
	}
	id := decode[map[string]string](t, r.Data)["task_id"]
	res := e.pollGSE("get_proc_operate_result_v2", id)
	en := res["1:10.0.0.1:gse:proc-test"]
	if en.ErrorCode == nil || *en.ErrorCode != model.CodeTimeout || *en.ErrorMsg == "" {
		t.Fatalf("offline host: %+v, want 116 with a message", res)
	}
	if got := nodemanOutcome(*en.ErrorCode); got != "failed" {
		t.Fatalf("a GSE-codes-only client reads 116 as %s", got)
	}
	if ok := res["0:10.0.0.1:gse:proc-test"]; ok.ErrorCode == nil || nodemanOutcome(*ok.ErrorCode) != "success" {
		t.Fatalf("online host: %+v", ok)
	}
	r = e.post(rootGSE2+"task/get_task_state", withAuth(map[string]any{"task_id": id}))
	ts := decode[struct {
		Result struct {
			State   string   `json:"state"`
			Timeout []string `json:"timeout_agents"`
		} `json:"result"`
	}](t, r.Data)
	if !r.Result || ts.Result.State != "timeout" || len(ts.Result.Timeout) != 1 || ts.Result.Timeout[0] != "1:10.0.0.1" {
		t.Fatalf("get_task_state: %s", r.Data)
	}

	// The JOB form: the same host through operate_proc, read by get_proc_result.
	m := seedMap(t, "seed002_operate_proc")
	info := m["process_infos"].([]any)[0].(map[string]any)
	info["ip_list"] = []any{map[string]any{"bk_cloud_id": 1, "ip": "10.0.0.1"}}
	info["op_timeout"], m["op_type"] = 1, 2
	r = e.post(rootJobV3+"operate_proc/", m)
	if !r.Result {
		t.Fatalf("operate_proc: %d %s", r.Code, r.Message)
	}
	job := e.pollJob(rootJobV3+"get_proc_result/", map[string]any{"bk_biz_id": 1}, decode[map[string]string](t, r.Data)["bk_gse_taskid"])
	je, ok := job.Result["/usr/local/xxx/gseagent:1:10.0.0.1"]
	if !ok || job.Status != 0 || *je.ErrorCode != model.CodeTimeout || nodemanOutcome(*je.ErrorCode) != "failed" {
		t.Fatalf("get_proc_result: status %d, %v", job.Status, keysOf(job.Result))
	}
}
