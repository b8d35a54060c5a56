package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/model"
)

// simEngine starts an engine over a simulated fleet seeded with its definitions.
func simEngine(tb testing.TB, sc config.SimulatorConfig) (*engine.Engine, *simulator.Fleet) {
	tb.Helper()
	return simEngineWith(tb, sc, config.Default().Engine)
}

// simEngineWith is simEngine with its engine configuration.
func simEngineWith(tb testing.TB, sc config.SimulatorConfig, ec config.EngineConfig) (*engine.Engine, *simulator.Fleet) {
	tb.Helper()
	fleet := simulator.New(sc)
	tb.Cleanup(func() { _ = fleet.Close() })
	return engineOver(tb, fleet, fleet, ec), fleet
}

// engineOver starts an engine whose inventory is fleet and whose
// dispatcher d (fleet itself, or a wrapper of it), seeded with fleet's
// definitions; it is closed at the test's end, before the fleet.
func engineOver(tb testing.TB, fleet *simulator.Fleet, d engine.Dispatcher, ec config.EngineConfig) *engine.Engine {
	tb.Helper()
	e := engine.New(ec, d, fleet, store.NewMemory())
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close() })
	if err := e.Seed(ctx, fleet.Definitions()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// quietFleet is a fleet that never fails and answers within milliseconds.
func quietFleet(hosts int) config.SimulatorConfig {
	d := config.Default().Simulator
	return config.SimulatorConfig{Hosts: hosts, Seed: 7, Clouds: d.Clouds, Namespaces: d.Namespaces, LatencyMedian: config.Duration(time.Millisecond),
		LatencyP99: config.Duration(5 * time.Millisecond)}
}

func TestSimulatorStartStopStatus(t *testing.T) {
	e, _ := simEngine(t, quietFleet(60))
	sel := backend.Selector{Namespace: "web", Name: "nginx"}
	// Bring every nginx to "stopped" whatever its generated state (0 or 829).
	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStop, Selector: sel})
	if len(res) == 0 {
		t.Fatal("no nginx in the simulated web namespace")
	}
	n := len(res)
	steps := []struct {
		op       model.OpType
		wantCode int
	}{
		{model.OpStop, model.CodeNotRunning},      // 829 on stop of a stopped process
		{model.OpStart, model.CodeSuccess},        // 0
		{model.OpStart, model.CodeAlreadyRunning}, // 828 on start of a running process
		{model.OpStatus, model.CodeSuccess},
		{model.OpStop, model.CodeSuccess},
	}
	for _, s := range steps {
		task, res := operate(t, e, backend.OperateRequest{Op: s.op, Selector: sel, Source: "test"})
		if len(res) != n {
			t.Fatalf("%s: %d results, want %d", s.op, len(res), n)
		}
		for _, r := range res {
			if r.Code != s.wantCode || r.State != model.StateSuccess {
				t.Fatalf("%s on %s: code %d state %s (%s), want %d", s.op, r.Host, r.Code, r.State, r.Message, s.wantCode)
			}
			if s.op == model.OpStatus && (r.Status == nil || r.Status.State != model.ProcRunning) {
				t.Fatalf("status result %+v", r)
			}
		}
		view, _ := e.Task(context.Background(), task.ID)
		if view.Task.Status != model.TaskDone || view.Task.Counts.Success != n {
			t.Fatalf("%s: task %+v", s.op, view.Task)
		}
	}
	// The last stop is what the registry view now shows.
	hv, _ := e.Hosts(context.Background(), backend.HostQuery{Namespace: "web", Name: "nginx"})
	if len(hv) != n {
		t.Fatalf("%d hosts carry nginx, want %d", len(hv), n)
	}
	for _, h := range hv {
		if h.Procs[0].Status.State.Up() {
			t.Fatalf("%s: nginx %s after stop", h.Host, h.Procs[0].Status.State)
		}
	}
}

func TestSimulatorFailureProfile(t *testing.T) {
	sc := quietFleet(200)
	sc.UnreachableRate = 0.1
	e, _ := simEngine(t, sc)
	task, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "gse", Name: "bkmonitorbeat"}})
	var c model.Counts
	for _, r := range res {
		c.Add(r.State, 1)
		if r.State == model.StateUnreachable && r.Code != model.CodeAgentAbnormal {
			t.Fatalf("unreachable with code %d", r.Code)
		}
	}
	if c.Unreachable == 0 || c.Success == 0 || c.Total() != task.Targets {
		t.Fatalf("counts %+v over %d targets", c, task.Targets)
	}
}

