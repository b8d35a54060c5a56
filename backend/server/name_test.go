package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestNameRuleAtForms: a name the name rule refuses (model.CheckDefName)
// is refused at every form that saves or sends a definition, naming the
// field as the form spells it, storing and dispatching nothing; a
// definition stored before the rule is still operated and unregistered by
// name through the forms that name a registered process.
func TestNameRuleAtForms(t *testing.T) {
	e := newEnv(t, testConfig())
	ctx := context.Background()
	host := map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0, "bk_supplier_id": 0}
	native := func(name string) string {
		return `{"process": {"meta": {"namespace": "names", "name": "` + name + `"}, "spec": {
			"identity": {"proc_name": "p", "setup_path": "/opt/p", "pid_path": "/opt/p/p.pid"},
			"control": {"start_cmd": "./start.sh", "stop_cmd": "./stop.sh"}, "monitor_policy": {"auto_type": 1}}},
			"hosts": [{"ip": "10.0.0.1", "bk_cloud_id": 0}]}`
	}
	meta := func(name string) map[string]any {
		return withAuth(map[string]any{"meta": map[string]any{"namespace": "names", "name": name},
			"op_type": 0, "hosts": []any{host}, "spec": specWire("p", "./start.sh")})
	}
	job := func(valueKey string) map[string]any {
		m := seedMap(t, "seed002_operate_proc")
		m["process_infos"].([]any)[0].(map[string]any)["value_key"] = valueKey
		return m
	}
	tasks := e.taskCount()
	cases := []struct {
		name, path string
		do         func() reply
		field      string
	}{
		{"native save", "/api/v1/processes", func() reply {
			return e.do(http.MethodPost, "/api/v1/processes", []byte(native("my app!")), nil)
		}, "process.meta.name"},
		{"native operate item", "/api/v1/operate", func() reply {
			return e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type": 0, "items": [`+native("a:b")+`]}`), nil)
		}, "items[0].process.meta.name"},
		{"GSE register_proc_info", gseBase + "register_proc_info/", func() reply {
			return e.post(gseBase+"register_proc_info/", meta("a/b"))
		}, "meta.name"},
		{"GSE operate_proc_v2", gseBase + "operate_proc_v2/", func() reply {
			return e.post(gseBase+"operate_proc_v2/", meta(" a"))
		}, "meta.name"},
		{"GSE operate_proc_multi", gseBase + "operate_proc_multi/", func() reply {
			return e.post(gseBase+"operate_proc_multi/", withAuth(map[string]any{"proc_operate_req": []any{meta("a\tb")}}))
		}, "proc_operate_req[0].meta.name"},
		{"JOB operate_proc value_key", "job operate_proc", func() reply {
			return e.post("/api/c/compapi/v2/job/operate_proc/", job("my app!"))
		}, "process_infos[0].value_key"},
	}
	for _, tc := range cases {
		r := tc.do()
		if r.Result || !namesField(r.Message, tc.field) || !strings.Contains(r.Message, "is not allowed (only letters A-Z a-z, digits and . _ -)") {
			t.Errorf("%s: want a refusal naming %s and the character set, got %v %d %q", tc.name, tc.field, r.Result, r.Code, r.Message)
		}
	}
	if defs, err := e.eng.Processes(ctx, backend.ProcQuery{Namespace: "names"}); err != nil || len(defs) != 0 {
		t.Fatalf("refused definitions stored: %d (%v)", len(defs), err)
	}
	if n := e.taskCount(); n != tasks {
		t.Fatalf("refused requests started %d tasks", n-tasks)
	}
	// The JOB form's default name, setup_path/proc_name, is taken.
	if r := e.post("/api/c/compapi/v2/job/operate_proc/", seedMap(t, "seed002_operate_proc")); !r.Result {
		t.Fatalf("JOB default value_key: %s", r.Message)
	}

	// Stored before the rule: operate_proc (v1, by name) and
	// unregister_proc_info still reach it.
	old := model.Process{Meta: model.Meta{Namespace: "names", Name: "my app!"}}
	old.Spec.Identity = model.Identity{ProcName: "p", SetupPath: "/opt/p", PidPath: "/opt/p/p.pid"}
	old.Spec.Control = model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", ShellExt: "sh"}
	old.Spec.Policy = model.DefaultPolicy()
	if err := e.eng.Seed(ctx, []model.ProcessDef{{Process: old, Hosts: []model.Host{{IP: "10.0.0.1"}}}}); err != nil {
		t.Fatal(err)
	}
	byName := withAuth(map[string]any{"meta": map[string]any{"namespace": "names", "name": "my app!"}, "op_type": 0, "hosts": []any{host}})
	if r := e.post(gseBase+"operate_proc/", byName); !r.Result {
		t.Fatalf("operate_proc on a stored name: %d %s", r.Code, r.Message)
	}
	delete(byName, "op_type")
	if r := e.post(gseBase+"unregister_proc_info/", byName); !r.Result {
		t.Fatalf("unregister_proc_info on a stored name: %d %s", r.Code, r.Message)
	}
}

// namesField: the refusal message names field itself (not a longer path
// ending in it).
func namesField(msg, field string) bool {
	for _, part := range strings.Split(strings.TrimPrefix(msg, "invalid request: "), "; ") {
		if strings.HasPrefix(part, field+": ") {
			return true
		}
	}
	return false
}
