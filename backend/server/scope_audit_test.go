package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/server/wire"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// TestScopeRefusalsAudited: requests an app makes outside its scopes,
// through the native API and a documented form, reads included, are
// refused and recorded in the audit trail with the app and user, the
// endpoint, the namespace asked for and the reason naming the field;
// nothing else is recorded for them. The narrow app does not see those
// entries (they are of a namespace it may not see); an app with "*" does.
func TestScopeRefusalsAudited(t *testing.T) {
	cfg := testConfig()
	cfg.AnonymousApp = ""
	e := newEnv(t, cfg)
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	before := audit(t, e, "?limit=10000", wide)
	tasks0, err := e.eng.Tasks(t.Context(), 100000)
	if err != nil {
		t.Fatal(err)
	}

	if r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":9,"selector":{"namespace":"gse"}}`), narrow); r.Result || r.Status != http.StatusForbidden {
		t.Fatalf("native operate on gse by narrow: %d %s", r.Status, r.Message)
	}
	if r := e.do(http.MethodGet, "/api/v1/hosts?namespace=gse", nil, narrow); r.Result {
		t.Fatalf("hosts of gse by narrow: %s", r.Message)
	}
	form := map[string]any{"bk_app_code": "narrow", "bk_app_secret": "pw", "bk_username": "alice", "bk_biz_id": 1, "op_type": 1,
		"process_infos": []any{map[string]any{"setup_path": "/data/app", "proc_name": "app", "pid_path": "/data/app/app.pid",
			"ip_list": []any{map[string]any{"bk_cloud_id": 0, "ip": "10.0.0.1"}}}}}
	if r := e.post("/api/c/compapi/v2/job/operate_proc/", form); r.Result || r.Code != CodeAppDenied {
		t.Fatalf("operate_proc on biz 1 by narrow: %d %s", r.Code, r.Message)
	}

	all := audit(t, e, "?limit=10000", wide)
	if len(all) != len(before)+3 {
		t.Fatalf("%d entries after 3 refusals, were %d: %+v", len(all), len(before), all[:len(all)-len(before)])
	}
	denied := audit(t, e, "?action=scope_denied&result=refused", wide)
	want := []struct{ op, ns, field, target string }{ // newest first
		{"job.operate_proc", "biz_1", "bk_scope_id", "POST /api/c/compapi/v2/job/operate_proc/"},
		{"v1.hosts", "gse", "namespace", "GET /api/v1/hosts"},
		{"v1.operate", "gse", "selector.namespace", "POST /api/v1/operate"},
	}
	if len(denied) != len(want) {
		t.Fatalf("scope_denied entries: %+v", denied)
	}
	for i, w := range want {
		x := denied[i]
		if x.Actor.App != "narrow" || x.Actor.User != "alice" || x.Actor.Via != "api:"+w.op || x.Op != w.op ||
			len(x.Namespaces) != 1 || x.Namespaces[0] != w.ns || len(x.Targets) != 1 || x.Targets[0] != w.target ||
			!strings.HasPrefix(x.Summary, w.field+": ") || !strings.Contains(x.Summary, "may not touch") || x.TaskID != "" || x.Time.IsZero() {
			t.Errorf("entry %d: %+v, want %+v", i, x, w)
		}
	}
	for _, x := range audit(t, e, "?limit=10000", narrow) {
		if x.Action == model.AuditScopeDenied {
			t.Errorf("the narrow app sees a refusal of a namespace it may not see: %+v", x)
		}
	}
	// Nothing was dispatched or stored for them.
	if ts, _ := e.eng.Tasks(t.Context(), 100000); len(ts) != len(tasks0) {
		t.Fatalf("%d tasks after refusals, were %d", len(ts), len(tasks0))
	}
	if r := e.do(http.MethodGet, "/api/v1/audit?action=scope_denied&namespace=gse", nil, wide); !r.Result || len(decode[[]model.AuditEntry](t, r.Data)) != 2 {
		t.Errorf("scope_denied entries of gse: %s %s", r.Message, r.Data)
	}
}

