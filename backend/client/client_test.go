package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/client"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/server"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// serve starts the real engine on a simulated demo fleet behind the real
// server on 127.0.0.1, and a client of it.
func serve(t *testing.T, hosts int, opts ...server.Option) (*client.Client, *simulator.Fleet, *httptest.Server) {
	c, fleet, hs, _ := serveEngine(t, hosts, opts...)
	return c, fleet, hs
}

func serveEngine(t *testing.T, hosts int, opts ...server.Option) (*client.Client, *simulator.Fleet, *httptest.Server, *engine.Engine) {
	t.Helper()
	eng, fleet := startEngine(t, quietDemo(hosts))
	srv := server.New(eng, consoleConfig(), nil, opts...)
	hs := httptest.NewServer(srv.Handler())
	c := client.New(hs.URL, client.WithCredentials("console", "s3cret", "tester"),
		client.WithReconnect(5*time.Millisecond, 50*time.Millisecond, 20))
	t.Cleanup(func() {
		_ = c.Close()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
	})
	return c, fleet, hs, eng
}

// quietDemo is a demo fleet of hosts whose agents answer fast and never fail.
func quietDemo(hosts int) config.SimulatorConfig {
	sc := config.Default().Simulator
	sc.Hosts, sc.Seed, sc.Demo = hosts, 3, true
	sc.LatencyMedian, sc.LatencyP99 = config.Duration(2*time.Millisecond), config.Duration(20*time.Millisecond)
	sc.FailureRate, sc.OfflineRate, sc.UnreachableRate, sc.CrashRate = 0, 0, 0, 0
	return sc
}

// consoleConfig is the server's default configuration with the app the
// test clients use: "console" (secret s3cret), biz 1 and every namespace.
func consoleConfig() config.ServerConfig {
	cfg := config.Default().Server
	cfg.Apps = []config.AppConfig{{Code: "console", Salt: "pepper", SecretSHA256: config.HashSecret("pepper", "s3cret"),
		Biz: []int{1}, Namespaces: []string{"*"}}}
	return cfg
}

// startEngine starts the real engine on a simulated fleet seeded with its
// definitions; both close when the test ends, after what later cleanups close.
func startEngine(tb testing.TB, sc config.SimulatorConfig) (*engine.Engine, *simulator.Fleet) {
	tb.Helper()
	fleet := simulator.New(sc)
	eng := engine.New(config.Default().Engine, fleet, fleet, store.NewMemory())
	tb.Cleanup(func() { _ = eng.Close(); _ = fleet.Close() })
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
		tb.Fatal(err)
	}
	return eng, fleet
}

// collect reads a watch channel until it closes (bounded).
func collect(t *testing.T, ch <-chan model.Result) []model.Result {
	t.Helper()
	var out []model.Result
	timeout := time.After(30 * time.Second)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, r)
		case <-timeout:
			t.Fatalf("watch did not complete in 30s (%d results)", len(out))
		}
	}
}

func checkSeqs(t *testing.T, rs []model.Result, from int64, want int) {
	t.Helper()
	if len(rs) != want {
		t.Fatalf("%d results, want %d", len(rs), want)
	}
	for i, r := range rs {
		if r.Seq != from+int64(i)+1 {
			t.Fatalf("result %d has seq %d, want %d (lost or duplicated)", i, r.Seq, from+int64(i)+1)
		}
		if !r.State.Final() {
			t.Fatalf("result %d not final: %s", i, r.State)
		}
	}
}

func TestOperateAndWatch(t *testing.T) {
	c, _, _ := serve(t, 80)
	ctx := context.Background()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode != "remote" || info.Hosts < 80 {
		t.Fatalf("info %+v: want remote mode and >= 80 hosts", info)
	}
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Operator != "tester" || task.Targets == 0 {
		t.Fatalf("task %+v: want operator tester and targets", task)
	}
	ch, err := c.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	rs := collect(t, ch)
	checkSeqs(t, rs, 0, task.Targets)
	tv, err := c.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tv.Task.Status != model.TaskDone || len(tv.Results) != task.Targets {
		t.Fatalf("task view %s with %d results", tv.Task.Status, len(tv.Results))
	}
	// Watching a finished task from the middle replays only what follows.
	ch, err = c.Watch(ctx, task.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, collect(t, ch), 2, task.Targets-2)
}

