package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gseproc/model"
)

// TestEveryRootServed: each JOB root and each GSE 2.0 root answers, with
// and without the trailing slash; get_proc_result also by GET (query string
// and JSON body), as clients call it.
func TestEveryRootServed(t *testing.T) {
	e := newEnv(t, testConfig())
	for _, root := range []string{rootJobV2, rootJobV3, rootJobV3Alt} {
		for _, slash := range []string{"/", ""} {
			t.Run(root+"*"+slash, func(t *testing.T) {
				e.t = t
				r := e.post(root+"operate_proc"+slash, readFile(t, "testdata/seed002_operate_proc.request.json"))
				if !r.Result {
					t.Fatalf("operate_proc: %d %s", r.Code, r.Message)
				}
				id := decode[map[string]string](t, r.Data)["bk_gse_taskid"]
				e.pollJob(root+"get_proc_result"+slash, map[string]any{"bk_biz_id": 1}, id)
				q := url.Values{"bk_app_code": {"esb_test"}, "bk_app_secret": {"xxx"}, "bk_username": {"admin"},
					"bk_biz_id": {"1"}, "bk_gse_taskid": {id}}
				g := e.do(http.MethodGet, root+"get_proc_result"+slash+"?"+q.Encode(), nil, nil)
				if !g.Result || !strings.Contains(string(g.Data), "/usr/local/xxx/gseagent:0:10.0.0.1") {
					t.Fatalf("GET with a query string: %d %s %s", g.Code, g.Message, g.Data)
				}
				body, _ := json.Marshal(withAuth(map[string]any{"bk_scope_type": "biz", "bk_scope_id": "1", "bk_gse_taskid": id}))
				g = e.do(http.MethodGet, root+"get_proc_result"+slash, body, nil)
				if !g.Result || !strings.Contains(string(g.Data), "/usr/local/xxx/gseagent:0:10.0.0.1") {
					t.Fatalf("GET with a JSON body: %d %s %s", g.Code, g.Message, g.Data)
				}
				for _, name := range []string{"operate_process", "manage_proc"} {
					if r := e.post(root+name+slash, withAuth(map[string]any{"bk_biz_id": 1})); r.Code != CodeIllegalParam {
						t.Fatalf("%s not served: %d %s", name, r.Code, r.Message)
					}
				}
			})
		}
	}
	v2 := withAuth(map[string]any{
		"meta":          map[string]any{"namespace": "gse", "name": "proc-test"},
		"op_type":       2,
		"agent_id_list": []string{"1:10.0.0.1"},
		"spec": map[string]any{
			"identity": map[string]any{"proc_name": "proc-test", "setup_path": "/data/gsetest", "pid_path": "/data/gsetest/proc-test.pid", "user": "root"},
			"control":  map[string]any{"start_cmd": "./start.sh"},
		},
	})
	for _, root := range []string{rootGSE2, rootGSE2Gateway, rootGSE2ESB} {
		for _, slash := range []string{"/", ""} {
			t.Run(root+"proc/*"+slash, func(t *testing.T) {
				e.t = t
				r := e.post(root+"proc/operate_proc_v2"+slash, v2)
				if !r.Result {
					t.Fatalf("operate_proc_v2: %d %s", r.Code, r.Message)
				}
				id := decode[map[string]string](t, r.Data)["task_id"]
				for i := 0; ; i++ {
					r = e.post(root+"proc/get_proc_operate_result_v2"+slash, withAuth(map[string]any{"task_id": id}))
					if r.Code == 0 && !strings.Contains(string(r.Data), `"error_code":115`) {
						break
					}
					if r.Code != 0 && r.Code != CodeTaskNotDispatched || i > 1500 {
						t.Fatalf("get_proc_operate_result_v2: %d %s %s", r.Code, r.Message, r.Data)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if _, ok := decode[map[string]gseEntry](t, r.Data)["1:10.0.0.1:gse:proc-test"]; !ok {
					t.Fatalf("result %s lacks 1:10.0.0.1:gse:proc-test", r.Data)
				}
				for _, name := range []string{"get_proc_status_v2", "sync_proc_status", "operate_proc_multi", "update_proc_info"} {
					if r := e.post(root+"proc/"+name+slash, withAuth(map[string]any{})); r.Code != CodeArgument {
						t.Fatalf("%s not served: %d %s", name, r.Code, r.Message)
					}
				}
			})
		}
	}
}

// TestWindowsHosts: Windows paths with cmd_shell_ext bat/ps1 reach the
// (Linux) hosts, which answer "not supported on this OS" per host; the
// same paths for a sh process, or climbing out with "..", are refused.
func TestWindowsHosts(t *testing.T) {
	e := newEnv(t, testConfig())
	m := seedMap(t, "seed002_operate_proc")
	info := m["process_infos"].([]any)[0].(map[string]any)
	info["setup_path"], info["pid_path"] = `C:\gse\plugins\bin`, `C:\gse\plugins\bin\run\gseagent.pid`
	m["op_type"] = 0
	r := e.post(rootJobV3+"operate_proc/", m)
	if !r.Result {
		t.Fatalf("operate_proc with Windows paths refused: %d %s", r.Code, r.Message)
	}
	res := e.pollJob(rootJobV3+"get_proc_result/", map[string]any{"bk_biz_id": 1}, decode[map[string]string](t, r.Data)["bk_gse_taskid"])
	en, ok := res.Result[`C:\gse\plugins\bin\gseagent:0:10.0.0.1`]
	if !ok || *en.ErrorCode != model.CodeCommandFailed || !strings.Contains(*en.ErrorMsg, "cmd_shell_ext bat is not supported on this OS") {
		t.Fatalf("result %s: want 65535 not supported on this OS under the value key C:\\gse\\plugins\\bin\\gseagent", keysOf(res.Result))
	}

	body := withAuth(map[string]any{"meta": map[string]any{"namespace": "nodeman", "name": "basereport"}, "op_type": 0,
		"hosts": []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}},
		"spec": map[string]any{
			"identity": map[string]any{"proc_name": "basereport", "setup_path": "C:/gse/plugins/bin", "pid_path": "C:/gse/plugins/bin/run/basereport.pid", "user": "system"},
			"control":  map[string]any{"start_cmd": "C:/gse/plugins/bin/start.bat basereport", "cmd_shell_ext": "ps1"},
		}})
	r = e.post(rootGSE2Gateway+"proc/operate_proc_v2", body)
	if !r.Result {
		t.Fatalf("operate_proc_v2 with Windows paths refused: %d %s", r.Code, r.Message)
	}
	got := e.pollGSE("get_proc_operate_result_v2", decode[map[string]string](t, r.Data)["task_id"])
	if en := got["0:10.0.0.1:nodeman:basereport"]; en.ErrorCode == nil || *en.ErrorCode != model.CodeCommandFailed || !strings.Contains(*en.ErrorMsg, "not supported on this OS") {
		t.Fatalf("result %+v", got)
	}

	for _, bad := range []struct{ ext, path, want string }{
		{"sh", `C:\gse\plugins\bin`, "not an absolute path"},
		{"bat", `C:\gse\..\Windows`, "'..'"},
	} {
		m := seedMap(t, "seed002_operate_proc")
		info := m["process_infos"].([]any)[0].(map[string]any)
		info["cmd_shell_ext"], info["setup_path"] = bad.ext, bad.path
		if r := e.post(rootJobV3+"operate_proc/", m); r.Result || !strings.Contains(r.Message, "process_infos[0].setup_path") || !strings.Contains(r.Message, bad.want) {
			t.Fatalf("%s %s: %d %s", bad.ext, bad.path, r.Code, r.Message)
		}
	}
}

// TestREADMEListsEveryPath: every GSE/JOB path served (each also with a
// trailing slash) and every native path is in the README.
func TestREADMEListsEveryPath(t *testing.T) {
	e := newEnv(t, testConfig())
	readme := string(readFile(t, "../../README.md"))
	paths := append([]string(nil), e.srv.gatewayPaths...)
	paths = append(paths, "/api/v1/info", "/api/v1/namespaces", "/api/v1/hosts", "/api/v1/processes", "/api/v1/operate",
		"/api/v1/tasks", "/api/v1/events", "/api/v1/audit", "/api/v1/process_groups", "/api/v1/openapi.yaml", "/healthz", "/metrics")
	for _, p := range paths {
		if !strings.Contains(readme, "`"+p+"`") {
			t.Errorf("README does not list `%s`", p)
		}
	}
	if len(e.srv.gatewayPaths) < 50 {
		t.Fatalf("only %d gateway paths recorded", len(e.srv.gatewayPaths))
	}
}
