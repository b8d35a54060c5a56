package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// TestAuditTrail: changes and operations made over HTTP (a documented form,
// the native API) are recorded with the authenticated app and user, the
// operator and channel the caller names, scope, targets, task and
// outcome; /api/v1/audit shows each app only its namespaces' entries.
func TestAuditTrail(t *testing.T) {
	cfg := testConfig()
	cfg.AnonymousApp = ""
	e := newEnv(t, cfg)
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`,
		backend.OperatorHeader: "carol", backend.ViaHeader: "cli"}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}

	// A documented form by the demo app, a native operate by each app, a
	// refused one, a save, a delete and a cancel.
	form := withAuth(seedMap(t, "seed001_manage_proc"))
	if r := e.post("/api/c/compapi/v2/job/manage_proc/", form); !r.Result {
		t.Fatalf("manage_proc: %d %s", r.Code, r.Message)
	}
	r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"web"}}`), narrow)
	if !r.Result {
		t.Fatalf("operate on web by narrow: %d %s", r.Code, r.Message)
	}
	narrowTask := decode[model.Task](t, r.Data)
	r = e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"gse","name":"nosuch"}}`), wide)
	if r.Result {
		t.Fatal("operate on a selector matching nothing was accepted")
	}
	defs, err := e.eng.Processes(t.Context(), backend.ProcQuery{Namespace: "gse"})
	if err != nil || len(defs) == 0 {
		t.Fatalf("gse definitions: %v %v", defs, err)
	}
	def := defs[0]
	def.Process.Meta.Name = "audited"
	body := mustJSON(t, def)
	if r := e.do(http.MethodPost, "/api/v1/processes", body, wide); !r.Result {
		t.Fatalf("save: %s", r.Message)
	}
	if r := e.do(http.MethodDelete, "/api/v1/processes/gse:audited", nil, wide); !r.Result {
		t.Fatalf("delete: %s", r.Message)
	}
	if r := e.do(http.MethodPost, "/api/v1/tasks/"+url.PathEscape(narrowTask.ID)+"/cancel", nil, narrow); !r.Result {
		t.Fatalf("cancel: %s", r.Message)
	}
	// The narrow task's end is recorded once it finishes.
	waitFor(t, 30*time.Second, "the narrow task's task_finished entry", func() bool {
		es, err := e.eng.Audit(t.Context(), model.AuditQuery{TaskID: narrowTask.ID, Action: model.AuditTaskFinished})
		return err == nil && len(es) == 1
	})

	all := audit(t, e, "", wide)
	find := func(es []model.AuditEntry, action, result string, match func(model.AuditEntry) bool) model.AuditEntry {
		t.Helper()
		for _, x := range es {
			if x.Action == action && x.Result == result && (match == nil || match(x)) {
				return x
			}
		}
		t.Fatalf("no %s/%s entry in %+v", action, result, es)
		return model.AuditEntry{}
	}
	formEntry := find(all, model.AuditOperate, model.AuditOK, func(x model.AuditEntry) bool { return x.Actor.Via == "api:job.manage_proc" })
	if formEntry.Actor.App != "esb_test" || formEntry.Actor.User != "admin" || formEntry.TaskID == "" || formEntry.TargetCount == 0 {
		t.Errorf("form entry: %+v", formEntry)
	}
	op := find(all, model.AuditOperate, model.AuditOK, func(x model.AuditEntry) bool { return x.TaskID == narrowTask.ID })
	if op.Actor != (model.Actor{App: "narrow", User: "alice", Operator: "alice", Via: "api:v1.operate"}) ||
		op.Op != "status" || len(op.Namespaces) != 1 || op.Namespaces[0] != "web" || op.TargetCount != narrowTask.Targets {
		t.Errorf("native operate entry: %+v", op)
	}
	refused := find(all, model.AuditOperate, model.AuditRefused, nil)
	if refused.Actor.Operator != "carol" || refused.Actor.Via != "cli/api:v1.operate" || !strings.Contains(refused.Summary, "nosuch") || refused.TaskID != "" {
		t.Errorf("refused entry: %+v", refused)
	}
	saved := find(all, model.AuditSaveProcess, model.AuditOK, nil)
	if saved.Actor.App != "esb_test" || saved.Actor.Operator != "carol" || len(saved.Targets) != 1 || saved.Targets[0] != "gse:audited" {
		t.Errorf("save entry: %+v", saved)
	}
	find(all, model.AuditDeleteProcess, model.AuditOK, func(x model.AuditEntry) bool { return x.Targets[0] == "gse:audited" })
	cancel := find(all, model.AuditCancel, model.AuditOK, nil)
	if cancel.TaskID != narrowTask.ID || cancel.Actor.App != "narrow" {
		t.Errorf("cancel entry: %+v", cancel)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq >= all[i-1].Seq {
			t.Fatalf("entries not newest first: %d then %d", all[i-1].Seq, all[i].Seq)
		}
	}

	// The narrow app sees its own namespace only, the wide one everything.
	mine := audit(t, e, "", narrow)
	if len(mine) == 0 || len(mine) >= len(all) {
		t.Fatalf("narrow app sees %d of %d entries", len(mine), len(all))
	}
	for _, x := range mine {
		if len(x.Namespaces) != 1 || x.Namespaces[0] != "web" {
			t.Errorf("narrow app sees %+v", x)
		}
	}
	if r := e.do(http.MethodGet, "/api/v1/audit?namespace=gse", nil, narrow); r.Code != CodeAppDenied {
		t.Errorf("narrow app asking for gse: %d %s", r.Code, r.Message)
	}

	// Filters, and refusals naming the field.
	if es := audit(t, e, "?action=cancel", wide); len(es) != 1 || es[0].Action != model.AuditCancel {
		t.Errorf("action=cancel: %+v", es)
	}
	if es := audit(t, e, "?operator=carol&limit=2", wide); len(es) != 2 || es[0].Actor.Operator != "carol" {
		t.Errorf("operator=carol&limit=2: %+v", es)
	}
	if es := audit(t, e, "?before="+itoa(op.Seq), wide); len(es) == 0 || es[0].Seq >= op.Seq {
		t.Errorf("before=%d: %+v", op.Seq, es)
	}
	for q, field := range map[string]string{"?action=explode": "action", "?since=yesterday": "since",
		"?limit=-1": "limit", "?result=meh": "result", "?user=%01": "user"} {
		r := e.do(http.MethodGet, "/api/v1/audit"+q, nil, wide)
		if r.Result || r.Status != http.StatusBadRequest || !strings.Contains(r.Message, field) {
			t.Errorf("%s: %d %s, want a refusal naming %s", q, r.Status, r.Message, field)
		}
	}
	bad := map[string]string{AuthHeader: wide[AuthHeader], backend.OperatorHeader: strings.Repeat("e", model.MaxActorField+1)}
	before := len(audit(t, e, "", wide))
	if r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"web"}}`), bad); r.Result || !strings.Contains(r.Message, backend.OperatorHeader) {
		t.Errorf("operator header too long: %d %s", r.Code, r.Message)
	}
	if n := len(audit(t, e, "", wide)); n != before {
		t.Errorf("a request refused at the entrance reached the engine: %d entries, was %d", n, before)
	}
}

func audit(t *testing.T, e *env, query string, hdr map[string]string) []model.AuditEntry {
	t.Helper()
	r := e.do(http.MethodGet, "/api/v1/audit"+query, nil, hdr)
	if !r.Result {
		t.Fatalf("audit%s: %d %s", query, r.Code, r.Message)
	}
	return decode[[]model.AuditEntry](t, r.Data)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// waitFor polls cond until it holds or the (generous) deadline passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