// TestWatchResumesAfterServerCutsStream: the server ends every stream
// after 3 events; the client resumes with Last-Event-ID and gets every
// result exactly once.
func TestWatchResumesAfterServerCutsStream(t *testing.T) {
	c, _, hs := serve(t, 150, server.WithStreamCut(3))
	ctx := context.Background()
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Targets < 10 {
		t.Fatalf("only %d targets; want enough to cut the stream several times", task.Targets)
	}
	ch, err := c.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, collect(t, ch), 0, task.Targets)
	// The stream really was cut and resumed: one request per 3 results.
	resp, err := hs.Client().Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`gseproc_http_requests_total\{code="0",endpoint="v1.task_stream"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no task_stream requests in /metrics:\n%s", b)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < task.Targets/3 {
		t.Fatalf("%d stream requests for %d results cut every 3: the stream was not resumed", n, task.Targets)
	}
}

func TestClientErrors(t *testing.T) {
	c, _, hs := serve(t, 20)
	ctx := context.Background()
	_, err := c.Task(ctx, "GSETASK:20200101000000:999999")
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown task: %v, want ErrNotFound", err)
	}
	if _, err := c.Watch(ctx, "GSETASK:20200101000000:999999", 0); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("watch unknown task: %v, want ErrNotFound", err)
	}
	_, err = c.Operate(ctx, backend.OperateRequest{Op: 5, Selector: backend.Selector{Namespace: "gse"}})
	var ve model.ValidationError
	if !errors.As(err, &ve) || ve.Fields()[0] != "op_type" {
		t.Fatalf("op 5: %v, want a ValidationError naming op_type", err)
	}
	err = c.SaveProcess(ctx, model.ProcessDef{Process: model.Process{Meta: model.Meta{Namespace: "x", Name: "y"}}})
	if !errors.As(err, &ve) || len(ve) < 3 {
		t.Fatalf("bad definition: %v, want a ValidationError naming each field", err)
	}
	if err := c.DeleteProcess(ctx, "nope:nothing"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("delete unknown: %v, want ErrNotFound", err)
	}
	bad := client.New(hs.URL, client.WithCredentials("console", "wrong", "tester"))
	defer bad.Close()
	var ae *client.APIError
	if _, err := bad.Info(ctx); !errors.As(err, &ae) || ae.Code != server.CodeAppDenied {
		t.Fatalf("wrong secret: %v, want APIError 1306403", err)
	}
}

func TestRegistryRoundTrip(t *testing.T) {
	c, _, _ := serve(t, 20)
	ctx := context.Background()
	nss, err := c.Namespaces(ctx)
	if err != nil || len(nss) == 0 {
		t.Fatalf("namespaces: %v %v", nss, err)
	}
	p := model.Process{Meta: model.Meta{Namespace: "tools", Name: "echo", Labels: map[string]string{"team": "a"}},
		Spec: model.Spec{Identity: model.Identity{ProcName: "echo", SetupPath: "/opt/echo", PidPath: "/opt/echo/echo.pid"},
			Control: model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", ShellExt: "sh"},
			Policy:  model.DefaultPolicy()}}
	p.Spec.Policy.AutoType = model.AutoResident
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	if err := c.SaveProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h}}); err != nil {
		t.Fatal(err)
	}
	defs, err := c.Processes(ctx, backend.ProcQuery{Namespace: "tools", Labels: map[string]string{"team": "a"}, Host: &h})
	if err != nil || len(defs) != 1 || defs[0].Process.Key() != "tools:echo" {
		t.Fatalf("processes: %v %v", defs, err)
	}
	views, err := c.Hosts(ctx, backend.HostQuery{Namespace: "tools", Hosts: []model.Host{h}})
	if err != nil || len(views) != 1 || len(views[0].Procs) != 1 {
		t.Fatalf("hosts: %+v %v", views, err)
	}
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "tools", Name: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	rs := collect(t, ch)
	if len(rs) != 1 || rs[0].Code != 0 {
		t.Fatalf("start: %+v", rs)
	}
	ts, err := c.Tasks(ctx, 10)
	if err != nil || len(ts) == 0 || ts[0].ID != task.ID {
		t.Fatalf("tasks: %v %v", ts, err)
	}
	if err := c.DeleteProcess(ctx, "tools:echo"); err != nil {
		t.Fatal(err)
	}
	if defs, _ := c.Processes(ctx, backend.ProcQuery{Namespace: "tools"}); len(defs) != 0 {
		t.Fatalf("still there after delete: %v", defs)
	}
	if _, err := c.RecentEvents(ctx, 10); err != nil {
		t.Fatal(err)
	}
}

func TestEventsStream(t *testing.T) {
	c, fleet, _ := serve(t, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := model.Host{IP: "10.0.0.1", CloudID: 1}
	fleet.SetOffline(h, true)
	timeout := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case e := <-ch:
			got = e.Host.AgentID() == h.AgentID() && e.Kind == model.EventAgentOffline
		case <-timeout:
			t.Fatal("no agent_offline event through the stream in 10s")
		}
	}
	cancel()
	timeout = time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("events channel did not close after cancel")
		}
	}
}

// BenchmarkOperateWatch1000: one status op over the web namespace of a
// 1000-host simulated fleet (about 800 (host, process) targets)
// through the server, every result streamed back to the client.
func BenchmarkOperateWatch1000(b *testing.B) {
	benchOperateWatch(b, 1000, backend.Selector{Namespace: "web"})
}

// BenchmarkOperateWatch10000: one status op on gse:bkunifylogbeat across a
// 10,000-host fleet (8432 targets), every result streamed back through the server.
func BenchmarkOperateWatch10000(b *testing.B) {
	benchOperateWatch(b, 10000, backend.Selector{Namespace: "gse", Name: "bkunifylogbeat"})
}

// BenchmarkGetProcOperateResult10000: the GSE result query of a finished
// task over a 10,000-host fleet (one JSON map of 8432 entries).
func BenchmarkGetProcOperateResult10000(b *testing.B) {
	c, hs := benchServer(b, 10000)
	ctx := context.Background()
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse", Name: "bkunifylogbeat"}})
	if err != nil {
		b.Fatal(err)
	}
	ch, _ := c.Watch(ctx, task.ID, 0)
	for range ch {
	}
	body := []byte(`{"bk_app_code":"esb_test","bk_app_secret":"xxx","bk_username":"u","task_id":"` + task.ID + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hs.Client().Post(hs.URL+"/api/c/compapi/v2/gse/get_proc_operate_result_v2/", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var env struct {
			Code int
			Data map[string]json.RawMessage
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || env.Code != 0 || len(env.Data) != task.Targets {
			b.Fatalf("code %d, %d entries of %d (%v)", env.Code, len(env.Data), task.Targets, err)
		}
	}
	b.ReportMetric(float64(task.Targets), "entries/op")
}

