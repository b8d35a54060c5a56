package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

func openCfg() config.ServerConfig {
	cfg := testConfig()
	cfg.NativeAuth = false
	return cfg
}

// TestTaskStreamSSE reads the raw event stream: ids are the result seqs,
// Last-Event-ID resumes after it, "end" closes.
func TestTaskStreamSSE(t *testing.T) {
	e := newEnv(t, openCfg())
	r := e.do(http.MethodPost, "/api/v1/operate", []byte(`{"op_type":2,"selector":{"namespace":"gse"}}`), nil)
	task := decode[model.Task](t, r.Data)
	if !r.Result || task.Targets < 4 {
		t.Fatalf("operate: %s %s", r.Message, r.Data)
	}
	read := func(lastID string) (ids []int64, end bool) {
		req, _ := http.NewRequest(http.MethodGet, e.hs.URL+"/api/v1/tasks/"+task.ID+"/stream", nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := e.hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var id int64
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				name = line[7:]
			case strings.HasPrefix(line, "data: "):
				if name == "result" {
					var res model.Result
					if err := json.Unmarshal([]byte(line[6:]), &res); err != nil || res.Seq != id {
						t.Fatalf("result event id %d, data seq %d (%v)", id, res.Seq, err)
					}
					ids = append(ids, id)
				}
				if name == "end" {
					var tk model.Task
					if err := json.Unmarshal([]byte(line[6:]), &tk); err != nil || tk.ID != task.ID || tk.Status == model.TaskRunning {
						t.Fatalf("end event %s (%v)", line, err)
					}
					end = true
				}
			}
		}
		return ids, end
	}
	ids, end := read("")
	if !end || len(ids) != task.Targets {
		t.Fatalf("first read: %d ids, end %v", len(ids), end)
	}
	ids, end = read("2")
	if !end || len(ids) != task.Targets-2 || ids[0] != 3 {
		t.Fatalf("resume after 2: ids %v", ids)
	}
	r = e.do(http.MethodGet, "/api/v1/tasks/"+task.ID+"/stream", nil, map[string]string{"Last-Event-ID": "x"})
	if r.Code != CodeArgument || !strings.Contains(r.Message, "Last-Event-ID") {
		t.Fatalf("bad Last-Event-ID: %d %s", r.Code, r.Message)
	}
	r = e.do(http.MethodGet, "/api/v1/tasks/GSETASK:20200101000000:5/stream", nil, nil)
	if r.Status != 404 || r.Code != CodeNotFound {
		t.Fatalf("stream of an unknown task: %d %d", r.Status, r.Code)
	}
}

