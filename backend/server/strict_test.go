package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestHostileInput: each hostile request is refused with the field and the
// reason named, nothing is stored or dispatched, and the server answers
// /healthz and a normal operation right after.
func TestHostileInput(t *testing.T) {
	e := newEnv(t, testConfig())
	const (
		jobOp   = "/api/c/compapi/v2/job/operate_proc/"
		gseV2   = "/api/c/compapi/v2/gse/operate_proc_v2/"
		gseStat = "/api/c/compapi/v2/gse/get_proc_status/"
		gseReg  = "/api/c/compapi/v2/gse/register_proc_info/"
	)
	zone := "fe80::1%" + strings.Repeat("z", 4200)
	seed := func(name string, edit func(m map[string]any)) []byte {
		m := seedMap(t, name)
		if name == "seed004_gse_operate_proc" {
			withAuth(m)
		}
		edit(m)
		b, _ := json.Marshal(m)
		return b
	}
	info0 := func(m map[string]any) map[string]any { return m["process_infos"].([]any)[0].(map[string]any) }
	spec := map[string]any{
		"identity":       map[string]any{"proc_name": "p", "setup_path": "/data/p", "pid_path": "/data/p/p.pid"},
		"control":        map[string]any{"start_cmd": "./start.sh", "stop_cmd": "./stop.sh"},
		"monitor_policy": map[string]any{"auto_type": 1},
	}
	v2 := func(edit func(m map[string]any)) []byte {
		m := withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "hostile"}, "op_type": 0,
			"hosts": []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1}}, "spec": spec})
		edit(m)
		b, _ := json.Marshal(m)
		return b
	}
	seed002 := func(edit func(m map[string]any)) []byte { return seed("seed002_operate_proc", edit) }
	cases := []struct {
		name, method, path string
		body               []byte
		hdr                map[string]string
		want               []string // named in the message
	}{
		{"4200-char zone in ip_list", "POST", jobOp, seed002(func(m map[string]any) {
			info0(m)["ip_list"] = []any{map[string]any{"bk_cloud_id": 0, "ip": zone}}
		}), nil, []string{"process_infos[0].ip_list[0].ip", "at most 64"}},
		{"zone in hosts", "POST", gseV2, v2(func(m map[string]any) {
			m["hosts"] = []any{map[string]any{"bk_cloud_id": 0, "ip": zone}}
		}), nil, []string{"hosts[0].ip", "at most 64"}},
		{"zone in agent_id_list", "POST", gseStat, v2(func(m map[string]any) {
			m["agent_id_list"] = []any{"0:" + zone}
		}), nil, []string{"agent_id_list[0]"}},
		{"short zone", "POST", gseV2, v2(func(m map[string]any) {
			m["hosts"] = []any{map[string]any{"bk_cloud_id": 0, "ip": "fe80::1%eth0"}}
		}), nil, []string{"hosts[0].ip", "zone"}},
		{"zone in native hosts query", "GET", "/api/v1/hosts?host=" + url.QueryEscape("0:"+zone), nil, nil, []string{"host[0]"}},
		{"zone in native operate", "POST", "/api/v1/operate", []byte(`{"op_type": 2, "selector": {"namespace": "gse", "hosts": [{"ip": "` + zone + `"}]}}`), nil,
			[]string{"selector.hosts[0].ip"}},
		{"shell injection in proc_name", "POST", jobOp, seed002(func(m map[string]any) { info0(m)["proc_name"] = "x;touch pwned;true" }), nil,
			[]string{"process_infos[0].proc_name", "';'"}},
		{"namespace with a colon", "POST", gseV2, v2(func(m map[string]any) { m["meta"] = map[string]any{"namespace": "a:b", "name": "x"} }), nil,
			[]string{"meta.namespace", "':'"}},
		{"duplicate key", "POST", jobOp, []byte(`{"bk_app_code": "esb_test", "bk_app_secret": "xxx", "bk_username": "a", "bk_biz_id": 1, "op_type": 2, "op_type": 9, "process_infos": []}`), nil,
			[]string{"op_type: duplicate key"}},
		{"case-smuggled key", "POST", jobOp, seed002(func(m map[string]any) { m["OP_TYPE"] = 9 }), nil,
			[]string{"OP_TYPE: unknown field: field names are case-sensitive", `"op_type"`}},
		{"case-smuggled nested key", "POST", jobOp, seed002(func(m map[string]any) { info0(m)["Proc_Name"] = "y" }), nil,
			[]string{"process_infos[0].Proc_Name: unknown field"}},
		{"duplicate nested key", "POST", gseV2, []byte(`{"bk_app_code": "esb_test", "bk_app_secret": "xxx", "bk_username": "a", "meta": {"namespace": "gse", "name": "a", "name": "b"}}`), nil,
			[]string{"meta.name: duplicate key"}},
		{"invalid UTF-8 value", "POST", jobOp, []byte("{\"bk_app_code\": \"esb_test\", \"bk_app_secret\": \"xxx\", \"bk_username\": \"a\", \"bk_biz_id\": 1, \"op_type\": 2, \"process_infos\": [{\"proc_name\": \"a\xffb\"}]}"), nil,
			[]string{"process_infos[0].proc_name: not valid UTF-8"}},
		{"invalid UTF-8 key", "POST", jobOp, []byte("{\"bk_app_code\": \"esb_test\", \"bk_app_secret\": \"xxx\", \"bk_username\": \"a\", \"op\xfe\": 1}"), nil,
			[]string{`op\xfe: key is not valid UTF-8`}},
		{"invalid UTF-8 query", "GET", "/api/c/compapi/v2/job/get_proc_result/?bk_biz_id=1&bk_gse_taskid=%FF", nil, nil,
			[]string{"bk_gse_taskid: query parameter is not valid UTF-8"}},
		{"case-smuggled query", "GET", "/api/c/compapi/v2/job/get_proc_result/?bk_biz_id=1&BK_BIZ_ID=2&bk_gse_taskid=GSETASK:20200101000000:1&bk_app_code=esb_test&bk_app_secret=xxx&bk_username=a", nil, nil,
			[]string{"BK_BIZ_ID: unknown field"}},
		{"duplicate key in the auth header", "POST", jobOp, seed002(func(m map[string]any) {
			delete(m, "bk_app_code")
			delete(m, "bk_app_secret")
		}), map[string]string{AuthHeader: `{"bk_app_code": "esb_test", "bk_app_secret": "xxx", "bk_app_code": "narrow"}`}, []string{"bk_app_code: duplicate key"}},
		{"path climbing out", "POST", jobOp, seed002(func(m map[string]any) { info0(m)["setup_path"] = "/usr/local/../../etc" }), nil,
			[]string{"process_infos[0].setup_path", "'..'"}},
		{"pid_path climbing out", "POST", gseReg, v2(func(m map[string]any) {
			s := map[string]any{}
			for k, v := range spec {
				s[k] = v
			}
			s["identity"] = map[string]any{"proc_name": "p", "setup_path": "/data/p", "pid_path": "/data/p/../../../etc/p.pid", "log_path": "/var/log/../../x"}
			m["spec"] = s
		}), nil, []string{"spec.identity.pid_path", "spec.identity.log_path", "'..'"}},
	}
	ctx := context.Background()
	defsBefore, err := e.eng.Processes(ctx, backend.ProcQuery{})
	if err != nil {
		t.Fatal(err)
	}
	before := e.taskCount()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			r := e.do(tc.method, tc.path, tc.body, tc.hdr)
			if r.Result {
				t.Fatalf("accepted: %s", r.raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Message, w) {
					t.Errorf("message does not name %q:\n%.600s", w, r.Message)
				}
			}
			if len(r.Message) > 2000 {
				t.Errorf("message of %d bytes echoes the input", len(r.Message))
			}
			if h := e.do(http.MethodGet, "/healthz", nil, nil); !h.Result {
				t.Fatalf("healthz after the request: %s", h.raw)
			}
		})
	}
	e.t = t
	if after := e.taskCount(); after != before {
		t.Fatalf("%d tasks were created by hostile requests", after-before)
	}
	defsAfter, err := e.eng.Processes(ctx, backend.ProcQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(defsAfter) != len(defsBefore) {
		t.Fatalf("registry: %d definitions before, %d after", len(defsBefore), len(defsAfter))
	}
	// A normal operation still works.
	if r := e.post(jobOp, seedMap(t, "seed002_operate_proc")); !r.Result {
		t.Fatalf("normal op refused: %s", r.raw)
	}
}

