//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gseproc/backend/server/wire"
	"gseproc/model"
)

// TestHostileInput runs the hostile requests of issue 9 against the real
// binary's server (embedded NATS, JetStream) with a real agent: each is
// refused with the field named, nothing is stored or dispatched for it,
// /healthz and an operation on the real agent work right after, and the
// shell-injection name has no side effect on the agent's host, refused at
// the API or, carried by a synthesised command, quoted.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and an agent running real processes")
	}
	base, natsURL := startDemoServer(t)
	work := t.TempDir()
	const ip = "127.0.0.21"
	killAtEnd(t, filepath.Join(work, "run.pid"))
	// start.sh records its first argument and leaves a process behind.
	script := "#!/bin/sh\nprintf '%s' \"$1\" > args.txt\nsleep 120 &\necho $! > run.pid\n"
	if err := os.WriteFile(filepath.Join(work, "start.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runCmd(t, "agent", "--nats", natsURL, "--ip", ip, "--data-dir", filepath.Join(t.TempDir(), "agent"))

	call := func(method, path string, body []byte) envelopeReply {
		t.Helper()
		return callJSON(t, method, base+path, body)
	}
	count := func(path string) int {
		t.Helper()
		r := call(http.MethodGet, path, nil)
		var xs []json.RawMessage
		if !r.Result || json.Unmarshal(r.Data, &xs) != nil {
			t.Fatalf("GET %s: %s", path, r.Message)
		}
		return len(xs)
	}
	waitFor(t, "agent online", 20*time.Second, func() bool {
		r := call(http.MethodGet, "/api/v1/hosts?host=0:"+ip, nil)
		return r.Result && strings.Contains(string(r.Data), `"agent_state":"online"`)
	})

	// The agent's own process: saved through the native API, with the
	// command the v1 form synthesises for the hostile name (quoted).
	hostile := "x;touch pwned;true"
	synth := wire.ProcessInfo{SetupPath: work, ProcName: hostile, PidPath: work + "/run.pid"}.
		ToProcess(wire.FormOperateProc, wire.Scope{Type: wire.ScopeBiz, ID: "1"})
	def := map[string]any{"process": map[string]any{
		"meta": map[string]any{"namespace": "hostile", "name": "quoted"},
		"spec": map[string]any{
			"identity":       map[string]any{"proc_name": "quoted", "setup_path": work, "pid_path": work + "/run.pid"},
			"control":        map[string]any{"start_cmd": synth.Spec.Control.StartCmd, "stop_cmd": "kill $(cat run.pid)"},
			"monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 1, "op_timeout": 20},
		}}, "hosts": []any{map[string]any{"ip": ip, "bk_cloud_id": 0}}}
	b, _ := json.Marshal(def)
	if r := call(http.MethodPost, "/api/v1/processes", b); !r.Result {
		t.Fatalf("save: %s", r.Message)
	}
	tasks0, procs0 := count("/api/v1/tasks?limit=100000"), count("/api/v1/processes")

	zone := "fe80::1%" + strings.Repeat("z", 4200)
	auth := `"bk_app_code": "esb_test", "bk_app_secret": "xxx", "bk_username": "admin", `
	v1 := func(procName, setupPath, ipJSON string) []byte {
		return []byte(`{` + auth + `"bk_biz_id": 1, "op_type": 0, "process_infos": [{"setup_path": ` + setupPath +
			`, "proc_name": ` + procName + `, "pid_path": "` + work + `/run.pid", "ip_list": [{"bk_cloud_id": 0, "ip": ` + ipJSON + `}]}]}`)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	spec := `"spec": {"identity": {"proc_name": "p", "setup_path": "` + work + `", "pid_path": "` + work + `/p.pid"}, "control": {"start_cmd": "./start.sh"}}`
	cases := []struct {
		name, path string
		body       []byte
		want       string
	}{
		{"zone in ip_list", "/api/c/compapi/v2/job/operate_proc/", v1(q("gseagent"), q(work), q(zone)), "process_infos[0].ip_list[0].ip"},
		{"zone in hosts", "/api/c/compapi/v2/gse/operate_proc_v2/", []byte(`{` + auth + `"meta": {"namespace": "hostile", "name": "z"}, "op_type": 0, ` + spec +
			`, "hosts": [{"ip": ` + q(zone) + `, "bk_cloud_id": 0}]}`), "hosts[0].ip"},
		{"zone in agent_id_list", "/api/c/compapi/v2/gse/operate_proc_v2/", []byte(`{` + auth + `"meta": {"namespace": "hostile", "name": "z"}, "op_type": 0, ` + spec +
			`, "agent_id_list": [` + q("0:"+zone) + `]}`), "agent_id_list[0]"},
		{"zone in native operate", "/api/v1/operate", []byte(`{"op_type": 0, "selector": {"namespace": "hostile", "hosts": [{"ip": ` + q(zone) + `}]}}`), "selector.hosts[0].ip"},
		{"shell injection in proc_name", "/api/c/compapi/v2/job/operate_proc/", v1(q(hostile), q(work), q(ip)), "process_infos[0].proc_name"},
		{"path climbing out", "/api/c/compapi/v2/job/operate_proc/", v1(q("gseagent"), q(work+"/../../etc"), q(ip)), "process_infos[0].setup_path"},
		{"case-smuggled op_type", "/api/c/compapi/v2/job/operate_proc/",
			bytes.Replace(v1(q("gseagent"), q(work), q(ip)), []byte(`"op_type": 0`), []byte(`"op_type": 2, "OP_TYPE": 0`), 1), "OP_TYPE"},
		{"duplicate op_type", "/api/c/compapi/v2/job/operate_proc/",
			bytes.Replace(v1(q("gseagent"), q(work), q(ip)), []byte(`"op_type": 0`), []byte(`"op_type": 2, "op_type": 0`), 1), "op_type: duplicate key"},
		{"invalid UTF-8", "/api/c/compapi/v2/job/operate_proc/", v1("\"gse\xffagent\"", q(work), q(ip)), "process_infos[0].proc_name"},
	}
	for _, tc := range cases {
		r := call(http.MethodPost, tc.path, tc.body)
		if r.Result || !strings.Contains(r.Message, tc.want) {
			t.Errorf("%s: result %v, message %.300q; want a refusal naming %s", tc.name, r.Result, r.Message, tc.want)
		}
		if h := call(http.MethodGet, "/healthz", nil); !h.Result {
			t.Fatalf("%s: /healthz after it: %s", tc.name, h.Message)
		}
	}
	if n := count("/api/v1/tasks?limit=100000"); n != tasks0 {
		t.Errorf("%d tasks created by refused requests", n-tasks0)
	}
	if n := count("/api/v1/processes"); n != procs0 {
		t.Errorf("registry changed by refused requests: %d definitions, was %d", n, procs0)
	}

	// A normal operation on the real agent works over the same NATS
	// connection: the quoted command runs with the name as one argument.
	r := call(http.MethodPost, "/api/v1/operate", []byte(`{"op_type": 0, "selector": {"namespace": "hostile", "name": "quoted"}}`))
	if !r.Result {
		t.Fatalf("start: %s", r.Message)
	}
	var task model.Task
	if err := json.Unmarshal(r.Data, &task); err != nil {
		t.Fatal(err)
	}
	var view struct {
		Task    model.Task     `json:"task"`
		Results []model.Result `json:"results"`
	}
	waitFor(t, "start finished", 60*time.Second, func() bool {
		r := call(http.MethodGet, "/api/v1/tasks/"+task.ID, nil)
		return r.Result && json.Unmarshal(r.Data, &view) == nil && view.Task.Status.Final()
	})
	if len(view.Results) != 1 || view.Results[0].Code != model.CodeSuccess {
		t.Fatalf("start on the real agent: %+v", view.Results)
	}
	got, err := os.ReadFile(filepath.Join(work, "args.txt"))
	if err != nil || string(got) != hostile {
		t.Fatalf("start.sh got %q (%v), want the name as one argument %q", got, err, hostile)
	}
	for _, dir := range []string{work, filepath.Join(work, "..")} {
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("pwned created in %s: the name was run as a command", dir)
		}
	}
}
