package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func seedMap(t testing.TB, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, "testdata/"+name+".request.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) taskCount() int {
	e.t.Helper()
	ts, err := e.eng.Tasks(context.Background(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(ts)
}

// TestGatewayRefusals: every refusal has its 1306xxx code, a message
// naming what is wrong, and starts nothing.
func TestGatewayRefusals(t *testing.T) {
	e := newEnv(t, testConfig())
	const jobPath = "/api/c/compapi/v2/job/operate_proc/"
	const gsePath = "/api/c/compapi/v2/gse/operate_proc/"
	cases := []struct {
		name   string
		path   string
		edit   func(m map[string]any)
		header string
		code   int
		want   []string // substrings of the message
	}{
		{name: "unknown app", path: jobPath, edit: func(m map[string]any) { m["bk_app_code"] = "nobody" },
			code: CodeAppDenied, want: []string{"bk_app_code", "nobody", "not registered"}},
		{name: "wrong secret", path: jobPath, edit: func(m map[string]any) { m["bk_app_secret"] = "yyy" },
			code: CodeAppDenied, want: []string{"bk_app_secret", "wrong secret"}},
		{name: "missing secret", path: jobPath, edit: func(m map[string]any) { delete(m, "bk_app_secret") },
			code: CodeAppDenied, want: []string{"bk_app_secret", "required"}},
		{name: "secret of another type", path: jobPath, edit: func(m map[string]any) { m["bk_app_secret"] = 123 },
			code: CodeAppDenied, want: []string{"bk_app_secret", "required"}},
		{name: "no operator", path: jobPath, edit: func(m map[string]any) { delete(m, "bk_token") },
			code: CodeOperatorRequired, want: []string{"bk_username or bk_token"}},
		{name: "anonymous with a secret", path: jobPath, edit: func(m map[string]any) { delete(m, "bk_app_code") },
			code: CodeAppDenied, want: []string{"bk_app_code", "required"}},
		{name: "user not allowed", path: jobPath, edit: func(m map[string]any) {
			m["bk_app_code"], m["bk_app_secret"], m["bk_username"], m["bk_biz_id"] = "narrow", "pw", "bob", 2
		}, code: CodeUserDenied, want: []string{"bk_username", "bob", "narrow"}},
		{name: "token where users are named", path: jobPath, edit: func(m map[string]any) {
			m["bk_app_code"], m["bk_app_secret"], m["bk_biz_id"] = "narrow", "pw", 2
		}, code: CodeUserDenied, want: []string{"bk_username", "narrow"}},
		{name: "biz not allowed", path: jobPath, edit: func(m map[string]any) { m["bk_biz_id"] = 2 },
			code: CodeAppDenied, want: []string{"bk_scope_id", "esb_test", "biz 2"}},
		{name: "biz_set not allowed", path: jobPath, edit: func(m map[string]any) {
			delete(m, "bk_biz_id")
			m["bk_scope_type"], m["bk_scope_id"] = "biz_set", "2"
		}, code: CodeAppDenied, want: []string{"biz_set 2"}},
		{name: "namespace not allowed", path: gsePath, edit: func(m map[string]any) {
			m["bk_app_code"], m["bk_app_secret"], m["bk_username"] = "narrow", "pw", "alice"
		}, code: CodeAppDenied, want: []string{"meta.namespace", "narrow", `"gse"`}},
		{name: "bad auth header", path: jobPath, edit: func(m map[string]any) {}, header: "{not json",
			code: CodeAppDenied, want: []string{AuthHeader}},
		{name: "app-only in the header, app with named users", path: jobPath, edit: func(m map[string]any) {
			for _, k := range []string{"bk_app_code", "bk_app_secret", "bk_token"} {
				delete(m, k)
			}
			m["bk_biz_id"] = 2
		}, header: `{"bk_app_code":"narrow","bk_app_secret":"pw"}`,
			code: CodeUserDenied, want: []string{"bk_username", "narrow", "app-only"}},
		{name: "app-only in the header, wrong secret", path: jobPath, edit: func(m map[string]any) {
			for _, k := range []string{"bk_app_code", "bk_app_secret", "bk_token"} {
				delete(m, k)
			}
		}, header: `{"bk_app_code":"esb_test","bk_app_secret":"nope"}`,
			code: CodeAppDenied, want: []string{"wrong secret"}},
		{name: "header with a wrong secret", path: jobPath, edit: func(m map[string]any) {
			delete(m, "bk_app_code")
			delete(m, "bk_app_secret")
		}, header: `{"bk_app_code":"esb_test","bk_app_secret":"nope","bk_username":"admin"}`,
			code: CodeAppDenied, want: []string{"wrong secret"}},
	}
	before := e.taskCount()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			var m map[string]any
			if tc.path == gsePath {
				m = seedMap(t, "seed004_gse_operate_proc")
			} else {
				m = seedMap(t, "seed002_operate_proc")
			}
			tc.edit(m)
			b, _ := json.Marshal(m)
			hdr := map[string]string{}
			if tc.header != "" {
				hdr[AuthHeader] = tc.header
			}
			r := e.do(http.MethodPost, tc.path, b, hdr)
			if r.Result || r.Code != tc.code || r.Status != http.StatusOK {
				t.Fatalf("got result %v code %d status %d (%s), want code %d in a 200 reply", r.Result, r.Code, r.Status, r.Message, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Message, w) {
					t.Errorf("message %q does not say %q", r.Message, w)
				}
			}
			if string(r.Data) != "null" {
				t.Errorf("data %s, want null", r.Data)
			}
		})
	}
	e.t = t
	if after := e.taskCount(); after != before {
		t.Fatalf("%d tasks were created by refused requests", after-before)
	}

	// What the refusals refused works when right.
	ok := []struct {
		name   string
		path   string
		edit   func(m map[string]any)
		header string
	}{
		{"narrow app on its biz with its user", jobPath, func(m map[string]any) {
			m["bk_app_code"], m["bk_app_secret"], m["bk_username"], m["bk_biz_id"] = "narrow", "pw", "alice", 2
		}, ""},
		{"credentials in the header", jobPath, func(m map[string]any) {
			delete(m, "bk_app_code")
			delete(m, "bk_app_secret")
			delete(m, "bk_token")
		}, `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"admin"}`},
		{"app-only in the header (gateway to gateway)", jobPath, func(m map[string]any) {
			for _, k := range []string{"bk_app_code", "bk_app_secret", "bk_token"} {
				delete(m, k)
			}
		}, `{"bk_app_code":"esb_test","bk_app_secret":"xxx"}`},
		{"anonymous request (anonymous_app)", gsePath, func(m map[string]any) {}, ""},
		{"biz_set allowed", jobPath, func(m map[string]any) {
			delete(m, "bk_biz_id")
			m["bk_scope_type"], m["bk_scope_id"] = "biz_set", 1
		}, ""},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			m := seedMap(t, "seed002_operate_proc")
			if tc.path == gsePath {
				m = seedMap(t, "seed004_gse_operate_proc")
			}
			tc.edit(m)
			b, _ := json.Marshal(m)
			hdr := map[string]string{}
			if tc.header != "" {
				hdr[AuthHeader] = tc.header
			}
			if r := e.do(http.MethodPost, tc.path, b, hdr); !r.Result {
				t.Fatalf("refused: %d %s", r.Code, r.Message)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	cfg := testConfig()
	cfg.Rate, cfg.Burst = 0.001, 3
	e := newEnv(t, cfg)
	body := withAuth(map[string]any{"task_id": "GSETASK:20200101000000:1"})
	for i := range 3 {
		if r := e.post("/api/c/compapi/v2/gse/get_proc_operate_result/", body); r.Code == CodeRateLimited {
			t.Fatalf("request %d limited within the burst", i)
		}
	}
	r := e.post("/api/c/compapi/v2/gse/get_proc_operate_result/", body)
	if r.Code != CodeRateLimited || r.Status != http.StatusOK || !strings.Contains(r.Message, "esb_test") {
		t.Fatalf("4th request: %d %d %s, want 1306429", r.Status, r.Code, r.Message)
	}
	// Another app has its own bucket.
	other := map[string]any{"bk_app_code": "narrow", "bk_app_secret": "pw", "bk_username": "alice", "bk_biz_id": 2,
		"bk_gse_taskid": "GSETASK:20200101000000:1"}
	if r := e.post("/api/c/compapi/v2/job/get_proc_result/", other); r.Code == CodeRateLimited {
		t.Fatal("another app was limited by esb_test's bucket")
	}
}

func TestRequestIDsUnique(t *testing.T) {
	e := newEnv(t, testConfig())
	seen := map[string]bool{}
	for range 50 {
		r := e.do(http.MethodGet, "/healthz", nil, nil)
		if r.Code != 0 || seen[r.RequestID] || r.Header.Get("X-Request-Id") != r.RequestID {
			t.Fatalf("request id %q repeated or not in the header", r.RequestID)
		}
		seen[r.RequestID] = true
	}
}

// TestNativeAuth: with native_auth the native API wants the app header and
// honours its namespaces.
func TestNativeAuth(t *testing.T) {
	cfg := testConfig()
	cfg.AnonymousApp = ""
	e := newEnv(t, cfg)
	if r := e.do(http.MethodGet, "/api/v1/info", nil, nil); r.Code != CodeAppDenied || r.Status != 401 {
		t.Fatalf("no credentials: %d %d %s", r.Status, r.Code, r.Message)
	}
	narrow := map[string]string{AuthHeader: `{"bk_app_code":"narrow","bk_app_secret":"pw","bk_username":"alice"}`}
	if r := e.do(http.MethodGet, "/api/v1/info", nil, narrow); !r.Result {
		t.Fatalf("info: %s", r.Message)
	}
	r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"gse"}}`), narrow)
	if r.Code != CodeAppDenied || !strings.Contains(r.Message, `"gse"`) {
		t.Fatalf("operate on gse by narrow: %d %s", r.Code, r.Message)
	}
	r = e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]}}`), narrow)
	if r.Code != CodeAppDenied {
		t.Fatalf("operate on every namespace by narrow: %d %s", r.Code, r.Message)
	}
	// (host, process) pairs are scoped by their own namespace.
	r = e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"targets":[{"host":{"ip":"10.0.0.1","bk_cloud_id":0},"proc":"gse:gseagent"}]}}`), narrow)
	if r.Code != CodeAppDenied || !strings.Contains(r.Message, "targets[0]") {
		t.Fatalf("operate on a gse pair by narrow: %d %s", r.Code, r.Message)
	}
	r = e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"web"}}`), narrow)
	if !r.Result {
		t.Fatalf("operate on web by narrow: %d %s", r.Code, r.Message)
	}
	r = e.do(http.MethodGet, "/api/v1/namespaces", nil, narrow)
	var nss []struct{ Name string }
	_ = json.Unmarshal(r.Data, &nss)
	if len(nss) != 1 || nss[0].Name != "web" {
		t.Fatalf("narrow sees namespaces %v, want only web", nss)
	}

	open := testConfig()
	open.NativeAuth = false
	e2 := newEnv(t, open)
	if r := e2.do(http.MethodGet, "/api/v1/info", nil, nil); !r.Result {
		t.Fatalf("open native API refused: %s", r.Message)
	}
}