// TestCanonicalHostsAtTheAPI: the spellings of one host address one host.
func TestCanonicalHostsAtTheAPI(t *testing.T) {
	e := newEnv(t, testConfig())
	body := withAuth(map[string]any{"meta": map[string]any{"namespace": "gse", "name": "canon"}, "op_type": 2,
		"hosts": []any{
			map[string]any{"ip": "::ffff:10.0.0.1", "bk_cloud_id": 1},
			map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 1},
			map[string]any{"ip": "FE80::0:1", "bk_cloud_id": 1},
		},
		"spec": map[string]any{
			"identity":       map[string]any{"proc_name": "p", "setup_path": "/data//p/", "pid_path": "/data/p/./p.pid"},
			"control":        map[string]any{"start_cmd": "./start.sh"},
			"monitor_policy": map[string]any{"auto_type": 1},
		}})
	r := e.post("/api/c/compapi/v2/gse/register_proc_info", body)
	if !r.Result {
		t.Fatalf("register: %s", r.raw)
	}
	defs, err := e.eng.Processes(context.Background(), backend.ProcQuery{Namespace: "gse", Name: "canon"})
	if err != nil || len(defs) != 1 {
		t.Fatalf("defs %v %v", defs, err)
	}
	var got []string
	for _, h := range defs[0].Hosts {
		got = append(got, h.AgentID())
	}
	if strings.Join(got, ",") != "1:10.0.0.1,1:fe80::1" {
		t.Errorf("hosts stored as %v, want 1:10.0.0.1 and 1:fe80::1 once each", got)
	}
	id := defs[0].Process.Spec.Identity
	if id.SetupPath != "/data/p" || id.PidPath != "/data/p/p.pid" {
		t.Errorf("paths stored as %q %q, want cleaned", id.SetupPath, id.PidPath)
	}
}

