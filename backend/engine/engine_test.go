package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// fakeAgents is a controllable Dispatcher, Inventory and EventSource: each
// host answers through the reply func (default: success), and the test
// sees how many dispatches are in flight at once.
type fakeAgents struct {
	hosts []model.HostInfo
	reply func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error)

	inflight, maxInflight, calls atomic.Int64

	mu     sync.Mutex
	events []func(model.Event)
}

func newFake(n int) *fakeAgents {
	f := &fakeAgents{}
	for i := range n {
		f.hosts = append(f.hosts, model.HostInfo{Host: hostN(i), State: model.AgentOnline, Labels: map[string]string{"rack": fmt.Sprint(i % 2)}})
	}
	return f
}

func hostN(i int) model.Host {
	return model.Host{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}
}

func (f *fakeAgents) Dispatch(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	f.calls.Add(1)
	for {
		m := f.maxInflight.Load()
		if n <= m || f.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	if f.reply != nil {
		return f.reply(ctx, h, req)
	}
	return model.AgentReply{Code: 0, Message: "success", Status: &model.ProcStatus{State: model.ProcRunning, PID: 42, Hosted: true}}, nil
}

func (f *fakeAgents) Hosts(context.Context) ([]model.HostInfo, error) { return f.hosts, nil }

func (f *fakeAgents) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	f.mu.Lock()
	f.events = append(f.events, fn)
	f.mu.Unlock()
}

func (f *fakeAgents) emit(ev model.Event) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fn := range f.events {
		fn(ev)
	}
	return len(f.events)
}

func proc(ns, name string, labels map[string]string) model.Process {
	p := model.Process{Meta: model.Meta{Namespace: ns, Name: name, Labels: labels}}
	p.Spec.Identity = model.Identity{ProcName: name, SetupPath: "/opt/" + name, PidPath: "/var/run/" + name + ".pid"}
	p.Spec.Control = model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", ShellExt: "sh"}
	p.Spec.Policy = model.DefaultPolicy()
	p.Spec.Policy.AutoType = model.AutoResident
	p.Spec.Policy.OpTimeout = 1
	return p
}

func testCfg() config.EngineConfig {
	// The lease TTL is the config's default (the one place it lives).
	return config.EngineConfig{Concurrency: 64, MaxTargets: 100000, KeepTasks: 100, LeaseTTL: config.Default().Engine.LeaseTTL}
}

// start builds a started engine over f with definition ns:app on every host
// of f (and ns:db on the even ones).
func start(t *testing.T, f *fakeAgents, cfg config.EngineConfig, opts ...engine.Option) (*engine.Engine, *store.Memory) {
	t.Helper()
	st := store.NewMemory()
	e := engine.New(cfg, f, f, st, opts...)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	var all, even []model.Host
	for i, h := range f.hosts {
		all = append(all, h.Host)
		if i%2 == 0 {
			even = append(even, h.Host)
		}
	}
	err := e.Seed(context.Background(), []model.ProcessDef{
		{Process: proc("ns", "app", map[string]string{"tier": "web"}), Hosts: all},
		{Process: proc("ns", "db", map[string]string{"tier": "data"}), Hosts: even},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, st
}

// collectEvents reads an event channel to its end (bounded by 20 s).
func collectEvents(t *testing.T, ch <-chan model.Event) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("event channel did not close")
		}
	}
}

// collect reads a watch channel to its end. The bound only catches a hang:
// a 10,000-host task under -race on a loaded 2-core machine took over 20 s.
func collect(t *testing.T, ch <-chan model.Result) []model.Result {
	t.Helper()
	var out []model.Result
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, r)
		case <-timeout:
			t.Fatalf("watch did not end; got %d results", len(out))
		}
	}
}

