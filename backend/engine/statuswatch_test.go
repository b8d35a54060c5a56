package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestStatusStoredByAnotherServer: two engines on one JetStream store
// each store a process's status only when it changed from what the store
// has. B stores "running", A then stores "stopped"; when B reads
// "running" again it stores it (the store had A's "stopped", not B's
// "running"), and each engine shows the status the other stored.
func TestStatusStoredByAnotherServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	var state atomic.Value
	state.Store(model.ProcRunning)
	reply := func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		s := state.Load().(model.ProcState)
		pid := 42
		if s != model.ProcRunning {
			pid = -1
		}
		return model.AgentReply{Code: model.CodeSuccess, Status: &model.ProcStatus{ProcKey: "ns:app", ProcName: "app", State: s, PID: pid, Hosted: true}}, nil
	}
	fa, fb := newFake(1), newFake(1)
	fa.reply, fb.reply = reply, reply
	stA, stB := sharedStore(t, emb), sharedStore(t, emb)
	a := engine.New(cfg, fa, fa, stA, engine.WithOwner("A"))
	b := engine.New(cfg, fb, fb, stB, engine.WithOwner("B"))
	startAll(t, a, b)
	ctx := context.Background()
	if err := a.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: []model.Host{hostN(0)}}}); err != nil {
		t.Fatal(err)
	}
	status := func(e *engine.Engine) {
		t.Helper()
		task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := e.Watch(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range ch {
			n++
		}
		if n != 1 {
			t.Fatalf("%d results, want 1", n)
		}
	}
	inStore := func(want model.ProcState) bool {
		sts, err := stA.ProcStatuses(ctx)
		l := sts[hostN(0)]
		return err == nil && len(l) == 1 && l[0].State == want
	}
	shown := func(e *engine.Engine, want model.ProcState) bool {
		hs, err := e.Hosts(ctx, backend.HostQuery{})
		if err != nil || len(hs) != 1 || len(hs[0].Procs) != 1 {
			return false
		}
		return hs[0].Procs[0].Status.State == want
	}

	status(b)
	waitUntil(t, "B's running stored", 30*time.Second, func() bool { return inStore(model.ProcRunning) })
	state.Store(model.ProcStopped)
	status(a)
	waitUntil(t, "A's stopped stored", 30*time.Second, func() bool { return inStore(model.ProcStopped) })
	waitUntil(t, "B shows the stopped A stored", 30*time.Second, func() bool { return shown(b, model.ProcStopped) })
	state.Store(model.ProcRunning)
	status(b)
	waitUntil(t, "B's running stored over A's stopped", 30*time.Second, func() bool { return inStore(model.ProcRunning) })
	waitUntil(t, "A shows the running B stored", 30*time.Second, func() bool { return shown(a, model.ProcRunning) })
}
