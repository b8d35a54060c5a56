package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/model"
)

// The helpers shared with backend/node's tests (nodetest).
type syncBuf = nodetest.SyncBuf

var (
	natsTestConfig = nodetest.NATSConfig
	killAtEnd      = nodetest.KillAtEnd
	hostOnline     = nodetest.HostOnline
)

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, what, d, cond)
}

// runCmd runs `gseproc args...` through Main until the test ends.
func runCmd(t *testing.T, args ...string) (*syncBuf, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuf{}, &syncBuf{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, Stdio{In: strings.NewReader(""), Out: out, Err: errb}) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("gseproc %s: exit %d\n%s", args[0], code, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("gseproc %s did not stop", args[0])
		}
	}
	t.Cleanup(stop)
	return out, stop
}

// operate runs one op to completion and returns its results.
func operate(t *testing.T, e *engine.Engine, req backend.OperateRequest) []model.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task, err := e.Operate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Result
	for r := range ch {
		out = append(out, r)
	}
	if ctx.Err() != nil {
		t.Fatalf("task %s did not finish", task.ID)
	}
	return out
}

// TestNATSEngineRealAgent: a NATS-backed engine (embedded NATS, JetStream
// store, simulated demo fleet merged in) and a real `gseproc agent` on
// 127.0.0.1 that starts, reports and stops a real process; the state
// survives a restart of the server.
func TestNATSEngineRealAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	storeDir := t.TempDir()
	cfg := natsTestConfig(storeDir)
	ctx := context.Background()
	e, nb, closeEngine, err := node.OpenNATSEngine(ctx, cfg, true, false, Version, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeEngine() }()

	// A real agent on this machine, cloud 5 (the simulated fleet has 0:127.0.0.1).
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "daemon.sh"), []byte("#!/bin/sh\ntrap 'exit 0' TERM\necho $$ > \"$GSEPROC_PID_FILE\"\nwhile :; do sleep 0.05; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(work, "agent.toml")
	if err := os.WriteFile(cfgFile, []byte("[nats]\nheartbeat_interval = \"100ms\"\noffline_after = \"5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	me := model.Host{IP: "127.0.0.1", CloudID: 5}
	killAtEnd(t, filepath.Join(work, "daemon.pid")) // before the agent: it runs after the agent stopped
	out, _ := runCmd(t, "agent", "--config", cfgFile, "--nats", nb.ClientURL, "--cloud", "5", "--ip", "127.0.0.1",
		"--data-dir", filepath.Join(work, "agent"), "--label", "role=test")
	waitFor(t, "real agent online", 30*time.Second, func() bool { return hostOnline(e, me) })
	if !strings.Contains(out.String(), "5:127.0.0.1") {
		t.Errorf("agent banner %q does not name its identity", out.String())
	}
	hs, _ := e.Hosts(ctx, backend.HostQuery{Hosts: []model.Host{me}})
	if hs[0].Labels["role"] != "test" || hs[0].Labels["bk_biz_id"] != "1" {
		t.Errorf("agent labels %v: want its own and biz 1 (demo)", hs[0].Labels)
	}

	p := model.Process{
		Meta: model.Meta{Namespace: "biz_1", Name: "daemon"},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: "daemon", SetupPath: work, PidPath: filepath.Join(work, "daemon.pid")},
			Control:  model.Control{StartCmd: "./daemon.sh >/dev/null 2>&1 &"},
			Policy: model.Policy{AutoType: model.AutoResident, StartCheckSecs: model.DefaultStartCheckSecs,
				StartRetries: model.DefaultStartRetries, StartInterval: model.DefaultStartInterval, OpTimeout: 10, StartCheckEndSecs: 10, InstanceNum: 1},
		},
	}
	sim := model.Host{IP: "10.0.0.1", CloudID: 0} // a demo host of the simulated fleet
	item := model.ProcessDef{Process: p, Hosts: []model.Host{me, sim}}

	rs := operate(t, e, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if len(rs) != 2 {
		t.Fatalf("start results %+v", rs)
	}
	for _, r := range rs {
		if r.Code != model.CodeSuccess {
			t.Fatalf("start on %s: %d %s", r.Host, r.Code, r.Message)
		}
	}
	rs = operate(t, e, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if len(rs) != 2 {
		t.Fatalf("second start results %+v", rs)
	}
	for _, r := range rs {
		if r.Code != model.CodeAlreadyRunning {
			t.Fatalf("second start on %s: %d %s, want 828", r.Host, r.Code, r.Message)
		}
	}

	// A process group over NATS: the real agent and the simulated host take
	// it (the agent keeps it in its data dir), an unknown host is 117 and
	// is not stored.
	pool := model.GroupResource{CPUPoolLimit: 90, MemPoolLimit: 80, MemPoolWeight: 1}
	gr, err := e.SetProcessGroups(ctx, backend.GroupRequest{Namespace: "biz_1", Resource: pool,
		Hosts: []model.Host{me, sim, {IP: "10.250.0.1", CloudID: 9}}})
	if err != nil || len(gr) != 3 || gr[0].Code != 0 || gr[1].Code != 0 || gr[2].Code != model.CodeAgentAbnormal {
		t.Fatalf("set process group: %+v %v", gr, err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "agent", "procgroupinfo.json")); err != nil || !strings.Contains(string(b), `"id": "biz_1"`) {
		t.Fatalf("the agent's procgroupinfo.json: %s %v", b, err)
	}

	// The server restarts on the same store dir and address: registry and
	// tasks are there, and the agent, which kept supervising, reconnects.
	tasks, _ := e.Tasks(ctx, 0)
	if err := closeEngine(); err != nil {
		t.Fatal(err)
	}
	cfg.NATS.Listen = strings.TrimPrefix(nb.ClientURL, "nats://")
	e2, _, close2, err := node.OpenNATSEngine(ctx, cfg, true, false, Version, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = close2() }()
	tasks2, _ := e2.Tasks(ctx, 0)
	if len(tasks2) != len(tasks) || tasks2[0].ID != tasks[0].ID {
		t.Fatalf("tasks after restart: %d, want %d", len(tasks2), len(tasks))
	}
	waitFor(t, "agent back online", 30*time.Second, func() bool { return hostOnline(e2, me) })
	if gs, err := e2.ProcessGroups(ctx, backend.GroupQuery{Namespace: "biz_1"}); err != nil || len(gs) != 2 ||
		gs[0].Host != sim || gs[1].Host != me || gs[1].Resource != pool {
		t.Fatalf("process groups after a restart: %+v %v", gs, err)
	}
	rs = operate(t, e2, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "biz_1", Name: "daemon", Hosts: []model.Host{me}}})
	if len(rs) != 1 || rs[0].Code != 0 || !rs[0].Hosted {
		t.Fatalf("status after restarts: %+v", rs)
	}
	rs = operate(t, e2, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "biz_1", Name: "daemon", Hosts: []model.Host{me}}})
	if len(rs) != 1 || rs[0].Code != 0 {
		t.Fatalf("stop: %+v", rs)
	}
	// An unknown host is unreachable (117), promptly.
	start := time.Now()
	rs = operate(t, e2, backend.OperateRequest{Op: model.OpStatus, Items: []model.ProcessDef{{Process: p, Hosts: []model.Host{{IP: "10.250.0.1", CloudID: 9}}}}})
	if len(rs) != 1 || rs[0].Code != model.CodeAgentAbnormal || time.Since(start) > 5*time.Second {
		t.Fatalf("unknown host: %+v", rs)
	}
}