func benchServer(b *testing.B, hosts int) (*client.Client, *httptest.Server) {
	sc := config.Default().Simulator
	sc.Hosts, sc.Seed = hosts, 9
	sc.LatencyMedian, sc.LatencyP99 = 0, 0
	sc.FailureRate, sc.OfflineRate, sc.UnreachableRate, sc.CrashRate = 0, 0, 0, 0
	eng, _ := startEngine(b, sc)
	cfg := config.Default().Server
	cfg.NativeAuth = false
	cfg.Rate = 0
	cfg.Apps = []config.AppConfig{{Code: "esb_test", SecretSHA256: config.HashSecret("", "xxx"), Namespaces: []string{"*"}}}
	srv := server.New(eng, cfg, nil)
	hs := httptest.NewServer(srv.Handler())
	c := client.New(hs.URL)
	b.Cleanup(func() { _ = c.Close(); hs.Close(); _ = srv.Close() })
	return c, hs
}

func benchOperateWatch(b *testing.B, hosts int, sel backend.Selector) {
	c, _ := benchServer(b, hosts)
	ctx := context.Background()
	targets := 0
	for b.Loop() {
		task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: sel})
		if err != nil {
			b.Fatal(err)
		}
		ch, err := c.Watch(ctx, task.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for range ch {
			n++
		}
		if n != task.Targets {
			b.Fatalf("%d results of %d", n, task.Targets)
		}
		targets = n
	}
	b.ReportMetric(float64(targets), "targets/op")
}