// allHosts saves a definition deployed on every host of the fleet.
func allHosts(tb testing.TB, e *engine.Engine, fleet *simulator.Fleet) int {
	tb.Helper()
	ctx := context.Background()
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	def := model.ProcessDef{Process: proc("bench", "agent-probe", map[string]string{"app": "probe"})}
	for _, h := range hosts {
		def.Hosts = append(def.Hosts, h.Host)
	}
	if err := e.SaveProcess(ctx, def); err != nil {
		tb.Fatal(err)
	}
	return len(hosts)
}

func TestSimulator10kHostsOneOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 hosts")
	}
	// Every start must succeed: on a loaded machine 10,000 replies can
	// queue behind each other past the default per-host slack (a reply
	// late by the clock, not lost, then reads 116), so the slack is
	// generous; a lost reply still fails the test.
	ec := config.Default().Engine
	ec.DeadlineSlack = config.Duration(2 * time.Minute)
	e, fleet := simEngineWith(t, quietFleet(10000), ec)
	n := allHosts(t, e, fleet)
	if n < 10000 {
		t.Fatalf("fleet has %d hosts", n)
	}
	t0 := time.Now()
	task, res := operate(t, e, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "bench"}})
	if len(res) != n || task.Targets != n {
		t.Fatalf("%d results of %d targets, want %d", len(res), task.Targets, n)
	}
	seen := make(map[model.Host]bool, n)
	for i, r := range res {
		if r.Seq != int64(i+1) || r.Code != model.CodeSuccess || seen[r.Host] {
			t.Fatalf("result %d: %+v", i, r)
		}
		seen[r.Host] = true
	}
	t.Logf("10,000 hosts started in %v", time.Since(t0))
}

// BenchmarkOperate10kHosts: one status operation over 10,000 simulated
// hosts (1 ms median latency), from Operate to the last watched result.
func BenchmarkOperate10kHosts(b *testing.B) {
	e, fleet := simEngine(b, quietFleet(10000))
	n := allHosts(b, e, fleet)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "bench"}})
		if err != nil {
			b.Fatal(err)
		}
		ch, err := e.Watch(ctx, task.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for range ch {
			got++
		}
		if got != n {
			b.Fatalf("%d results of %d", got, n)
		}
	}
}