// TestSimOverNATS: `gseproc sim --nats URL --hosts N` serves a simulated
// fleet to a NATS-backed server.
func TestSimOverNATS(t *testing.T) {
	cfg := natsTestConfig(t.TempDir())
	nb, err := node.StartNATS(context.Background(), cfg, true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	cfgFile := filepath.Join(t.TempDir(), "sim.toml")
	if err := os.WriteFile(cfgFile, []byte("[nats]\nheartbeat_interval = \"100ms\"\noffline_after = \"5s\"\n[simulator]\noffline_rate = 0.0\nunreachable_rate = 0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runCmd(t, "sim", "--config", cfgFile, "--nats", nb.ClientURL, "--hosts", "50", "--seed", "4")
	online := func() int {
		hs, _ := nb.Inventory.Hosts(context.Background())
		n := 0
		for _, h := range hs {
			if h.State == model.AgentOnline {
				n++
			}
		}
		return n
	}
	waitFor(t, "50 simulated hosts online", 30*time.Second, func() bool { return online() == 50 })
	if !strings.Contains(out.String(), "50 simulated hosts (seed 4)") {
		t.Errorf("banner %q", out.String())
	}
	hs, _ := nb.Inventory.Hosts(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := nb.Dispatcher.Dispatch(ctx, hs[0].Host, model.AgentRequest{Op: model.OpStatus,
		Process: model.Process{Meta: model.Meta{Namespace: "web", Name: "x"}}})
	if err != nil || rep.Status == nil {
		t.Fatalf("op over NATS to a simulated host: %+v %v", rep, err)
	}
}

func TestAgentFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--config", "/nonexistent/gseproc.toml", "--ip", "10.0.0.1"}, "/nonexistent/gseproc.toml"},
		{[]string{"agent", "--ip", "nope", "--data-dir", "DIR"}, "agent.ip"},
		{[]string{"agent", "--data-dir", "DIR"}, "agent.ip: required"},
		{[]string{"agent", "--ip", "10.0.0.1", "--data-dir", "DIR", "--label", "novalue"}, "--label"},
		{[]string{"agent", "--ip", "10.0.0.1", "--data-dir", "DIR", "--nats", "::bad"}, "nats.urls[0]"},
		{[]string{"sim", "--hosts", "0", "--nats", "nats://127.0.0.1:1"}, "simulator.hosts"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv(config.EnvVar, "")
			t.Setenv("XDG_CONFIG_HOME", dir)
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(a, "DIR", dir)
			}
			var out, errb syncBuf
			code := Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != 2 || !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errb.String(), tt.want)
			}
		})
	}
}