// TestClientMatchesEngine: what the console reads through the client is
// what it reads from the embedded engine.
func TestClientMatchesEngine(t *testing.T) {
	c, _, _, eng := serveEngine(t, 60)
	ctx := context.Background()
	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}, Source: "console"})
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.Watch(ctx, task.ID, 0)
	collect(t, ch)
	// same reads one thing through the engine and through the client and
	// compares the JSON. The simulated fleet stamps reports with the current
	// second, so on a loaded machine the two reads can straddle a second
	// boundary; a real mismatch persists, a straddle does not, so a differing
	// pair is read again (a few times) before the test fails.
	same := func(what string, read func() (a, b any, errA, errB error)) {
		t.Helper()
		var ja, jb []byte
		for try := 0; try < 5; try++ {
			a, b, errA, errB := read()
			if errA != nil || errB != nil {
				t.Fatalf("%s: %v / %v", what, errA, errB)
			}
			ja, _ = json.Marshal(a)
			jb, _ = json.Marshal(b)
			if string(ja) == string(jb) {
				return
			}
		}
		t.Fatalf("%s differs:\nengine %s\nclient %s", what, ja, jb)
	}
	same("namespaces", func() (any, any, error, error) {
		n1, e1 := eng.Namespaces(ctx)
		n2, e2 := c.Namespaces(ctx)
		return n1, n2, e1, e2
	})
	for _, q := range []backend.HostQuery{{}, {Namespace: "gse"}, {Namespace: "web", Labels: map[string]string{"app": "nginx"}, Limit: 5},
		{Hosts: []model.Host{{IP: "10.0.0.1", CloudID: 1}}}} {
		same(fmt.Sprintf("hosts %+v", q), func() (any, any, error, error) {
			h1, e1 := eng.Hosts(ctx, q)
			h2, e2 := c.Hosts(ctx, q)
			return h1, h2, e1, e2
		})
	}
	for _, q := range []backend.HostQuery{{}, {Namespace: "web", Labels: map[string]string{"app": "nginx"}}} {
		same(fmt.Sprintf("hosts one at a time %+v", q), func() (any, any, error, error) {
			h1, e1 := eng.Hosts(ctx, q)
			var h2 []backend.HostView
			e2 := c.HostsEach(ctx, q, func(v *backend.HostView) {
				// The host's label map is the reader's to reuse:
				// copied, as HostsReader asks.
				kept := *v
				kept.Labels = maps.Clone(v.Labels)
				h2 = append(h2, kept)
			})
			return h1, h2, e1, e2
		})
	}
	for _, q := range []backend.HostQuery{{}, {Namespace: "gse"}, {Namespace: "web", Labels: map[string]string{"app": "nginx"}, Limit: 5}} {
		same(fmt.Sprintf("hosts in the list form %+v", q), func() (any, any, error, error) {
			h1, e1 := eng.Hosts(ctx, q)
			h2, e2 := listHosts(ctx, c, q)
			return listView(h1), h2, e1, e2
		})
		same(fmt.Sprintf("hosts in the list form, labels by index %+v", q), func() (any, any, error, error) {
			h1, e1 := eng.Hosts(ctx, q)
			h2, indexed, e2 := indexedHosts(ctx, c, q)
			if e2 == nil && !indexed && slices.ContainsFunc(h1, func(h backend.HostView) bool { return len(h.Labels) > 0 }) {
				e2 = fmt.Errorf("labels not given by index")
			}
			return listView(h1), h2, e1, e2
		})
	}
	for _, q := range []backend.ProcQuery{{}, {Namespace: "gse"}, {Name: "proc-test"}, {Host: &model.Host{IP: "127.0.0.1"}}} {
		same(fmt.Sprintf("processes %+v", q), func() (any, any, error, error) {
			p1, e1 := eng.Processes(ctx, q)
			p2, e2 := c.Processes(ctx, q)
			return p1, p2, e1, e2
		})
	}
	same("task", func() (any, any, error, error) {
		t1, e1 := eng.Task(ctx, task.ID)
		t2, e2 := c.Task(ctx, task.ID)
		return t1, t2, e1, e2
	})
	same("task head", func() (any, any, error, error) {
		t1, e1 := backend.TaskSummary(ctx, eng, task.ID)
		t2, e2 := c.TaskSummary(ctx, task.ID)
		return t1, t2, e1, e2
	})
	same("task results one at a time", func() (any, any, error, error) {
		t1, e1 := eng.Task(ctx, task.ID)
		var rs []model.Result
		t2, e2 := c.TaskResults(ctx, task.ID, func(r *model.Result) { rs = append(rs, *r) })
		if t2.Results != nil {
			t.Fatalf("TaskResults returned %d results in its view", len(t2.Results))
		}
		t2.Results = rs
		return t1, t2, e1, e2
	})
	same("tasks", func() (any, any, error, error) {
		l1, e1 := eng.Tasks(ctx, 5)
		l2, e2 := c.Tasks(ctx, 5)
		return l1, l2, e1, e2
	})
	same("info", func() (any, any, error, error) {
		i1, e1 := eng.Info(ctx)
		i2, e2 := c.Info(ctx)
		i1.Mode, i1.Endpoint = i2.Mode, i2.Endpoint
		return i1, i2, e1, e2
	})
}