// TestStatusDoesNotRewriteDefinition: a status op through operate_process
// carries a whole definition; it is used for the query and the stored
// definition stays as it was.
func TestStatusDoesNotRewriteDefinition(t *testing.T) {
	e := newEnv(t, testConfig())
	const path = "/api/c/compapi/v2/job/operate_process/"
	m := seedMap(t, "seed000_operate_process")
	if r := e.post(path, m); !r.Result {
		t.Fatalf("first op: %s", r.raw)
	}
	defs, err := e.eng.Processes(context.Background(), backend.ProcQuery{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]string{}
	for _, d := range defs {
		b, _ := json.Marshal(d.Process)
		byKey[d.Process.Key()] = string(b)
	}
	m = seedMap(t, "seed000_operate_process")
	m["op_type"] = 2
	info := m["process_infos"].([]any)[0].(map[string]any)
	info["start_cmd"] = "./evil.sh"
	info["cpu_lmt"] = 99
	if r := e.post(path, m); !r.Result {
		t.Fatalf("status op: %s", r.raw)
	}
	defs, err = e.eng.Processes(context.Background(), backend.ProcQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		b, _ := json.Marshal(d.Process)
		if want, ok := byKey[d.Process.Key()]; !ok || want != string(b) {
			t.Errorf("%s changed by a status op:\n%s\nwas\n%s", d.Process.Key(), b, want)
		}
	}
}

// TestScopedReads: an app granted one business and one namespace sees only
// the hosts of its business or carrying its processes, and no fleet-wide
// events; the demo app with "*" sees the whole fleet.
func TestScopedReads(t *testing.T) {
	cfg := testConfig()
	cfg.AnonymousApp = ""
	e := newEnv(t, cfg)
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	hosts := func(hdr map[string]string) []backend.HostView {
		r := e.do(http.MethodGet, "/api/v1/hosts", nil, hdr)
		if !r.Result {
			t.Fatalf("hosts: %s", r.raw)
		}
		return decode[[]backend.HostView](t, r.Data)
	}
	all, mine := hosts(wide), hosts(narrow)
	if len(mine) == 0 || len(mine) >= len(all) {
		t.Fatalf("narrow app sees %d of %d hosts", len(mine), len(all))
	}
	for _, hv := range mine {
		ok := hv.Labels["bk_biz_id"] == "2"
		for _, p := range hv.Procs {
			if !strings.HasPrefix(p.Key, "web:") {
				t.Errorf("narrow app sees process %s on %s", p.Key, hv.Host)
			}
			ok = true
		}
		if !ok {
			t.Errorf("narrow app sees host %s (labels %v) without a web process", hv.Host, hv.Labels)
		}
	}
	// A host the narrow app does not see reads as unknown to it through the
	// documented agent-status API too.
	seen := map[string]bool{}
	for _, hv := range mine {
		seen[hv.Host.AgentID()] = true
	}
	for _, hv := range all {
		if seen[hv.Host.AgentID()] || hv.State != model.AgentOnline {
			continue
		}
		ask := func(app, secret, user string) string {
			body := map[string]any{"bk_app_code": app, "bk_app_secret": secret, "bk_username": user,
				"hosts": []any{map[string]any{"ip": hv.Host.IP, "bk_cloud_id": hv.Host.CloudID}}}
			return string(e.post("/api/c/compapi/v2/gse/get_agent_status/", body).Data)
		}
		if got := ask("esb_test", "xxx", "admin"); !strings.Contains(got, `"bk_agent_alive":1`) {
			t.Fatalf("demo app: %s", got)
		}
		if got := ask("narrow", "pw", "alice"); strings.Contains(got, `"bk_agent_alive":1`) {
			t.Errorf("narrow app reads the agent of %s: %s", hv.Host, got)
		}
		break
	}
	r := e.do(http.MethodGet, "/api/v1/events/recent?n=1000", nil, narrow)
	if !r.Result {
		t.Fatalf("events: %s", r.raw)
	}
	for _, ev := range decode[[]map[string]any](t, r.Data) {
		if p, _ := ev["proc"].(string); !strings.HasPrefix(p, "web:") {
			t.Errorf("narrow app sees event %v", ev)
		}
	}
}
