package server

import (
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend/simulator"
	"gseproc/model"
)

// TestAgentIDs: hosts named by agent id anywhere cloud:ip is accepted,
// results keyed in the form the request used, and the agent endpoints, on
// the simulated fleet (whose agents have ids like real ones).
func TestAgentIDs(t *testing.T) {
	e := newEnv(t, testConfig())
	h0 := model.Host{IP: "10.0.0.1", CloudID: 0}
	id0 := simulator.AgentID(h0)
	if _, err := model.CheckAgentID(id0); err != nil || len(id0) != 34 {
		t.Fatalf("simulated agent id %q: %v", id0, err)
	}
	const unknown = "02ffffffffffffffffffffffffffffffff"
	for _, root := range []string{rootGSE2Gateway, rootGSE2ESB} {
		t.Run(root, func(t *testing.T) {
			e.t = t
			spec := specWire("proc-test", "./start.sh")
			body := withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "proc-test"}, "op_type": 2,
				"agent_id_list": []string{id0, "1:10.0.0.1"}, "spec": spec})
			r := e.post(root+"proc/operate_proc_v2", body)
			if !r.Result {
				t.Fatalf("operate_proc_v2 by agent id: %d %s", r.Code, r.Message)
			}
			id := decode[map[string]string](t, r.Data)["task_id"]
			var res map[string]gseEntry
			for i := 0; ; i++ {
				r = e.post(root+"proc/get_proc_operate_result_v2", withAuth(map[string]any{"task_id": id}))
				if r.Code == 0 && !strings.Contains(string(r.Data), `"error_code":115`) {
					res = decode[map[string]gseEntry](t, r.Data)
					break
				}
				if i > 1500 {
					t.Fatalf("task %s not over: %d %s", id, r.Code, r.Data)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Each host is keyed as the request named it: one list mixes an
			// agent id and a cloud:ip (the host at 1:10.0.0.1 has an agent
			// id too, but was not named by it).
			want := []string{id0 + ":gse:proc-test", "1:10.0.0.1:gse:proc-test"}
			slices.Sort(want)
			if got := keysOf(res); !slices.Equal(got, want) {
				t.Fatalf("result keys %v, want %v", got, want)
			}
			r = e.post(root+"task/get_task_state", withAuth(map[string]any{"task_id": id}))
			if all := decode[struct {
				Result struct {
					Successed []string `json:"successed_agents"`
				} `json:"result"`
			}](t, r.Data); !r.Result || !slices.Equal(all.Result.Successed, []string{id0, "1:10.0.0.1"}) {
				t.Fatalf("get_task_state of every host: want each named as the task named it: %s %s", r.Message, r.Data)
			}
			r = e.post(root+"task/get_task_state", withAuth(map[string]any{"task_id": id, "agent_id_list": []string{id0}}))
			ts := decode[struct {
				Result struct {
					State     string   `json:"state"`
					Successed []string `json:"successed_agents"`
					Failed    []string `json:"failed_agents"`
					Pending   []string `json:"pending_agents"`
					Offline   []string `json:"offline_agents"`
					Timeout   []string `json:"timeout_agents"`
					Restarted []string `json:"restarted_agents"`
				} `json:"result"`
			}](t, r.Data)
			if !r.Result || ts.Result.State != "successed" || !slices.Equal(ts.Result.Successed, []string{id0}) ||
				ts.Result.Failed == nil || ts.Result.Pending == nil || ts.Result.Offline == nil || ts.Result.Timeout == nil || ts.Result.Restarted == nil {
				t.Fatalf("get_task_state: %d %s %s", r.Code, r.Message, r.Data)
			}

			r = e.post(root+"proc/get_proc_status_v2", withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "proc-test"}, "agent_id_list": []string{id0, "1:10.0.0.1"}}))
			d := decode[procInfosReply](t, r.Data)
			if !r.Result || len(d.ProcInfos) != 2 || d.ProcInfos[0].AgentID != id0 || d.ProcInfos[0].Host.IP != "10.0.0.1" ||
				d.ProcInfos[1].AgentID != "1:10.0.0.1" || d.ProcInfos[1].Host.CloudID != 1 {
				t.Fatalf("get_proc_status_v2 by agent id and cloud:ip: %s %s", r.Message, r.Data)
			}

			r = e.post(root+"cluster/list_agent_state", withAuth(map[string]any{"agent_id_list": []string{id0, "1:10.0.0.1", unknown}}))
			states := decode[[]struct {
				AgentID    string `json:"bk_agent_id"`
				CloudID    *int   `json:"bk_cloud_id"`
				Version    string `json:"version"`
				RunMode    *int   `json:"run_mode"`
				StatusCode int    `json:"status_code"`
			}](t, r.Data)
			if !r.Result || len(states) != 2 || states[0].AgentID != id0 || states[1].AgentID != "1:10.0.0.1" ||
				states[0].StatusCode != 2 || states[1].CloudID == nil || *states[1].CloudID != 1 || states[0].Version == "" || states[0].RunMode == nil {
				t.Fatalf("list_agent_state: %s %s", r.Message, r.Data)
			}
			r = e.post(root+"cluster/list_agent_info", withAuth(map[string]any{"agent_id_list": []string{id0}}))
			if !r.Result || !strings.Contains(string(r.Data), `"bk_host_innerip":"10.0.0.1"`) {
				t.Fatalf("list_agent_info: %s %s", r.Message, r.Data)
			}
			r = e.post(root+"cluster/list_agent_state", withAuth(map[string]any{"agent_id_list": []string{unknown}}))
			if r.Result || r.Code != CodeAgentsNotFound {
				t.Fatalf("list_agent_state of an unknown id: %d %s, want 1011003", r.Code, r.Message)
			}

			r = e.post(root+"proc/upgrade_to_agent_id", withAuth(map[string]any{"hosts": []any{
				map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0, "bk_agent_id": id0},
				map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1, "bk_agent_id": unknown}}}))
			up := decode[map[string][]string](t, r.Data)
			if !r.Result || !slices.Equal(up["success"], []string{"0:10.0.0.1"}) || !slices.Equal(up["failed"], []string{"1:10.0.0.1"}) {
				t.Fatalf("upgrade_to_agent_id: %s %s", r.Message, r.Data)
			}
		})
	}
	e.t = t

	before := e.taskCount()
	r := e.post(rootGSE2+"proc/operate_proc_v2", withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "proc-test"}, "op_type": 2,
		"agent_id_list": []string{id0, unknown}, "spec": specWire("proc-test", "./start.sh")}))
	if r.Result || r.Code != CodeArgument || !strings.Contains(r.Message, "agent_id_list[1]: no agent with id "+unknown) {
		t.Fatalf("unknown agent id: %d %s", r.Code, r.Message)
	}
	if e.taskCount() != before {
		t.Fatal("a refused request created a task")
	}

	// GSE 1.x agent endpoints, keyed cloud:ip.
	hosts := []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}, map[string]any{"ip": "10.9.9.9", "bk_cloud_id": 3}}
	r = e.post(rootGSE+"get_agent_status", withAuth(map[string]any{"bk_supplier_account": "0", "hosts": hosts}))
	type status struct {
		IP      string `json:"ip"`
		CloudID int    `json:"bk_cloud_id"`
		Alive   *int   `json:"bk_agent_alive"`
	}
	st := decode[map[string]status](t, r.Data)
	if !r.Result || len(st) != 2 || *st["0:10.0.0.1"].Alive != 1 || *st["3:10.9.9.9"].Alive != 0 || st["3:10.9.9.9"].CloudID != 3 {
		t.Fatalf("get_agent_status: %s %s", r.Message, r.Data)
	}
	r = e.post(rootGSE+"get_agent_info", withAuth(map[string]any{"bk_supplier_account": "0", "hosts": hosts}))
	info := decode[map[string]map[string]any](t, r.Data)
	if !r.Result || len(info) != 1 || info["0:10.0.0.1"]["bk_agent_id"] != id0 || info["0:10.0.0.1"]["version"] == "" {
		t.Fatalf("get_agent_info: %s %s", r.Message, r.Data)
	}
	for _, k := range []string{"ip", "bk_cloud_id", "version", "parent_ip", "parent_port"} {
		if _, ok := info["0:10.0.0.1"][k]; !ok {
			t.Errorf("get_agent_info entry lacks %s: %s", k, r.Data)
		}
	}
	if r := e.post(rootGSE+"get_agent_status", withAuth(map[string]any{"hosts": []any{}})); r.Code != CodeArgument || !strings.Contains(r.Message, "hosts: required") {
		t.Fatalf("get_agent_status without hosts: %d %s", r.Code, r.Message)
	}
}