func operate(t *testing.T, e *engine.Engine, req backend.OperateRequest) (model.Task, []model.Result) {
	t.Helper()
	task, err := e.Operate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(context.Background(), task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return task, collect(t, ch)
}

func fieldsOf(err error) []string {
	var ve model.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	f := ve.Fields()
	slices.Sort(f)
	return f
}

func TestOperateValidation(t *testing.T) {
	e, _ := start(t, newFake(4), testCfg())
	bad := proc("ns", "x", nil)
	bad.Spec.Identity.SetupPath = "relative"
	bad.Spec.Resource.CPU = 200
	tests := []struct {
		name string
		req  backend.OperateRequest
		want []string
	}{
		{"op and selector", backend.OperateRequest{Op: 5}, []string{"op_type", "selector"}},
		{"bad selector host", backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Hosts: []model.Host{{IP: "300.1.1.1"}}}}, []string{"selector.hosts[0].ip"}},
		{"every item error", backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{
			{Process: bad, Hosts: []model.Host{{IP: "nope", CloudID: -1}}},
			{Process: proc("ns", "ok", nil)},
		}}, []string{"items[0].hosts[0].bk_cloud_id", "items[0].hosts[0].ip", "items[0].process.spec.identity.setup_path", "items[0].process.spec.resource.cpu", "items[1].hosts"}},
		{"no match", backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "nope"}}, []string{"selector"}},
		{"host outside the definition", backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Hosts: []model.Host{{IP: "192.168.9.9"}}}}, []string{"selector"}},
		{"bad naming by agent id", backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"},
			ByAgentID: []model.Target{{Host: model.Host{IP: "10.0.0.300"}, ProcKey: "ns", AgentID: "zz:top"}}},
			[]string{"by_agent_id[0].agent_id", "by_agent_id[0].host.ip", "by_agent_id[0].proc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Operate(context.Background(), tc.req)
			if got := fieldsOf(err); !slices.Equal(got, tc.want) {
				t.Fatalf("fields %v, want %v (err %v)", got, tc.want, err)
			}
		})
	}
}

func TestMaxTargets(t *testing.T) {
	cfg := testCfg()
	cfg.MaxTargets = 5
	e, _ := start(t, newFake(10), cfg)
	_, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	if got := fieldsOf(err); !slices.Equal(got, []string{"selector"}) {
		t.Fatalf("err %v", err)
	}
	// Narrowed to 5 targets it is accepted.
	task, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "db"}})
	if task.Targets != 5 || len(res) != 5 {
		t.Fatalf("targets %d, results %d", task.Targets, len(res))
	}
}

// Selector.Targets narrows to exactly the given (host, process) pairs, so
// the failed pairs of several processes are retried as one task; a pair
// that is not deployed is no target, and a bad pair is refused by field.
func TestSelectorTargets(t *testing.T) {
	e, _ := start(t, newFake(10), testCfg())
	pairs := []model.Target{{Host: hostN(0), ProcKey: "ns:app"}, {Host: hostN(0), ProcKey: "ns:db"},
		{Host: hostN(3), ProcKey: "ns:app"}, {Host: hostN(3), ProcKey: "ns:db"}} // ns:db is not on odd hosts
	task, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Targets: pairs}})
	if task.Targets != 3 || len(res) != 3 {
		t.Fatalf("targets %d, results %d, want 3", task.Targets, len(res))
	}
	got := map[model.Target]bool{}
	for _, r := range res {
		got[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = true
	}
	for _, p := range pairs[:3] {
		if !got[p] {
			t.Fatalf("pair %v missing from %v", p, got)
		}
	}
	// Pairs named by agent id carry that id in their results; the others none.
	const id = "0200000000000000000000000000000abc"
	_, res = operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Targets: pairs},
		ByAgentID: []model.Target{{Host: hostN(0), ProcKey: "ns:db", AgentID: strings.ToUpper(id)}}})
	for _, r := range res {
		want := ""
		if r.Host == hostN(0) && r.ProcKey == "ns:db" {
			want = id
		}
		if r.AgentID != want {
			t.Fatalf("result %s %s named %q, want %q", r.Host, r.ProcKey, r.AgentID, want)
		}
	}
	_, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus,
		Selector: backend.Selector{Targets: []model.Target{{Host: hostN(1), ProcKey: "nocolon"}}}})
	if got := fieldsOf(err); !slices.Equal(got, []string{"selector.targets[0].proc"}) {
		t.Fatalf("err %v", err)
	}
}

