//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
	"gseproc/model/opsem"
)

// executor is one implementation of the operation semantics: the
// simulator, the agent called in process, the agent served over NATS.
type executor interface {
	// given brings a fresh resident process (from setup) to g and returns
	// the definition the steps use.
	given(t *testing.T, g opsem.Given, p model.Process, dir string) model.Process
	// do sends op for p, whose command ends with outcome (0, 65535, 836).
	do(t *testing.T, op model.OpType, p model.Process, outcome int) model.AgentReply
}

// TestConformance runs model/opsem's conformance table against the
// simulator, the in-process agent (real processes) and the agent over
// NATS (real processes, the wire in between): every step must give the
// same code and settle in the same state and hosting on all three.
func TestConformance(t *testing.T) {
	t.Parallel()
	tune := func(c *config.AgentConfig) { c.BackoffMax = config.Duration(time.Minute) } // start_interval 60 s holds BACKOFF
	execs := map[string]executor{
		"simulator":  newSimExec(t),
		"agent":      &agentExec{a: newAgent(t, "", tune)},
		"agent-nats": newNATSExec(t, newAgent(t, "", tune, func(c *config.AgentConfig) { c.IP = "127.0.0.2" })),
	}
	for name, ex := range execs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for ci, c := range opsem.Conformance {
				t.Run(c.Name, func(t *testing.T) {
					p, dir := setup(t, fmt.Sprintf("conf%d", ci), nil)
					p = ex.given(t, c.Given, p, dir)
					for i, s := range c.Steps {
						r := ex.do(t, s.Op, p, s.Outcome)
						if r.Code != s.Code {
							t.Fatalf("step %d %s (outcome %d): code %d (%s), want %d: %s", i, s.Op, s.Outcome, r.Code, r.Message, s.Code, s.Why)
						}
						st := settled(t, ex, p, s.State, s.Hosted)
						if st.State != s.State || st.Hosted != s.Hosted || (st.State == model.ProcRunning) != (st.PID > 0) {
							t.Fatalf("step %d %s: state %s hosted %v pid %d, want %s hosted %v: %s",
								i, s.Op, st.State, st.Hosted, st.PID, s.State, s.Hosted, s.Why)
						}
					}
				})
			}
		})
	}
}

