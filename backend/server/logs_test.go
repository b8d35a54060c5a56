package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// sseEvents splits an event stream into (event, data) pairs.
func sseEvents(raw string) (names, datas []string) {
	for _, block := range strings.Split(raw, "\n\n") {
		var name, data string
		for _, l := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(l, "data: "); ok {
				data = v
			}
		}
		if name != "" {
			names, datas = append(names, name), append(datas, data)
		}
	}
	return names, datas
}

// TestLogsStreamMatchesOpenAPIAndScopes: /api/v1/logs streams a simulated
// process's log as the document says (each chunk a TailChunk, then end);
// bad input is refused naming the field; an app outside the process's
// namespace is refused and the refusal recorded as scope_denied.
func TestLogsStreamMatchesOpenAPIAndScopes(t *testing.T) {
	cfg := testConfig()
	cfg.AnonymousApp = ""
	e := newEnv(t, cfg)
	wide := map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	ctx := context.Background()
	defs, err := e.eng.Processes(ctx, backend.ProcQuery{Namespace: "gse"})
	if err != nil || len(defs) == 0 {
		t.Fatalf("gse processes: %v %d", err, len(defs))
	}
	d := defs[0]
	h := d.Hosts[0]
	task, err := e.eng.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "gse", Name: d.Process.Meta.Name, Hosts: []model.Host{h}}})
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := e.eng.Watch(ctx, task.ID, 0)
	for range ch {
	}
	q := url.Values{"proc": {d.Process.Key()}, "host": {h.AgentID()}, "bytes": {"400"}}
	path := "/api/v1/logs?" + q.Encode()
	doc, _ := openAPI(t)
	schema := doc.Components.Schemas["TailChunk"].Value
	var names, datas []string
	// A simulated process prints two lines a second from its start.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := e.do(http.MethodGet, path, nil, wide)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("logs: %d %s", r.Status, r.raw)
		}
		checkOpenAPI(t, http.MethodGet, path, nil, wide, r, false)
		if names, datas = sseEvents(string(r.raw)); len(datas) > 0 && strings.Contains(datas[0], `]: `) {
			break
		}
	}
	if len(names) < 2 || names[len(names)-1] != "end" || datas[len(datas)-1] != `{"reason":"done"}` {
		t.Fatalf("events %v %v", names, datas)
	}
	for i, name := range names[:len(names)-1] {
		var v any
		if name != "chunk" || json.Unmarshal([]byte(datas[i]), &v) != nil {
			t.Fatalf("event %d: %s %s", i, name, datas[i])
		}
		if err := schema.VisitJSON(v); err != nil {
			t.Errorf("chunk %s does not match TailChunk: %v", datas[i], err)
		}
		var c model.TailChunk
		_ = json.Unmarshal([]byte(datas[i]), &c)
		if c.Host != h || !c.Running || (c.Data != "" && !strings.HasSuffix(c.Data, "\n")) {
			t.Errorf("chunk %+v", c)
		}
	}

	// Refusals: every bad field named; the document refuses what it can.
	for _, c := range []struct {
		query   string
		field   string
		refused bool
	}{
		{"proc=gse&host=0:10.0.0.1", "proc", true},
		{"proc=" + d.Process.Key() + "&host=0:10.0.0.1&stream=bogus", "stream", true},
		{"proc=" + d.Process.Key() + "&host=0:10.0.0.1&stream=file&file=../../etc/passwd", "file", false},
		{"proc=" + d.Process.Key() + "&host=0:10.0.0.1&stream=file&file=/etc/passwd", "file", false},
		{"proc=" + d.Process.Key() + "&host=0:10.0.0.1&bytes=99999999999", "bytes", true},
	} {
		p := "/api/v1/logs?" + c.query
		r := e.do(http.MethodGet, p, nil, wide)
		checkOpenAPI(t, http.MethodGet, p, nil, wide, r, c.refused)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Data), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.query, r.Status, r.raw, c.field)
		}
	}
	p := "/api/v1/logs?proc=gse:no-such&host=0:10.0.0.1"
	if r := e.do(http.MethodGet, p, nil, wide); r.Status != http.StatusNotFound {
		t.Errorf("an unknown process: %d %s", r.Status, r.raw)
	}

	// The narrow app may not read gse's logs: refused and recorded.
	if r := e.do(http.MethodGet, path, nil, narrow); r.Status != http.StatusForbidden || r.Result {
		t.Fatalf("narrow app: %d %s", r.Status, r.raw)
	}
	denied := audit(t, e, "?action=scope_denied&result=refused", wide)
	if len(denied) != 1 || denied[0].Op != "v1.logs" || denied[0].Actor.App != "narrow" || denied[0].Namespaces[0] != "gse" ||
		!strings.HasPrefix(denied[0].Summary, "proc: ") {
		t.Fatalf("scope_denied entries: %+v", denied)
	}
}