func TestResultStatesAndCodes(t *testing.T) {
	tests := []struct {
		name      string
		op        model.OpType
		reply     model.AgentReply
		err       error
		wantState model.ResultState
		wantCode  int
	}{
		{"start ok", model.OpStart, model.AgentReply{Code: 0}, nil, model.StateSuccess, 0},
		{"start of running (828) is success", model.OpStart, model.AgentReply{Code: 828}, nil, model.StateSuccess, 828},
		{"stop of stopped (829) is success", model.OpStop, model.AgentReply{Code: 829}, nil, model.StateSuccess, 829},
		{"828 on stop fails", model.OpStop, model.AgentReply{Code: 828}, nil, model.StateFailed, 828},
		{"command failed", model.OpRestart, model.AgentReply{Code: 65535, Message: "exit 1"}, nil, model.StateFailed, 65535},
		{"post-check", model.OpStart, model.AgentReply{Code: 836}, nil, model.StateFailed, 836},
		{"unreachable", model.OpStart, model.AgentReply{}, fmt.Errorf("nats: %w", model.ErrUnreachable), model.StateUnreachable, 117},
		{"transport error", model.OpStart, model.AgentReply{}, errors.New("boom"), model.StateFailed, 65535},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(3)
			f.reply = func(context.Context, model.Host, model.AgentRequest) (model.AgentReply, error) {
				return tc.reply, tc.err
			}
			e, _ := start(t, f, testCfg())
			task, res := operate(t, e, backend.OperateRequest{Op: tc.op, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
			if len(res) != 3 {
				t.Fatalf("%d results", len(res))
			}
			for _, r := range res {
				if r.State != tc.wantState || r.Code != tc.wantCode || r.Proc.ProcName != "app" || r.Message == "" {
					t.Fatalf("result %+v, want %s/%d", r, tc.wantState, tc.wantCode)
				}
			}
			view, err := e.Task(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := model.TaskDone
			if !tc.wantState.OK() {
				wantStatus = model.TaskFailed
			}
			if view.Task.Status != wantStatus || view.Task.Counts.Final() != 3 || view.Task.Finished.IsZero() {
				t.Fatalf("task %+v, want %s", view.Task, wantStatus)
			}
		})
	}
}

func TestStatusContentAndLastKnown(t *testing.T) {
	f := newFake(2)
	e, _ := start(t, f, testCfg())
	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if len(res) != 2 {
		t.Fatalf("%d results, want 2", len(res))
	}
	for _, r := range res {
		if r.State != model.StateSuccess || r.Proc.ProcName != "app" || r.Status == nil || r.Status.PID != 42 {
			t.Fatalf("status result %+v", r)
		}
	}
	hv, err := e.Hosts(context.Background(), backend.HostQuery{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hv) != 2 || len(hv[0].Procs) != 1 || hv[0].Procs[0].Status.State != model.ProcRunning || hv[0].Procs[0].Status.PID != 42 {
		t.Fatalf("hosts %+v", hv)
	}
}

func TestFanOutBound(t *testing.T) {
	f := newFake(300)
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		time.Sleep(2 * time.Millisecond)
		return model.AgentReply{}, nil
	}
	cfg := testCfg()
	cfg.Concurrency = 8
	e, _ := start(t, f, cfg)
	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if len(res) != 300 {
		t.Fatalf("%d results", len(res))
	}
	if m := f.maxInflight.Load(); m != 8 {
		t.Fatalf("max in flight %d, want exactly the bound 8", m)
	}
}

// TestFanOutGoroutines: 10,000 targets held in flight cost goroutines per
// concurrency slot, not per target.
func TestFanOutGoroutines(t *testing.T) {
	f := newFake(10000)
	release := make(chan struct{})
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		<-release
		return model.AgentReply{}, nil
	}
	cfg := testCfg()
	cfg.Concurrency = 100
	e, _ := start(t, f, cfg)
	base := runtime.NumGoroutine()
	task, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "100 in flight", 20*time.Second, func() bool { return f.inflight.Load() >= 100 })
	g := runtime.NumGoroutine() - base
	if g > 100+10 {
		t.Errorf("%d goroutines for a 10,000-target task at concurrency 100", g)
	}
	t.Logf("10,000 targets in flight at concurrency 100: %d goroutines", g)
	close(release)
	ch, _ := e.Watch(context.Background(), task.ID, 0)
	if res := collect(t, ch); len(res) != 10000 {
		t.Fatalf("%d results", len(res))
	}
}

func TestPerHostDeadline(t *testing.T) {
	f := newFake(6)
	dead := hostN(3)
	f.reply = func(ctx context.Context, h model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		if h == dead {
			<-ctx.Done() // never answers
			return model.AgentReply{}, ctx.Err()
		}
		return model.AgentReply{}, nil
	}
	e, _ := start(t, f, testCfg()) // op_timeout 1 s, no slack: status deadline 1 s
	t0 := time.Now()
	task, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := e.Watch(context.Background(), task.ID, 0)
	res := collect(t, ch)
	if len(res) != 6 {
		t.Fatalf("%d results", len(res))
	}
	// The live hosts are not held up by the dead one: their results come
	// first, as they answer, and the dead one's last, at its own deadline.
	for _, r := range res[:5] {
		if r.Host == dead || r.State != model.StateSuccess {
			t.Fatalf("result %+v before the dead host's", r)
		}
	}
	last := res[5]
	if last.Host != dead || last.State != model.StateTimeout || last.Code != model.CodeTimeout || last.Seq != 6 {
		t.Fatalf("last result %+v", last)
	}
	if d := last.Duration(); d < time.Second {
		t.Fatalf("dead host timed out after %v, before its own 1 s deadline", d)
	}
	t.Logf("dead host timed out after %v, the task took %v", last.Duration(), time.Since(t0))
}