// TestSeedAudited: the simulated fleet's definitions seeded into the
// registry at start are one audit entry naming them; seeding again adds
// nothing and records nothing.
func TestSeedAudited(t *testing.T) {
	e := newEnv(t, testConfig())
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`}
	es := audit(t, e, "?action=seed", wide)
	defs := e.fleet.Definitions()
	if len(es) != 1 || es[0].Result != model.AuditOK || es[0].TargetCount != len(defs) || es[0].Actor.Via != "seed" ||
		len(es[0].Namespaces) == 0 || !strings.Contains(es[0].Summary, "definitions of the simulated fleet added") {
		t.Fatalf("seed entries: %+v (%d definitions)", es, len(defs))
	}
	if err := e.eng.Seed(t.Context(), defs); err != nil {
		t.Fatal(err)
	}
	if es := audit(t, e, "?action=seed", wide); len(es) != 1 {
		t.Fatalf("seeding again recorded %d entries", len(es))
	}
}

// TestInfoScoped: /api/v1/info gives an app granted some businesses the
// counts within them (the hosts it is shown, their online ones, its
// definitions, its running tasks), and the whole fleet's to an app with
// "*".
func TestInfoScoped(t *testing.T) {
	sc := quietSim()
	// Tasks stay running long enough to be counted.
	sc.LatencyMedian, sc.LatencyP99 = config.Duration(8*time.Second), config.Duration(15*time.Second)
	e := newEnvEngine(t, testConfig(), sc, func(*simulator.Fleet) []engine.Option { return nil })
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	info := func(hdr map[string]string) backend.Info {
		t.Helper()
		r := e.do(http.MethodGet, "/api/v1/info", nil, hdr)
		if !r.Result {
			t.Fatalf("info: %s", r.Message)
		}
		return decode[backend.Info](t, r.Data)
	}
	count := func(path string, hdr map[string]string) int {
		t.Helper()
		r := e.do(http.MethodGet, path, nil, hdr)
		if !r.Result {
			t.Fatalf("%s: %s", path, r.Message)
		}
		return len(decode[[]map[string]any](t, r.Data))
	}
	// A task in web (the narrow app's) and one in gse (not its).
	for _, x := range []struct {
		ns  string
		hdr map[string]string
	}{{"web", narrow}, {"gse", wide}} {
		if r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"`+x.ns+`"}}`), x.hdr); !r.Result {
			t.Fatalf("operate on %s: %s", x.ns, r.Message)
		}
	}
	all, mine := info(wide), info(narrow)
	running, _ := e.eng.Tasks(context.Background(), 10)
	stillRunning := 0
	for _, ts := range running {
		if !ts.Status.Final() {
			stillRunning++
		}
	}
	if all.Hosts != count("/api/v1/hosts", wide) || all.Processes != count("/api/v1/processes", wide) {
		t.Fatalf("wide info %+v", all)
	}
	// The list form shows an app the hosts and processes the full form
	// does.
	for _, hdr := range []map[string]string{wide, narrow} {
		if full, list := shownProcs(t, e, "/api/v1/hosts", hdr), shownProcs(t, e, "/api/v1/hosts?form=list", hdr); !slices.Equal(full, list) {
			t.Fatalf("the list form shows %d (host, process) pairs, the full form %d", len(list), len(full))
		}
	}
	if mine.Hosts != count("/api/v1/hosts", narrow) || mine.Processes != count("/api/v1/processes", narrow) {
		t.Fatalf("narrow info %+v: hosts and processes are not those it is shown (%d, %d)", mine,
			count("/api/v1/hosts", narrow), count("/api/v1/processes", narrow))
	}
	if mine.Hosts == 0 || mine.Hosts >= all.Hosts || mine.Processes == 0 || mine.Processes >= all.Processes || mine.Online > mine.Hosts || mine.Online == 0 {
		t.Fatalf("narrow info %+v, wide %+v: want counts within its businesses", mine, all)
	}
	if stillRunning == 2 && (mine.Running != 1 || all.Running != 2) {
		// Both tasks were running when the counts were read.
		t.Fatalf("running: narrow %d, wide %d; want 1 and 2", mine.Running, all.Running)
	}
	if mine.Running > 1 {
		t.Fatalf("narrow sees %d running tasks; it has one", mine.Running)
	}
}

// shownProcs is every host of a listing at path, with each of its
// processes ("cloud:ip" or "cloud:ip key"), in the form path asks for.
func shownProcs(t *testing.T, e *env, path string, hdr map[string]string) []string {
	t.Helper()
	r := e.do(http.MethodGet, path, nil, hdr)
	if !r.Result {
		t.Fatalf("%s: %s", path, r.Message)
	}
	var out []string
	if strings.Contains(path, "form=list") {
		n, err := wire.ReadHostList(r.Data, func(hl *wire.HostList, h *wire.ListHost) {
			out = append(out, h.Host.AgentID())
			for _, p := range h.Procs {
				out = append(out, h.Host.AgentID()+" "+hl.Procs[p.Proc].Key)
			}
		})
		if err != nil || n != len(r.Data) {
			t.Fatalf("%s: %v (%d bytes of %d)", path, err, n, len(r.Data))
		}
		return out
	}
	for _, v := range decode[[]backend.HostView](t, r.Data) {
		out = append(out, v.Host.AgentID())
		for _, p := range v.Procs {
			out = append(out, v.Host.AgentID()+" "+p.Key)
		}
	}
	return out
}