func TestCancelThroughServer(t *testing.T) {
	sc := config.Default().Simulator
	sc.Hosts, sc.Seed, sc.Demo = 40, 4, true
	sc.LatencyMedian, sc.LatencyP99 = config.Duration(2*time.Second), config.Duration(3*time.Second)
	sc.FailureRate, sc.OfflineRate, sc.UnreachableRate, sc.CrashRate = 0, 0, 0, 0
	fleet := simulator.New(sc)
	ecfg := config.Default().Engine
	ecfg.Concurrency = 1
	eng := engine.New(ecfg, fleet, fleet, store.NewMemory())
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Seed(ctx, fleet.Definitions()); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Server
	cfg.NativeAuth = false
	srv := server.New(eng, cfg, nil)
	hs := httptest.NewServer(srv.Handler())
	c := client.New(hs.URL)
	t.Cleanup(func() {
		_ = c.Close()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
		_ = eng.Close()
		_ = fleet.Close()
	})

	task, err := c.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	rs := collect(t, ch)
	cancelled := 0
	for _, r := range rs {
		if r.State == model.StateCancelled {
			cancelled++
		}
	}
	if len(rs) != task.Targets || cancelled == 0 {
		t.Fatalf("%d results (%d cancelled) of %d targets", len(rs), cancelled, task.Targets)
	}
	tv, err := c.Task(ctx, task.ID)
	if err != nil || tv.Task.Status != model.TaskCanceled {
		t.Fatalf("task after cancel: %s %v", tv.Task.Status, err)
	}
	if err := c.Cancel(ctx, "GSETASK:20200101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

// TestSentinelsThroughServer: conflict and read-only reach the client as
// the model's sentinel errors.
func TestSentinelsThroughServer(t *testing.T) {
	c, _, _ := serve(t, 20)
	ctx := context.Background()
	defs, err := c.Processes(ctx, backend.ProcQuery{Namespace: "gse", Name: "proc-test"})
	if err != nil || len(defs) != 1 || defs[0].Rev == 0 {
		t.Fatalf("processes: %v %v", defs, err)
	}
	d := defs[0]
	if err := c.SaveProcess(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := c.SaveProcess(ctx, d); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("save with a stale rev: %v, want ErrConflict", err)
	}

	sc := config.Default().Simulator
	sc.Hosts, sc.Seed, sc.Demo = 10, 1, true
	fleet := simulator.New(sc)
	eng := engine.New(config.Default().Engine, fleet, fleet, store.NewMemory(), engine.WithReadOnly(true))
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Server
	cfg.NativeAuth = false
	srv := server.New(eng, cfg, nil)
	hs := httptest.NewServer(srv.Handler())
	ro := client.New(hs.URL)
	t.Cleanup(func() { _ = ro.Close(); hs.Close(); _ = srv.Close(); _ = eng.Close(); _ = fleet.Close() })
	info, err := ro.Info(ctx)
	if err != nil || !info.ReadOnly {
		t.Fatalf("info of a read-only server: %+v %v", info, err)
	}
	_, err = ro.Operate(ctx, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "gse"}})
	if !errors.Is(err, model.ErrReadOnly) {
		t.Fatalf("stop on a read-only server: %v, want ErrReadOnly", err)
	}
}