func TestWatchOrderAndReplay(t *testing.T) {
	f := newFake(3)
	gates := map[model.Host]chan struct{}{}
	for _, h := range f.hosts {
		gates[h.Host] = make(chan struct{})
	}
	f.reply = func(ctx context.Context, h model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		<-gates[h]
		return model.AgentReply{}, nil
	}
	e, _ := start(t, f, testCfg())
	ctx := context.Background()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	early, _ := e.Watch(ctx, task.ID, 0)
	order := []model.Host{hostN(2), hostN(0), hostN(1)}

	close(gates[order[0]])
	r1 := <-early
	mid, _ := e.Watch(ctx, task.ID, 0) // joins after the first result: gets it replayed
	close(gates[order[1]])
	r2 := <-early
	close(gates[order[2]])
	rest := collect(t, early)
	got := append([]model.Result{r1, r2}, rest...)
	midGot := collect(t, mid)
	late, _ := e.Watch(ctx, task.ID, 1) // after completion, skipping seq 1
	lateGot := collect(t, late)

	check := func(name string, rs []model.Result, from int) {
		t.Helper()
		if len(rs) != 3-from {
			t.Fatalf("%s: %d results", name, len(rs))
		}
		for i, r := range rs {
			if r.Seq != int64(from+i+1) || r.Host != order[from+i] {
				t.Fatalf("%s: result %d is seq %d host %s, want seq %d host %s", name, i, r.Seq, r.Host, from+i+1, order[from+i])
			}
		}
	}
	check("early", got, 0)
	check("mid", midGot, 0)
	check("late", lateGot, 1)

	if _, err := e.Watch(ctx, "GSETASK:20200101000000:1", 0); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("watch unknown: %v", err)
	}
}

// TestResultHookSeesWhatAWatchSees: the hook an Operate's context carries
// (backend.ResultHook) is taken by that task alone and told every final
// result a watch from the start receives, in the same order, before the
// task is stored complete.
func TestResultHookSeesWhatAWatchSees(t *testing.T) {
	f := newFake(50)
	e, _ := start(t, f, testCfg())
	var mu sync.Mutex
	var hooked []model.Result
	hook := backend.NewResultHook(func(r model.Result) {
		mu.Lock()
		hooked = append(hooked, r)
		mu.Unlock()
	})
	ctx := backend.WithResultHook(context.Background(), hook)
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	if !hook.Taken() {
		t.Fatal("the engine did not take the hook")
	}
	watched := collect(t, mustWatch(t, e, task.ID))
	// A second task made with the same context does not take it again.
	if _, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both tasks stored complete", 20*time.Second, func() bool {
		info, err := e.Info(context.Background())
		return err == nil && info.Running == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(watched) != 50 || len(hooked) != len(watched) {
		t.Fatalf("the watch got %d results, the hook %d; want 50 each", len(watched), len(hooked))
	}
	for i := range watched {
		if hooked[i].TaskID != task.ID || hooked[i].Seq != watched[i].Seq || hooked[i].Host != watched[i].Host || hooked[i].State != watched[i].State {
			t.Fatalf("result %d: hook got %s seq %d %s %s, the watch %s seq %d %s %s", i, hooked[i].TaskID, hooked[i].Seq, hooked[i].Host,
				hooked[i].State, watched[i].TaskID, watched[i].Seq, watched[i].Host, watched[i].State)
		}
	}
}

func TestSlowWatcherDoesNotBlock(t *testing.T) {
	f := newFake(2000)
	e, _ := start(t, f, testCfg())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = e.Watch(ctx, task.ID, 0) // never read
	fast, _ := e.Watch(ctx, task.ID, 0)
	if res := collect(t, fast); len(res) != 2000 {
		t.Fatalf("%d results", len(res))
	}
}