// TestAppOnly: an app calling for itself through the header, with no user,
// is served and its tasks name the app as the operator; the same app in
// the body without a user is still refused 1306401.
func TestAppOnly(t *testing.T) {
	e := newEnv(t, testConfig())
	m := seedMap(t, "seed002_operate_proc")
	for _, k := range []string{"bk_app_code", "bk_app_secret", "bk_token"} {
		delete(m, k)
	}
	b, _ := json.Marshal(m)
	r := e.do(http.MethodPost, "/api/c/compapi/v2/jobv3/operate_proc/", b, map[string]string{AuthHeader: `{"bk_app_code":"esb_test","bk_app_secret":"xxx"}`})
	if !r.Result {
		t.Fatalf("app-only call refused: %d %s", r.Code, r.Message)
	}
	tv, err := e.eng.Task(context.Background(), decode[map[string]string](t, r.Data)["bk_gse_taskid"])
	if err != nil || tv.Task.Operator != "app:esb_test" {
		t.Fatalf("task operator %q (%v), want app:esb_test", tv.Task.Operator, err)
	}
	m["bk_app_code"], m["bk_app_secret"] = "esb_test", "xxx"
	if r := e.post("/api/c/compapi/v2/jobv3/operate_proc/", m); r.Code != CodeOperatorRequired || !strings.Contains(r.Message, AuthHeader) {
		t.Fatalf("app in the body without a user: %d %s, want 1306401 pointing at the header", r.Code, r.Message)
	}
}