// settled waits (generously: restarts take real time on a loaded machine)
// until a status query shows state and hosted, and returns the last status.
func settled(t *testing.T, ex executor, p model.Process, state model.ProcState, hosted bool) model.ProcStatus {
	t.Helper()
	deadline := time.Now().Add(slowBox)
	for {
		st := *ex.do(t, model.OpStatus, p, 0).Status
		if (st.State == state && st.Hosted == hosted) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withOutcome is p with the command of op made to end with outcome.
func withOutcome(op model.OpType, p model.Process, outcome int) model.Process {
	c := &p.Spec.Control
	switch {
	case outcome == model.CodeSuccess:
	case op == model.OpStart && outcome == model.CodeCommandFailed:
		c.StartCmd = "echo broken config >&2; exit 3"
	case (op == model.OpStart || op == model.OpRestart) && outcome == model.CodePostCheckFailed:
		c.RestartCmd, c.StartCmd = "", "true" // no pid file: not running after start
	case op == model.OpStop && outcome == model.CodeCommandFailed:
		c.StopCmd = "exit 9"
	case op == model.OpStop && outcome == model.CodePostCheckFailed:
		c.StopCmd = "echo pretending"
	case op == model.OpKill && outcome == model.CodeCommandFailed:
		c.KillCmd = "exit 9"
	default:
		panic(fmt.Sprintf("no way to make %s end with %d", op, outcome))
	}
	return p
}

// agentExec is the agent called in process.
type agentExec struct{ a *Agent }

func (x *agentExec) do(t *testing.T, op model.OpType, p model.Process, outcome int) model.AgentReply {
	t.Helper()
	return do(t, x.a, op, withOutcome(op, p, outcome))
}

func (x *agentExec) given(t *testing.T, g opsem.Given, p model.Process, dir string) model.Process {
	return agentGiven(t, x, g, p, dir)
}

// agentGiven brings p to g on a real agent through ex.
func agentGiven(t *testing.T, ex executor, g opsem.Given, p model.Process, dir string) model.Process {
	t.Helper()
	want := func(op model.OpType, code int) model.AgentReply {
		t.Helper()
		r := ex.do(t, op, p, 0)
		if r.Code != code {
			t.Fatalf("given %s: %s answered %d (%s)", g, op, r.Code, r.Message)
		}
		return r
	}
	switch g {
	case opsem.Fresh:
	case opsem.Running:
		want(model.OpStart, 0)
	case opsem.RunningUnhosted:
		want(model.OpStart, 0)
		want(model.OpUnregister, 0)
	case opsem.Fatal, opsem.InBackoff:
		// It comes up, then dies, and the restart fails (the broken marker).
		broken := filepath.Join(dir, "broken")
		p.Spec.Control.StartCmd = "[ -e broken ] && { echo cannot start: broken; exit 1; }; ./daemon.sh >/dev/null 2>&1 &"
		p.Spec.Policy.StartRetries, p.Spec.Policy.StartInterval = 1, 0
		state := model.ProcFatal
		if g == opsem.InBackoff {
			p.Spec.Policy.StartRetries, p.Spec.Policy.StartInterval = 3, 60
			state = model.ProcBackoff
		}
		pid := want(model.OpStart, 0).Status.PID
		if err := os.WriteFile(broken, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		// BACKOFF also shows, for a moment, before the immediate restart:
		// wait for the one after the failed restart.
		eventually(t, slowBox, "given "+string(g), func() bool {
			st := ex.do(t, model.OpStatus, p, 0).Status
			return st.State == state && st.Hosted && strings.Contains(st.Message, "restart failed")
		})
		if err := os.Remove(broken); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no way to reach %s", g)
	}
	return p
}

// natsExec is an agent served over NATS, driven through the dispatcher
// the server uses.
type natsExec struct {
	a    *Agent
	disp *transport.Dispatcher
}

func newNATSExec(t *testing.T, a *Agent) *natsExec {
	t.Helper()
	cfg := config.Default().NATS
	cfg.Listen = "127.0.0.1:-1"
	cfg.StoreDir = t.TempDir()
	srv, err := natsembed.StartEmbedded(cfg, natsembed.EmbeddedOptions{Demo: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	snc, err := srv.Connect("conformance-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	disp, err := transport.NewDispatcher(snc, transport.DispatcherOptions{OfflineAfter: config.Default().NATS.OfflineAfter.D()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = disp.Close() })
	anc, err := transport.Connect(transport.ClientOptions{URLs: srv.ClientURL(), Name: "conformance-agent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- transport.ServeAgent(ctx, anc, a, transport.ServeOptions{HeartbeatInterval: config.Default().NATS.HeartbeatInterval.D()})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeAgent: %v", err)
		}
		anc.Close()
	})
	// Ready once the agent's heartbeat reached the dispatcher.
	eventually(t, slowBox, "agent online over NATS", func() bool { return disp.Online(a.host) })
	return &natsExec{a: a, disp: disp}
}

func (x *natsExec) do(t *testing.T, op model.OpType, p model.Process, outcome int) model.AgentReply {
	t.Helper()
	p = withOutcome(op, p, outcome)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.Deadline(op)+10)*time.Second)
	defer cancel()
	r, err := x.disp.Dispatch(ctx, x.a.host, model.AgentRequest{TaskID: "GSETASK:conformance", Op: op, Process: p,
		Deadline: time.Now().Add(time.Duration(p.Deadline(op)) * time.Second)})
	if err != nil {
		t.Fatalf("%s over NATS: %v", op, err)
	}
	if r.Status == nil {
		t.Fatalf("%s over NATS: no status in %+v", op, r)
	}
	return r
}

func (x *natsExec) given(t *testing.T, g opsem.Given, p model.Process, dir string) model.Process {
	return agentGiven(t, x, g, p, dir)
}

// simExec is one simulated host.
type simExec struct {
	f *simulator.Fleet
	h model.Host
}

func newSimExec(t *testing.T) *simExec {
	f := simulator.New(config.SimulatorConfig{Hosts: 3, Seed: 11, Clouds: config.Default().Simulator.Clouds, Namespaces: []string{"web"}})
	t.Cleanup(func() { _ = f.Close() })
	return &simExec{f: f, h: model.Host{IP: "10.0.0.1"}}
}

func (x *simExec) do(t *testing.T, op model.OpType, p model.Process, outcome int) model.AgentReply {
	t.Helper()
	if outcome != 0 && !x.f.FailNext(x.h, p.Key(), outcome) {
		t.Fatalf("FailNext: the host does not know %s", p.Key())
	}
	r, err := x.f.Dispatch(context.Background(), x.h, model.AgentRequest{TaskID: "GSETASK:conformance", Op: op, Process: p})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (x *simExec) given(t *testing.T, g opsem.Given, p model.Process, _ string) model.Process {
	t.Helper()
	start := func() {
		if r := x.do(t, model.OpStart, p, 0); r.Code != 0 {
			t.Fatalf("given %s: start %d", g, r.Code)
		}
	}
	switch g {
	case opsem.Fresh:
	case opsem.Running:
		start()
	case opsem.RunningUnhosted:
		start()
		if r := x.do(t, model.OpUnregister, p, 0); r.Code != 0 {
			t.Fatalf("given %s: unregister %d", g, r.Code)
		}
	case opsem.Fatal, opsem.InBackoff:
		p.Spec.Policy.StartRetries, p.Spec.Policy.StartInterval = 1, 0
		if g == opsem.InBackoff {
			p.Spec.Policy.StartRetries, p.Spec.Policy.StartInterval = 3, 60
		}
		start()
		if !x.f.Crash(x.h, p.Key(), true) {
			t.Fatalf("given %s: crash", g)
		}
	default:
		t.Fatalf("no way to reach %s", g)
	}
	return p
}