func TestCancel(t *testing.T) {
	f := newFake(5)
	release := make(chan struct{})
	f.reply = func(ctx context.Context, h model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		<-release
		return model.AgentReply{}, nil
	}
	cfg := testCfg()
	cfg.Concurrency = 1
	e, _ := start(t, f, cfg)
	ctx := context.Background()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "1 in flight", 20*time.Second, func() bool { return f.inflight.Load() >= 1 })
	if err := e.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	ch, _ := e.Watch(ctx, task.ID, 0)
	res := collect(t, ch)
	var c model.Counts
	for _, r := range res {
		c.Add(r.State, 1)
	}
	if c.Cancelled != 4 || c.Success != 1 {
		t.Fatalf("counts %+v", c)
	}
	view, _ := e.Task(ctx, task.ID)
	if view.Task.Status != model.TaskCanceled || f.calls.Load() != 1 {
		t.Fatalf("task %s, %d dispatches", view.Task.Status, f.calls.Load())
	}
	if err := e.Cancel(ctx, "GSETASK:20200101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

func TestResumeFromStore(t *testing.T) {
	ctx := context.Background()
	f := newFake(3)
	st := store.NewMemory()
	p := proc("ns", "app", nil)
	hosts := []model.Host{hostN(0), hostN(1), hostN(2)}
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	// A task a killed server left: one target final, one running, one pending.
	id := model.FormatTaskID(time.Now(), 7)
	var targets []model.Target
	for _, h := range hosts {
		targets = append(targets, model.Target{Host: h, ProcKey: p.Key()})
	}
	_ = st.PutTask(ctx, model.Task{ID: id, Op: model.OpStart, Targets: 3, Status: model.TaskRunning, Created: time.Now()}, targets)
	_ = st.PutResult(ctx, model.Result{TaskID: id, Host: hosts[0], ProcKey: p.Key(), Op: model.OpStart, State: model.StateSuccess, Seq: 1})
	_ = st.PutResult(ctx, model.Result{TaskID: id, Host: hosts[1], ProcKey: p.Key(), Op: model.OpStart, State: model.StateRunning})

	// Each dispatch carries the target's op id. Host 1's agent has not
	// reconnected to the restarted server yet: unreachable the first three
	// times, which a resumed task waits out (within its deadline).
	var dispatched sync.Map
	var unreachable atomic.Int32
	f.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		if want := model.OpID(id, h, p.Key()); req.OpID != want {
			return model.AgentReply{}, fmt.Errorf("op id %q, want %q", req.OpID, want)
		}
		if h == hosts[1] && unreachable.Add(1) <= 3 {
			return model.AgentReply{}, fmt.Errorf("no agent listening: %w", model.ErrUnreachable)
		}
		dispatched.Store(h, true)
		return model.AgentReply{Code: 828}, nil
	}
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Watch(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, ch)
	if len(res) != 3 || res[0].Host != hosts[0] || res[1].Seq != 2 || res[2].Seq != 3 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.State != model.StateSuccess {
			t.Fatalf("result %+v, want success (828 for a start)", r)
		}
	}
	if _, ok := dispatched.Load(hosts[0]); ok {
		t.Fatal("a target final before the restart was dispatched again")
	}
	for _, h := range hosts[1:] {
		if _, ok := dispatched.Load(h); !ok {
			t.Fatalf("%s not resumed", h)
		}
	}
	view, _ := e.Task(ctx, id)
	if view.Task.Status != model.TaskDone {
		t.Fatalf("resumed task %s", view.Task.Status)
	}
}

// countingStore counts the registry listings.
type countingStore struct {
	*store.Memory
	listings atomic.Int64
}

func (c *countingStore) Processes(ctx context.Context) ([]model.ProcessDef, error) {
	c.listings.Add(1)
	return c.Memory.Processes(ctx)
}