// TestProcessGroupsThroughServer: the HTTP client sets and reads process
// groups as the engine does (validation named by field, 117 for a host
// without an agent, the audit trail records the set).
func TestProcessGroupsThroughServer(t *testing.T) {
	c, _, _ := serve(t, 20)
	ctx := context.Background()
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	none := model.Host{IP: "10.254.0.9", CloudID: 0}
	pool := model.GroupResource{CPUPoolLimit: 30, MemPoolLimit: 40, CPUPoolWeight: 1}
	rs, err := c.SetProcessGroups(ctx, backend.GroupRequest{Namespace: "web", Hosts: []model.Host{h, none}, Resource: pool})
	if err != nil || len(rs) != 2 || rs[0].Host != h || rs[0].Code != 0 || rs[1].Code != model.CodeAgentAbnormal {
		t.Fatalf("set: %+v %v", rs, err)
	}
	gs, err := c.ProcessGroups(ctx, backend.GroupQuery{Namespace: "web"})
	if err != nil || len(gs) != 1 || gs[0].Host != h || gs[0].Resource != pool || gs[0].Namespace != "web" {
		t.Fatalf("groups: %+v %v", gs, err)
	}
	if gs, err := c.ProcessGroups(ctx, backend.GroupQuery{Hosts: []model.Host{none}}); err != nil || len(gs) != 0 {
		t.Fatalf("groups of a host without one: %+v %v", gs, err)
	}
	_, err = c.SetProcessGroups(ctx, backend.GroupRequest{Namespace: "web", Hosts: []model.Host{h}, Resource: model.GroupResource{CPUPoolLimit: -1}})
	var ve model.ValidationError
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "resource.cpu_pool_limit" {
		t.Fatalf("a bad limit: %v", err)
	}
	es, err := c.Audit(ctx, model.AuditQuery{Action: model.AuditSetGroup})
	if err != nil || len(es) != 2 || es[0].Result != model.AuditRefused || es[1].Result != model.AuditOK || es[1].TargetCount != 2 {
		t.Fatalf("audit: %+v %v", es, err)
	}
}

// listView is hs as the list form carries them: of each process's
// status, its key, state, pid and hosted.
func listView(hs []backend.HostView) []backend.HostView {
	out := make([]backend.HostView, len(hs))
	for i, h := range hs {
		out[i] = h
		out[i].Procs = nil
		for _, p := range h.Procs {
			out[i].Procs = append(out[i].Procs, backend.ProcView{Key: p.Key, Labels: p.Labels,
				Status: model.ProcStatus{ProcKey: p.Key, State: p.Status.State, PID: p.Status.PID, Hosted: p.Status.Hosted}})
		}
	}
	return out
}

