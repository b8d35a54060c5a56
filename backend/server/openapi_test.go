package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"gseproc/backend"
)

// The OpenAPI document is checked by kin-openapi: the document itself is
// valid OpenAPI 3, and the requests and replies of the tests that opt in
// (the compatibility suite, TestNativeAPIMatchesOpenAPI) are validated
// against it: a path the document describes by its operation (request
// parameters and body, reply status and body), a GSE/JOB path by the reply
// schema of its form (the document describes that family by form, not
// path by path).

var openAPIOnce struct {
	sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// openAPI loads and validates the served document once.
func openAPI(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	o := &openAPIOnce
	o.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
		if err != nil {
			o.err = err
			return
		}
		if o.err = doc.Validate(context.Background()); o.err != nil {
			return
		}
		doc.Servers = openapi3.Servers{{URL: "/"}} // any host: tests listen on 127.0.0.1:0
		o.doc = doc
		o.router, o.err = gorillamux.NewRouter(doc)
	})
	if o.err != nil {
		t.Fatalf("openapi.yaml: %v", o.err)
	}
	return o.doc, o.router
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, _ := openAPI(t)
	for _, p := range []string{"/api/v1/operate", "/api/v1/tasks/{id}", "/api/v1/audit", "/healthz"} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("openapi.yaml does not describe %s", p)
		}
	}
}

// gseReplySchema names the reply schema of a GSE/JOB path (by its last
// segment and its family), or "" for the plain envelope.
func gseReplySchema(path string) string {
	job := strings.Contains(path, "/job/") || strings.Contains(path, "/jobv3/")
	switch last := pathTail(path); last {
	case "operate_proc", "operate_process", "manage_proc", "operate_proc_v2", "operate_proc_multi":
		if job {
			return "JOBTaskReply"
		}
		return "GSETaskReply"
	case "get_proc_operate_result", "get_proc_operate_result_v2", "register_proc_info", "update_proc_info", "unregister_proc_info",
		"set_process_group_info":
		return "GSEEntries"
	case "get_process_group_info":
		return "ProcessGroupInfos"
	case "get_proc_result":
		return "JOBResult"
	case "get_proc_status", "get_proc_status_v2", "sync_proc_status":
		return "ProcInfos"
	}
	return ""
}

func pathTail(path string) string {
	path, _, _ = strings.Cut(path, "?")
	path = strings.TrimSuffix(path, "/")
	return path[strings.LastIndexByte(path, '/')+1:]
}

// checkOpenAPI validates one exchange against the document; refused says
// the request is one the document refuses too (a test of a refusal).
func checkOpenAPI(t testing.TB, method, target string, body []byte, hdr map[string]string, r reply, refused bool) {
	t.Helper()
	doc, router := openAPI(t)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, "http://127.0.0.1"+u.RequestURI(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	route, params, err := router.FindRoute(req)
	if err != nil { // the GSE/JOB family: the reply's schema by form
		name := "Envelope"
		if r.Result {
			name = cmpOr(gseReplySchema(u.Path), name)
		}
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Fatalf("openapi.yaml has no schema %s", name)
		}
		var v any
		if err := json.Unmarshal(r.raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := ref.Value.VisitJSON(v); err != nil {
			t.Errorf("%s %s: reply does not match openapi.yaml %s: %v\n%s", method, u.Path, name, err, r.raw)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	switch err := openapi3filter.ValidateRequest(context.Background(), in); {
	case err != nil && !refused:
		t.Errorf("%s %s: request does not match openapi.yaml: %v", method, u.Path, err)
	case err == nil && refused:
		t.Errorf("%s %s: openapi.yaml allows the request %s the server refused", method, u.Path, body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Body: io.NopCloser(bytes.NewReader(r.raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: reply %d does not match openapi.yaml: %v\n%s", method, u.Path, r.Status, err, r.raw)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestNativeAPIMatchesOpenAPI walks the native API over HTTP and validates
// every request and reply against the document.
func TestNativeAPIMatchesOpenAPI(t *testing.T) {
	e := newEnv(t, openCfg())
	call := func(method, path string, body any, refused bool) reply {
		t.Helper()
		var b []byte
		if body != nil {
			var err error
			if b, err = json.Marshal(body); err != nil {
				t.Fatal(err)
			}
		}
		r := e.do(method, path, b, nil)
		checkOpenAPI(t, method, path, b, nil, r, refused)
		return r
	}
	r := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 2, "selector": map[string]any{"namespace": "gse", "name": "proc-test"}}, false)
	if !r.Result {
		t.Fatalf("operate: %s", r.raw)
	}
	id := decode[map[string]any](t, r.Data)["task_id"].(string)
	ch, err := e.eng.Watch(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range ch { // to the task's end
	}
	for _, p := range []string{"/healthz", "/api/v1/tasks", "/api/v1/tasks/" + url.PathEscape(id), "/api/v1/tasks/GSETASK:20200101000000:1",
		"/api/v1/events/recent?n=5", "/api/v1/audit?limit=5", "/api/v1/processes?namespace=gse"} {
		call(http.MethodGet, p, nil, false)
	}
	// The selector's hosts in the compact form and as objects, mixed.
	hv, err := e.eng.Hosts(context.Background(), backend.HostQuery{Namespace: "gse", Name: "proc-test"})
	if err != nil || len(hv) < 2 {
		t.Fatalf("%d hosts, %v", len(hv), err)
	}
	hosts := []any{hv[0].Host.AgentID(), map[string]any{"ip": hv[1].Host.IP, "bk_cloud_id": hv[1].Host.CloudID}}
	if r := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 2, "selector": map[string]any{"namespace": "gse", "name": "proc-test", "hosts": hosts}}, false); !r.Result {
		t.Fatalf("operate on compact hosts: %s", r.raw)
	}
	// Without its results: the task as it is, results [].
	head := call(http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"?results=false", nil, false)
	if tv := decode[backend.TaskView](t, head.Data); tv.Task.ID != id || tv.Task.Counts.Final() == 0 || tv.Results == nil || len(tv.Results) != 0 {
		t.Fatalf("task without results: %s", head.raw)
	}
	if r := call(http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"?results=no", nil, true); r.Status != http.StatusBadRequest || !strings.Contains(string(r.raw), `"field":"results"`) {
		t.Fatalf("results=no: %d %s, want 400 naming results", r.Status, r.raw)
	}
	if r := call(http.MethodPost, "/api/v1/operate", map[string]any{"op_type": 6}, true); r.Status != http.StatusBadRequest {
		t.Fatalf("op_type 6: %d %s", r.Status, r.raw)
	}
	if r := call(http.MethodPost, "/api/v1/process_groups", map[string]any{"namespace": "gse", "hosts": []any{map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0}},
		"resource": map[string]any{"cpu_pool_limit": 20, "mem_pool_limit": 0, "cpu_pool_weight": 0, "mem_pool_weight": 1}}, false); !r.Result {
		t.Fatalf("process group: %s", r.raw)
	}
	call(http.MethodGet, "/api/v1/process_groups?namespace=gse", nil, false)
	if r := call(http.MethodPost, "/api/v1/process_groups", map[string]any{"namespace": "gse", "hosts": []any{},
		"resource": map[string]any{"cpu_pool_limit": 200}}, true); r.Status != http.StatusBadRequest {
		t.Fatalf("a bad process group: %d %s", r.Status, r.raw)
	}
}