// unfinishedTasks registers p on h in st and stores n status tasks on it
// left running (as by a server that died), returning their ids.
func unfinishedTasks(t *testing.T, st engine.Store, p model.Process, h model.Host, n int) []string {
	t.Helper()
	ctx := context.Background()
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		id := model.FormatTaskID(time.Now(), uint64(i+1))
		if err := st.PutTask(ctx, model.Task{ID: id, Op: model.OpStatus, Targets: 1, Status: model.TaskRunning, Created: time.Now()},
			[]model.Target{{Host: h, ProcKey: p.Key()}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestResumeReadsRegistryOnce: Start resumes several unfinished tasks with
// one read of the registry, not one per task.
func TestResumeReadsRegistryOnce(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Memory: store.NewMemory()}
	p := proc("ns", "app", nil)
	h := hostN(0)
	ids := unfinishedTasks(t, st, p, h, 3)
	f := newFake(1)
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := st.listings.Load(); n != 1 {
		t.Fatalf("Start listed the registry %d times for %d tasks, want 1", n, len(ids))
	}
	for _, id := range ids {
		ch, err := e.Watch(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res := collect(t, ch); len(res) != 1 || res[0].State != model.StateSuccess {
			t.Fatalf("task %s resumed with %+v", id, res)
		}
	}
}

func TestCloseLeavesTargetsUnfinished(t *testing.T) {
	f := newFake(4)
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		<-ctx.Done()
		return model.AgentReply{}, ctx.Err()
	}
	cfg := testCfg()
	cfg.Concurrency = 2
	e, st := start(t, f, cfg)
	ctx := context.Background()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "2 in flight", 20*time.Second, func() bool { return f.inflight.Load() >= 2 })
	done := make(chan struct{})
	go func() { _ = e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	got, _, _ := st.Task(ctx, task.ID)
	rs, _ := st.Results(ctx, task.ID)
	if got.Status == model.TaskDone || got.Status == model.TaskFailed || len(rs) != 0 {
		t.Fatalf("after Close: task %s with %d results stored", got.Status, len(rs))
	}
}

func TestReadOnly(t *testing.T) {
	e, _ := start(t, newFake(2), testCfg(), engine.WithReadOnly(true))
	ctx := context.Background()
	if _, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "ns"}}); !errors.Is(err, model.ErrReadOnly) {
		t.Fatalf("start: %v", err)
	}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns", "z", nil), Hosts: []model.Host{hostN(0)}}); !errors.Is(err, model.ErrReadOnly) {
		t.Fatalf("save: %v", err)
	}
	if err := e.DeleteProcess(ctx, "ns:app"); !errors.Is(err, model.ErrReadOnly) {
		t.Fatalf("delete: %v", err)
	}
	if _, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}}); len(res) != 3 {
		t.Fatalf("status in read-only: %d results", len(res))
	}
	if info, _ := e.Info(ctx); !info.ReadOnly || info.Mode != "embedded" || info.Hosts != 2 || info.Processes != 2 {
		t.Fatalf("info %+v", info)
	}
}

// TestNamespacesFollowChanges: the namespace summary is kept between calls
// (counted again only when a definition changed), so each change must show
// in the next call: a host added, a namespace added, one removed; and what
// a caller does to an answer never reaches the next one.
func TestNamespacesFollowChanges(t *testing.T) {
	f := newFake(6)
	e, _ := start(t, f, testCfg())
	ctx := context.Background()
	counts := func() map[string][2]int {
		t.Helper()
		ns, err := e.Namespaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int{}
		for _, s := range ns {
			out[s.Name] = [2]int{s.Processes, s.Hosts}
		}
		// Change what was returned: the next answer must not see it.
		for i := range ns {
			ns[i].Hosts = -1
			for k := range ns[i].Labels {
				ns[i].Labels[k][0] = "changed"
			}
		}
		return out
	}
	if got := counts(); !maps.Equal(got, map[string][2]int{"ns": {2, 6}}) {
		t.Fatalf("first: %v", got)
	}
	if got := counts(); !maps.Equal(got, map[string][2]int{"ns": {2, 6}}) {
		t.Fatalf("again: %v", got)
	}
	if ns, _ := e.Namespaces(ctx); !slices.Equal(ns[0].Labels["tier"], []string{"data", "web"}) {
		t.Fatalf("labels changed by a caller: %v", ns[0].Labels)
	}
	// ns2:x on two hosts that ns has too: a namespace of its own.
	hs := []model.Host{f.hosts[0].Host, f.hosts[1].Host}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns2", "x", nil), Hosts: hs}); err != nil {
		t.Fatal(err)
	}
	if got := counts(); !maps.Equal(got, map[string][2]int{"ns": {2, 6}, "ns2": {1, 2}}) {
		t.Fatalf("after ns2:x: %v", got)
	}
	if err := e.DeleteProcess(ctx, "ns:app"); err != nil {
		t.Fatal(err)
	}
	if got := counts(); !maps.Equal(got, map[string][2]int{"ns": {1, 3}, "ns2": {1, 2}}) {
		t.Fatalf("after deleting ns:app: %v", got)
	}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns2", "x", nil), Hosts: append(hs, f.hosts[5].Host)}); err != nil {
		t.Fatal(err)
	}
	if got := counts(); !maps.Equal(got, map[string][2]int{"ns": {1, 3}, "ns2": {1, 3}}) {
		t.Fatalf("after ns2:x on a third host: %v", got)
	}
}

