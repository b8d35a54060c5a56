//go:build linux

package agent

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// localEngine is a started engine, on a memory store, over agents called
// in process (Local).
func localEngine(t testing.TB, agents ...*Agent) *engine.Engine {
	t.Helper()
	l := NewLocal(agents...)
	st := store.NewMemory()
	t.Cleanup(func() { st.Close() })
	eng := engine.New(config.Default().Engine, l, l, st)
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// TestEngineOverTwoLocalAgents runs the engine against two real agents on
// this machine (different identities, one definition whose pid_path holds
// $GSEPROC_HOST_IP): start, a SIGKILL brought back and reported as an
// event, status, stop, and an unknown host reported unreachable.
func TestEngineOverTwoLocalAgents(t *testing.T) {
	t.Parallel()
	a1 := newAgent(t, "")
	a2 := newAgent(t, "", func(c *config.AgentConfig) { c.IP = "127.0.0.2"; c.CloudID = 1 })
	eng := localEngine(t, a1, a2)
	ctx := context.Background()
	evs, err := eng.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}

	p, dir := setup(t, "web", nil)
	p.Spec.Identity.PidPath = filepath.Join(dir, "web-$GSEPROC_HOST_IP.pid")
	t.Cleanup(func() {
		killByPidFiles(a1.expand(p))
		killByPidFiles(a2.expand(p))
	})
	hosts := []model.Host{a1.host, a2.host}
	def := model.ProcessDef{Process: p, Hosts: hosts}
	if err := eng.SaveProcess(ctx, def); err != nil {
		t.Fatal(err)
	}
	operate := func(op model.OpType, sel backend.Selector) []model.Result {
		t.Helper()
		return operateSel(t, eng, op, sel)
	}
	sel := backend.Selector{Namespace: "test", Name: "web"}
	for _, r := range operate(model.OpStart, sel) {
		if r.Code != model.CodeSuccess {
			t.Fatalf("start on %s: %d %s", r.Host, r.Code, r.Message)
		}
	}
	pid1 := livePid(filepath.Join(dir, "web-127.0.0.1.pid"))
	pid2 := livePid(filepath.Join(dir, "web-127.0.0.2.pid"))
	if pid1 == 0 || pid2 == 0 || pid1 == pid2 {
		t.Fatalf("one process per agent: %d %d", pid1, pid2)
	}
	if rs := operate(model.OpStart, sel); len(rs) != 2 || rs[0].Code != model.CodeAlreadyRunning {
		t.Fatalf("start again: %+v", rs)
	}

	// A SIGKILL on host 2 is repaired there and reported to the engine.
	if err := syscall.Kill(pid2, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(slowBox)
	for got := false; !got; {
		select {
		case ev := <-evs:
			got = ev.Kind == model.EventRestartSuccess && ev.Host.AgentID() == "1:127.0.0.2" && ev.ProcKey == "test:web"
		case <-deadline:
			t.Fatal("no restart event reached the engine")
		}
	}
	if np := livePid(filepath.Join(dir, "web-127.0.0.2.pid")); np == 0 || np == pid2 {
		t.Fatalf("host 2 not restarted: %d", np)
	}

	for _, r := range operate(model.OpStatus, sel) {
		if r.Code != model.CodeSuccess || r.Status == nil || r.Proc.ProcName == "" {
			t.Fatalf("status on %s: %+v", r.Host, r)
		}
	}
	for _, r := range operate(model.OpStop, sel) {
		if r.Code != model.CodeSuccess {
			t.Fatalf("stop on %s: %d %s", r.Host, r.Code, r.Message)
		}
	}
	if livePid(filepath.Join(dir, "web-127.0.0.1.pid")) != 0 || livePid(filepath.Join(dir, "web-127.0.0.2.pid")) != 0 {
		t.Fatal("running after stop")
	}

	// A host without an agent: unreachable (117).
	def.Hosts = append(def.Hosts, model.Host{IP: "127.0.0.9"})
	if err := eng.SaveProcess(ctx, def); err != nil {
		t.Fatal(err)
	}
	for _, r := range operate(model.OpStatus, backend.Selector{Namespace: "test", Name: "web", Hosts: []model.Host{{IP: "127.0.0.9"}}}) {
		if r.Code != model.CodeAgentAbnormal {
			t.Fatalf("host without agent: %+v", r)
		}
	}
}