func TestNativeQueries(t *testing.T) {
	e := newEnv(t, openCfg())
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{"/api/v1/hosts?host=10.0.0.1", 400, "host[0]"},
		{"/api/v1/hosts?label=novalue", 400, "label"},
		{"/api/v1/hosts?limit=-4", 400, "limit"},
		{"/api/v1/hosts?form=table", 400, "form"},
		{"/api/v1/tasks?limit=abc", 400, "limit"},
		{"/api/v1/events/recent?n=0", 400, "n:"},
		{"/api/v1/tasks/GSETASK:20200101000000:5", 404, "not found"},
		{"/api/v1/nothing", 404, "no endpoint"},
		{"/api/c/compapi/v2/gse/create_proc_info/", 404, "no endpoint"},
	}
	for _, tc := range cases {
		r := e.do(http.MethodGet, tc.path, nil, nil)
		if r.Result || r.Status != tc.status || !strings.Contains(r.Message, tc.want) {
			t.Errorf("GET %s: %d %d %s, want %d and %q", tc.path, r.Status, r.Code, r.Message, tc.status, tc.want)
		}
	}
	r := e.do(http.MethodGet, "/api/v1/hosts?namespace=gse&name=proc-test&host=1:10.0.0.1,0:10.0.0.1", nil, nil)
	views := decode[[]backend.HostView](t, r.Data)
	if len(views) != 2 || len(views[0].Procs) != 1 || views[0].Procs[0].Key != "gse:proc-test" {
		t.Fatalf("hosts query: %s", r.Data)
	}
	r = e.do(http.MethodDelete, "/api/v1/processes/bad-key", nil, nil)
	if r.Code != CodeArgument || !strings.Contains(r.Message, "key") {
		t.Fatalf("delete bad key: %s", r.Message)
	}
	// A key whose name is a path (value_key) deletes through ?key=.
	e.post("/api/c/compapi/v2/job/operate_proc/", readFile(t, "testdata/seed002_operate_proc.request.json"))
	r = e.do(http.MethodDelete, "/api/v1/processes?key=biz_1:/usr/local/xxx/gseagent", nil, nil)
	if !r.Result {
		t.Fatalf("delete by ?key=: %s", r.Message)
	}
	r = e.do(http.MethodPost, "/api/v1/processes", []byte(`{"process": {"meta": {"namespace": 5}}, "hosts": "x"}`), nil)
	if r.Code != CodeArgument || !strings.Contains(r.Message, "process.meta.namespace") || !strings.Contains(r.Message, "hosts: want an array") {
		t.Fatalf("save with wrong types: %s", r.Message)
	}
	var ed struct {
		Kind   string             `json:"kind"`
		Errors []model.FieldError `json:"errors"`
	}
	_ = json.Unmarshal(r.Data, &ed)
	if ed.Kind != "validation" || len(ed.Errors) != 2 {
		t.Fatalf("error data %s", r.Data)
	}

	// Supplier ids are the v1 forms' (gathered from their hosts): a native
	// request that carries them is refused naming the field, and nothing is
	// stored or dispatched.
	tasks0, _ := e.eng.Tasks(t.Context(), 100000)
	for _, x := range []struct{ path, body string }{
		{"/api/v1/operate", `{"op_type":2,"selector":{"namespace":"gse"},"bk_supplier_ids":{"0:10.0.0.1":-5}}`},
		{"/api/v1/process_groups", `{"namespace":"gse","hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],"resource":{"cpu_pool_limit":20},"bk_supplier_ids":{"0:10.0.0.1":-5}}`},
	} {
		if r := e.do(http.MethodPost, x.path, []byte(x.body), nil); r.Result || r.Status != http.StatusBadRequest || !strings.HasPrefix(r.Message, "invalid request: bk_supplier_ids: ") {
			t.Errorf("POST %s with bk_supplier_ids: %d %s", x.path, r.Status, r.Message)
		}
	}
	if ts, _ := e.eng.Tasks(t.Context(), 100000); len(ts) != len(tasks0) {
		t.Errorf("%d tasks after the refused operate, were %d", len(ts), len(tasks0))
	}
	if gs, err := e.eng.ProcessGroups(t.Context(), backend.GroupQuery{}); err != nil || len(gs) != 0 {
		t.Errorf("groups after the refused set: %+v %v", gs, err)
	}
}

var sampleRe = regexp.MustCompile(`^[a-z_]+(\{[^}]*\})? [0-9.e+-]+$|^[a-z_]+(\{[^}]*\})? \+Inf$`)

func TestMetricsAndHealth(t *testing.T) {
	e := newEnv(t, testConfig())
	r := e.post("/api/c/compapi/v2/job/operate_proc/", readFile(t, "testdata/seed002_operate_proc.request.json"))
	id := decode[map[string]string](t, r.Data)["bk_gse_taskid"]
	e.pollJob("/api/c/compapi/v2/job/get_proc_result/", map[string]any{"bk_biz_id": 1}, id)
	e.post("/api/c/compapi/v2/job/operate_proc/", `{`)
	if r := e.do(http.MethodGet, "/healthz", nil, nil); !r.Result || !strings.Contains(string(r.Data), `"status":"ok"`) {
		t.Fatalf("healthz: %s", r.raw)
	}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := e.hs.Client().Get(e.hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, `gseproc_host_results_total{state=`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		`gseproc_http_requests_total{code="0",endpoint="job.operate_proc"} 1`, // labels in name order, as client_golang writes them
		`gseproc_http_requests_total{code="1306406",endpoint="job.operate_proc"} 1`,
		`gseproc_http_request_duration_seconds_bucket{endpoint="job.operate_proc",le="+Inf"} 2`,
		`gseproc_http_request_duration_seconds_count{endpoint="job.get_proc_result"}`,
		`gseproc_tasks_created_total{op="stop",source="api:operate_proc"} 1`,
		`gseproc_host_results_total{state="success"} 1`,
		`gseproc_host_result_duration_seconds_count 1`,
		"# TYPE gseproc_http_request_duration_seconds histogram",
		"gseproc_sse_streams 0",
		"# TYPE go_goroutines gauge", // the Go runtime and process collectors
		"# TYPE process_cpu_seconds_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(line, "# ") && !sampleRe.MatchString(line) {
			t.Errorf("not a Prometheus sample line: %q", line)
		}
	}
	resp, err := e.hs.Client().Get(e.hs.URL + "/api/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(doc), "openapi: 3") {
		t.Fatalf("openapi document: %.40s", doc)
	}
	if !bytes.Equal(doc, OpenAPI()) {
		t.Fatal("/api/v1/openapi.yaml is not the embedded document")
	}
	od, _ := openAPI(t) // parsed and validated by kin-openapi
	for _, p := range []string{"/api/v1/info", "/api/v1/namespaces", "/api/v1/hosts", "/api/v1/processes", "/api/v1/operate",
		"/api/v1/tasks", "/api/v1/tasks/{id}", "/api/v1/tasks/{id}/cancel", "/api/v1/tasks/{id}/stream", "/api/v1/events",
		"/api/v1/events/recent", "/api/v1/audit", "/api/v1/process_groups", "/healthz", "/readyz", "/metrics"} {
		if od.Paths.Find(p) == nil {
			t.Errorf("openapi.yaml does not describe %s", p)
		}
	}
	for _, code := range []string{"1306429", "1241002", "1000115"} {
		if !strings.Contains(od.Info.Description, code) {
			t.Errorf("openapi.yaml's description does not explain code %s", code)
		}
	}
}