// TestHostsFirstPage: a listing with a small limit (a console's first
// page) is answered host by host from the definitions' host positions;
// it must be exactly the first hosts of the whole listing, for every kind
// of query, and follow a changed definition.
func TestHostsFirstPage(t *testing.T) {
	f := newFake(300)
	e, _ := start(t, f, testCfg())
	ctx := context.Background()
	// ns2:x on every third host from the 7th, with labels of its own.
	var some []model.Host
	for i := 7; i < len(f.hosts); i += 3 {
		some = append(some, f.hosts[i].Host)
	}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns2", "x", map[string]string{"tier": "batch"}), Hosts: some}); err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		for _, q := range []backend.HostQuery{{}, {Namespace: "ns"}, {Namespace: "ns", Name: "db"}, {Namespace: "ns2"},
			{Labels: map[string]string{"tier": "batch"}}, {Labels: map[string]string{"tier": "nope"}},
			{Hosts: []model.Host{f.hosts[9].Host, f.hosts[40].Host, f.hosts[41].Host}}, {Namespace: "ns2", AgentIDs: []string{f.hosts[10].Host.AgentID()}}} {
			all, err := e.Hosts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, limit := range []int{1, 5, 20} {
				q.Limit = limit
				page, err := e.Hosts(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				want := all[:min(limit, len(all))]
				if !reflect.DeepEqual(page, want) {
					t.Fatalf("%s: %+v limit %d: %d hosts, not the first %d of the listing:\n%+v\nwant %+v", what, q, limit, len(page), len(want), page, want)
				}
			}
		}
	}
	same("first")
	same("again") // the positions kept
	// ns2:x moves to the first hosts: the first page follows.
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns2", "x", map[string]string{"tier": "batch"}), Hosts: []model.Host{f.hosts[0].Host, f.hosts[1].Host}}); err != nil {
		t.Fatal(err)
	}
	same("after a change")
	if page, _ := e.Hosts(ctx, backend.HostQuery{Namespace: "ns2", Limit: 5}); len(page) != 2 || page[0].Host != f.hosts[0].Host {
		t.Fatalf("ns2 after the change: %+v", page)
	}
}

func TestRegistryQueries(t *testing.T) {
	e, _ := start(t, newFake(4), testCfg())
	ctx := context.Background()
	ns, err := e.Namespaces(ctx)
	if err != nil || len(ns) != 1 || ns[0].Processes != 2 || ns[0].Hosts != 4 || !slices.Equal(ns[0].Labels["tier"], []string{"data", "web"}) {
		t.Fatalf("namespaces %+v %v", ns, err)
	}
	h1 := hostN(1)
	tests := []struct {
		q    backend.ProcQuery
		want int
	}{
		{backend.ProcQuery{}, 2},
		{backend.ProcQuery{Namespace: "ns", Name: "db"}, 1},
		{backend.ProcQuery{Labels: map[string]string{"tier": "web"}}, 1},
		{backend.ProcQuery{Host: &h1}, 1},
		{backend.ProcQuery{Namespace: "other"}, 0},
	}
	for _, tc := range tests {
		got, err := e.Processes(ctx, tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("Processes(%+v) = %d, want %d (%v)", tc.q, len(got), tc.want, err)
		}
	}
	hv, _ := e.Hosts(ctx, backend.HostQuery{Labels: map[string]string{"tier": "data"}})
	if len(hv) != 2 || hv[0].Procs[0].Status.State != model.ProcUnknown {
		t.Fatalf("hosts with db: %+v", hv)
	}
	hv, _ = e.Hosts(ctx, backend.HostQuery{})
	if len(hv) != 4 || len(hv[0].Procs) != 2 || len(hv[1].Procs) != 1 {
		t.Fatalf("all hosts: %+v", hv)
	}
	// LendProcess finds one definition by key, as Processes does.
	for _, key := range []string{"ns:app", "ns:db", "ns:dc", "ns:", "ns", "other:app"} {
		d, ok, err := e.LendProcess(ctx, key)
		want := key == "ns:app" || key == "ns:db"
		if err != nil || ok != want || (ok && (d.Process.Key() != key || d.Rev == 0 || len(d.Hosts) == 0)) {
			t.Errorf("LendProcess(%q) = %v %v %v, want found %v", key, d.Process.Key(), ok, err, want)
		}
	}
	// What Processes returns is the caller's: changing it in place
	// changes nothing in the registry (the store may lend its own).
	mine, _ := e.Processes(ctx, backend.ProcQuery{Namespace: "ns", Name: "db"})
	mine[0].Hosts[0] = hostN(99)
	mine[0].Process.Meta.Labels["tier"] = "changed"
	again, _ := e.Processes(ctx, backend.ProcQuery{Namespace: "ns", Name: "db"})
	if again[0].Hosts[0] == hostN(99) || again[0].Process.Meta.Labels["tier"] != "data" {
		t.Fatalf("a caller's change reached the registry: %+v", again[0])
	}
}