// listHosts reads q through HostListEach, each view copied as
// HostListReader asks (its label map and processes are reused).
func listHosts(ctx context.Context, c *client.Client, q backend.HostQuery) ([]backend.HostView, error) {
	var out []backend.HostView
	err := c.HostListEach(ctx, q, func(v *backend.HostView) {
		kept := *v
		kept.Labels = maps.Clone(v.Labels)
		kept.Procs = slices.Clone(v.Procs)
		out = append(out, kept)
	})
	return out, err
}

// indexedHosts reads q through HostListIndexed, each host's labels made a
// map of the pairs its ids name (or its view's own map, from a server
// without the list form); indexed says whether labels came by index.
func indexedHosts(ctx context.Context, c *client.Client, q backend.HostQuery) (out []backend.HostView, indexed bool, err error) {
	var bad error // a host seen wrong: kept apart, the listing's own error is assigned after
	err = c.HostListIndexed(ctx, q, func(pairs [][2]string, ids []uint32, v *backend.HostView) {
		kept := *v
		kept.Labels = maps.Clone(v.Labels)
		if pairs != nil {
			indexed = true
			if v.Labels != nil && bad == nil {
				bad = fmt.Errorf("host %s: labels by index and a map", v.Host)
			}
			for _, id := range ids {
				if kept.Labels == nil {
					kept.Labels = map[string]string{}
				}
				kept.Labels[pairs[id][0]] = pairs[id][1]
			}
		}
		kept.Procs = slices.Clone(v.Procs)
		out = append(out, kept)
	})
	if err == nil {
		err = bad
	}
	return out, indexed, err
}

// TestHostListFromAServerWithoutIt: a server that predates the list form
// ignores ?form=list and answers with the full form; HostListEach reads
// that too (the same hosts). A form the server does not know is refused
// naming the field.
func TestHostListFromAServerWithoutIt(t *testing.T) {
	c, _, hs, eng := serveEngine(t, 40)
	ctx := context.Background()
	srv := server.New(eng, consoleConfig(), nil)
	t.Cleanup(func() { _ = srv.Close() })
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		q.Del("form") // what a server without the form does with it
		r.URL.RawQuery = q.Encode()
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(old.Close)
	oc := client.New(old.URL, client.WithCredentials("console", "s3cret", "tester"))
	t.Cleanup(func() { _ = oc.Close() })
	q := backend.HostQuery{Namespace: "gse"}
	want, err := listHosts(ctx, c, q)
	if err != nil || len(want) == 0 {
		t.Fatalf("list form: %d hosts, %v", len(want), err)
	}
	var got []backend.HostView
	for try := 0; try < 5; try++ { // a report's second may change between the two reads
		if got, err = listHosts(ctx, oc, q); err != nil {
			t.Fatal(err)
		}
		full, _ := json.Marshal(listView(got))
		list, _ := json.Marshal(want)
		indexed, byIndex, err := indexedHosts(ctx, oc, q)
		if err != nil || byIndex {
			t.Fatalf("the full form read with labels by index: %v, %v", byIndex, err)
		}
		byMap, _ := json.Marshal(listView(indexed))
		if string(full) == string(list) && string(byMap) == string(list) {
			break
		}
		if try == 4 {
			t.Fatalf("the full form read as a list differs:\nfull %s\nindexed %s\nlist %s", full, byMap, list)
		}
		want, _ = listHosts(ctx, c, q)
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/hosts?form=table", nil)
	req.Header.Set("X-Bkapi-Authorization", `{"bk_app_code":"console","bk_app_secret":"s3cret","bk_username":"tester"}`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"form"`) || !strings.Contains(string(body), "want full (the default) or list") {
		t.Fatalf("form=table: %s %s, want 400 naming the field form", resp.Status, body)
	}
}