func TestSimulatorEventsUpdateLastKnown(t *testing.T) {
	sc := quietFleet(20)
	sc.CrashRate = 600 // per process per minute: several crashes every tick
	e, fleet := simEngine(t, sc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs, err := e.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go fleet.Run(ctx)
	var ev model.Event
	deadline := time.After(10 * time.Second)
	for ev.Kind != model.EventRestartSuccess {
		select {
		case ev = <-evs:
		case <-deadline:
			t.Fatal("no restart event from a crashing fleet")
		}
	}
	recent, _ := e.RecentEvents(ctx, 0)
	if len(recent) == 0 {
		t.Fatal("events not stored")
	}
	hv, _ := e.Hosts(ctx, backend.HostQuery{Hosts: []model.Host{ev.Host}})
	found := false
	for _, h := range hv {
		for _, p := range h.Procs {
			if p.Key != ev.ProcKey {
				continue
			}
			found = true
			if p.Status.Restarts == 0 || p.Status.State != model.ProcRunning {
				t.Fatalf("%s on %s: restart event not reflected: %+v", p.Key, h.Host, p.Status)
			}
		}
	}
	if !found {
		t.Fatalf("Hosts does not list %s on %s, the process of the restart event", ev.ProcKey, ev.Host)
	}
}

// Hosts shows the processes' real states before any operation, from the
// fleet's own reports (engine.StatusSource); a host that cannot report
// keeps "unknown".
func TestHostsShowReportedStatesBeforeAnyOp(t *testing.T) {
	sc := quietFleet(80)
	e, fleet := simEngine(t, sc)
	ctx := context.Background()
	off := model.Host{}
	views, err := e.Hosts(ctx, backend.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if len(v.Procs) > 0 {
			off = v.Host
			break
		}
	}
	fleet.SetOffline(off, true)
	views, err = e.Hosts(ctx, backend.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	known, running := 0, 0
	for _, v := range views {
		snap, _ := fleet.Host(v.Host)
		for _, p := range v.Procs {
			if v.Host == off || snap.Kind != "normal" {
				if p.Status.State != model.ProcUnknown {
					t.Fatalf("host %s cannot report: %s is %s, want unknown", v.Host, p.Key, p.Status.State)
				}
				continue
			}
			want, ok := snap.Proc(p.Key)
			if !ok {
				t.Fatalf("%s: fleet does not know %s", v.Host, p.Key)
			}
			if p.Status.State != want.State || p.Status.PID != want.PID || p.Status.Hosted != want.Hosted {
				t.Fatalf("%s %s: engine shows %s pid %d hosted %v, fleet has %s pid %d hosted %v", v.Host, p.Key,
					p.Status.State, p.Status.PID, p.Status.Hosted, want.State, want.PID, want.Hosted)
			}
			known++
			if p.Status.State == model.ProcRunning {
				running++
			}
		}
	}
	if known == 0 || running == 0 {
		t.Fatalf("known %d, running %d: want states reported before any op", known, running)
	}
}

// Simulate is refused without a simulated fleet and in read-only mode, and
// audited either way; with one it picks by the fleet's seed.
func TestSimulate(t *testing.T) {
	ctx := context.Background()
	req := backend.SimRequest{SimChange: model.SimChange{Action: model.SimOffline, Count: 3}, Selector: backend.Selector{Namespace: "web"}}
	for _, tc := range []struct {
		name string
		opts func(*simulator.Fleet) []engine.Option
		want error
	}{
		{"real agents", func(*simulator.Fleet) []engine.Option { return nil }, model.ErrNotSimulated},
		{"read-only", func(f *simulator.Fleet) []engine.Option {
			return []engine.Option{engine.WithSimulator(f), engine.WithReadOnly(true)}
		}, model.ErrReadOnly},
		{"simulated", func(f *simulator.Fleet) []engine.Option { return []engine.Option{engine.WithSimulator(f)} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleet := simulator.New(quietFleet(80))
			e := engine.New(config.Default().Engine, fleet, fleet, store.NewMemory(), tc.opts(fleet)...)
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close(); _ = fleet.Close() })
			if err := e.Seed(ctx, fleet.Definitions()); err != nil {
				t.Fatal(err)
			}
			out, err := e.Simulate(ctx, req)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			offline := 0
			his, _ := fleet.Hosts(ctx)
			for _, h := range his {
				if s, _ := fleet.Host(h.Host); s.Offline {
					offline++
				}
			}
			es, _ := e.Audit(ctx, model.AuditQuery{Action: model.AuditSimulate})
			if len(es) != 1 {
				t.Fatalf("audit: %+v", es)
			}
			if tc.want != nil {
				if offline != 0 || es[0].Result != model.AuditRefused {
					t.Fatalf("refused, yet %d hosts offline; audit %+v", offline, es[0])
				}
				return
			}
			if offline != 3 || len(out.Picked) != 3 || es[0].Result != model.AuditOK || es[0].TargetCount != 3 {
				t.Fatalf("offline %d, outcome %+v, audit %+v", offline, out, es[0])
			}
		})
	}
}

// BenchmarkOperateNamedHosts: creating a status task over a fifth of a
// 100,000-host simulated fleet named host by host (every process of each
// named host), measured from Operate to its return (the task created and
// dispatching), the cost a caller waits for before it gets a task id.
func BenchmarkOperateNamedHosts(b *testing.B) {
	e, fleet := simEngine(b, quietFleet(100000))
	ctx := context.Background()
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var named []model.Host
	for i := 0; i < len(hosts); i += 5 {
		named = append(named, hosts[i].Host)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Hosts: named}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ch, err := e.Watch(ctx, task.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for range ch {
			got++
		}
		if got != task.Targets {
			b.Fatalf("%d results of %d", got, task.Targets)
		}
		b.ReportMetric(float64(task.Targets), "targets")
		b.StartTimer()
	}
}