func TestInlineItemsAreSaved(t *testing.T) {
	e, _ := start(t, newFake(3), testCfg())
	ctx := context.Background()
	p := proc("biz_1", "x", nil)
	p.Meta.Name = "/opt/x/x"
	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{{Process: p, Hosts: []model.Host{hostN(1)}}}})
	if len(res) != 1 || res[0].ProcKey != "biz_1:/opt/x/x" {
		t.Fatalf("results %+v", res)
	}
	_, _ = operate(t, e, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{{Process: p, Hosts: []model.Host{hostN(2)}}}})
	defs, _ := e.Processes(ctx, backend.ProcQuery{Namespace: "biz_1"})
	if len(defs) != 1 || len(defs[0].Hosts) != 2 {
		t.Fatalf("registry after two inline ops: %+v", defs)
	}
}

func TestEvents(t *testing.T) {
	f := newFake(2)
	e, _ := start(t, f, testCfg())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the engine's subscription", 20*time.Second, func() bool { return f.emit(model.Event{}) > 0 })
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no probe event")
	}
	ev := model.Event{Time: time.Now(), Host: hostN(0), ProcKey: "ns:app", Kind: model.EventRestartSuccess, Message: "restarted"}
	f.emit(ev)
	select {
	case got := <-ch:
		if got.Kind != ev.Kind || got.Host != ev.Host {
			t.Fatalf("event %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	recent, _ := e.RecentEvents(ctx, 1)
	if len(recent) != 1 || recent[0].Kind != ev.Kind {
		t.Fatalf("recent %+v", recent)
	}
	hv, _ := e.Hosts(ctx, backend.HostQuery{Name: "app", Hosts: []model.Host{hostN(0)}})
	if len(hv) != 1 || hv[0].Procs[0].Status.State != model.ProcRunning || hv[0].Procs[0].Status.Restarts != 1 {
		t.Fatalf("last known after restart event: %+v", hv)
	}
	cancel()
	collectEvents(t, ch) // closes when ctx ends
}

// Watch and Events racing with Close must either be refused or be waited
// for (run with -race: an Add after Close's Wait began is a data race).
func TestWatchConcurrentWithClose(t *testing.T) {
	for i := 0; i < 20; i++ {
		f := newFake(4)
		e, _ := start(t, f, testCfg())
		task, _ := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
		var wg sync.WaitGroup
		for j := 0; j < 8; j++ {
			wg.Go(func() {
				if ch, err := e.Watch(context.Background(), task.ID, 0); err == nil {
					for range ch {
					}
				}
			})
		}
		wg.Go(func() { _ = e.Close() })
		wg.Wait()
		if _, err := e.Watch(context.Background(), task.ID, 0); err == nil {
			t.Fatal("Watch after Close: want an error")
		}
	}
}

// slowFinish is a store whose UpdateTask (storing a completed task) takes
// a while: the run stays known for that long after it completed.
type slowFinish struct{ *store.Memory }

func (s slowFinish) UpdateTask(ctx context.Context, t model.Task) error {
	time.Sleep(100 * time.Millisecond)
	return s.Memory.UpdateTask(ctx, t)
}

// Info counts a task as running until it completes, not until its run is
// forgotten: a watcher that saw its task end must not read it as running.
func TestInfoRunningEndsWithTheTask(t *testing.T) {
	f := newFake(20)
	e := engine.New(testCfg(), f, f, slowFinish{store.NewMemory()})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	hosts := make([]model.Host, len(f.hosts))
	for i, h := range f.hosts {
		hosts[i] = h.Host
	}
	if err := e.Seed(context.Background(), []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: hosts}}); err != nil {
		t.Fatal(err)
	}
	task, _ := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	info, err := e.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Running != 0 {
		t.Fatalf("task %s complete (its watch ended), Info says %d running", task.ID, info.Running)
	}
}