// slowBackend delays Info, standing in for a slow request in flight.
type slowBackend struct {
	backend.Backend
	delay   time.Duration
	started chan struct{}
	once    sync.Once
}

func (s *slowBackend) Info(ctx context.Context) (backend.Info, error) {
	s.once.Do(func() { close(s.started) })
	time.Sleep(s.delay)
	return s.Backend.Info(ctx)
}

// TestGracefulShutdown: cancelling Serve lets an in-flight request finish,
// ends open streams, and refuses new connections.
func TestGracefulShutdown(t *testing.T) {
	e := newEnv(t, openCfg())
	sb := &slowBackend{Backend: e.eng, delay: 300 * time.Millisecond, started: make(chan struct{})}
	srv := New(sb, openCfg(), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	// An open event stream.
	streamDone := make(chan struct{})
	resp, err := http.Get(base + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close(); close(streamDone) }()

	got := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + "/api/v1/info")
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-sb.started
	cancel()
	select {
	case code := <-got:
		if code != 200 {
			t.Fatalf("in-flight request got %d during shutdown", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request did not finish")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
	select {
	case <-streamDone:
	case <-time.After(5 * time.Second):
		t.Fatal("event stream still open after shutdown")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("new request accepted after shutdown")
	}
}

// TestStreamOutlivesReadTimeout: an event stream stays open longer than
// the server's read timeout.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	cfg := openCfg()
	cfg.ReadTimeout = config.Duration(200 * time.Millisecond)
	e := newEnv(t, cfg)
	srv := New(e.eng, cfg, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(700 * time.Millisecond)
	e.fleet.SetOffline(model.Host{IP: "10.0.0.1", CloudID: 0}, true)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream closed by the read timeout")
			}
			if strings.Contains(l, `"event_name":"agent_offline"`) {
				return
			}
		case <-timeout:
			t.Fatal("no event after the read timeout")
		}
	}
}

// TestConcurrentClients: several clients operate and poll at once (run
// with -race); every task's results come back under its own keys.
func TestConcurrentClients(t *testing.T) {
	e := newEnv(t, testConfig())
	seed := readFile(t, "testdata/seed004_gse_operate_proc.request.json")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 8 {
		wg.Go(func() {
			c := e.hs.Client()
			for range 5 {
				resp, err := c.Post(e.hs.URL+"/api/c/compapi/v2/gse/operate_proc/", "application/json", strings.NewReader(string(seed)))
				if err != nil {
					errs <- err.Error()
					return
				}
				var r struct {
					Code int
					Data struct {
						TaskID string `json:"task_id"`
					}
				}
				_ = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if r.Code != 0 {
					errs <- "operate code " + strconv.Itoa(r.Code)
					return
				}
				body := `{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"w` + strconv.Itoa(w) + `","task_id":"` + r.Data.TaskID + `"}`
				deadline := time.Now().Add(30 * time.Second)
				for {
					resp, err := c.Post(e.hs.URL+"/api/c/compapi/v2/gse/get_proc_operate_result/", "application/json", strings.NewReader(body))
					if err != nil {
						errs <- err.Error()
						return
					}
					var q struct {
						Code int
						Data map[string]struct {
							ErrorCode int `json:"error_code"`
						}
					}
					_ = json.NewDecoder(resp.Body).Decode(&q)
					resp.Body.Close()
					en, ok := q.Data["1:2:10.0.0.1:gse:proc-test"]
					if q.Code == 0 && ok && en.ErrorCode != model.CodeRunning {
						break
					}
					if time.Now().After(deadline) {
						errs <- "task " + r.Data.TaskID + " not final within 30 s"
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
