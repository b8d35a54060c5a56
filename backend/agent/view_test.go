//go:build linux

package agent

import (
	"context"
	"testing"
	"time"

	"gseproc/model"
)

// TestStatusTakesNoLock: a status op is answered while everything an op,
// the supervisor or the registry writer can hold is held at once: the
// agent-wide lock, the registry writer's lock, the process's op slot (a
// restart in progress) and the launch gate (the restart's launch blocked
// before its fork). It reports what was published last: the restart's
// STARTING, hosted. Not parallel: the launch gate is the test process's,
// and holding it holds every test's launches back.
func TestStatusTakesNoLock(t *testing.T) {
	a := newAgent(t, "")
	p, _ := setup(t, "snap", nil)
	wantCode(t, do(t, a, model.OpStart, p), 0, "start")
	before := do(t, a, model.OpStatus, p).Status
	if before.State != model.ProcRunning || before.PID <= 0 || !before.Hosted {
		t.Fatalf("after the start: %+v", before)
	}
	status := func(p model.Process) <-chan model.AgentReply {
		ch := make(chan model.AgentReply, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ch <- a.Handle(ctx, model.AgentRequest{TaskID: "t", Op: model.OpStatus, Process: p})
		}()
		return ch
	}

	// Every launch now waits before its fork (reaper.go).
	children.gate.Lock()
	gate := true
	defer func() {
		if gate {
			children.gate.Unlock()
		}
	}()
	restarted := make(chan model.AgentReply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		restarted <- a.Handle(ctx, model.AgentRequest{TaskID: "t", Op: model.OpRestart, Process: p})
	}()
	eventually(t, slowBox, "the restart stopped the process and waits in its launch", func() bool {
		return (<-status(p)).Status.State == model.ProcStarting
	})

	other, _ := setup(t, "unknown", nil) // never operated on: no entry
	a.mu.Lock()
	a.flushMu.Lock()
	known, unknown := status(p), status(other)
	var got, gotOther model.AgentReply
	for range 2 {
		select {
		case got = <-known:
		case gotOther = <-unknown:
		case <-time.After(slowBox):
			t.Error("a status op waited behind the agent lock, the registry writer, an op or a launch")
		}
	}
	a.flushMu.Unlock()
	a.mu.Unlock()
	children.gate.Unlock()
	gate = false

	if got.Code != model.CodeSuccess || got.Status == nil || got.Status.State != model.ProcStarting || !got.Status.Hosted {
		t.Errorf("status while the restart launches: %d %s %+v, want STARTING and hosted", got.Code, got.Message, got.Status)
	}
	if gotOther.Code != model.CodeSuccess || gotOther.Status == nil || gotOther.Status.State != model.ProcStopped || gotOther.Status.Hosted {
		t.Errorf("status of a process never operated on: %d %s %+v, want STOPPED, not hosted", gotOther.Code, gotOther.Message, gotOther.Status)
	}
	r := <-restarted
	wantCode(t, r, 0, "restart")
	if r.Status.State != model.ProcRunning || r.Status.PID <= 0 || r.Status.PID == before.PID {
		t.Fatalf("after the restart: %+v (pid before %d)", r.Status, before.PID)
	}
}

// TestStopBeforeExitHandled: a stop of a hosted process that has died but
// whose exit its watcher has not handled yet (in a crash storm a watcher
// can be seconds late) calls the due restart off: answered success, no
// longer hosted, and the exit, once handled, restarts nothing. It was
// answered 829 with the hosting kept, the restart came after the stop,
// and a stop and unregister after a crash storm left processes running.
func TestStopBeforeExitHandled(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	p, _ := setup(t, "late", nil)
	wantCode(t, do(t, a, model.OpStart, p), 0, "start")
	// The watcher is taken away (as if late), then the process dies.
	a.mu.Lock()
	e := a.procs[p.Key()]
	u := e.units[0]
	a.unwatchLocked(u)
	pid := u.pid
	a.mu.Unlock()
	killPid(pid)
	eventually(t, slowBox, "the process gone", func() bool { _, live := alive(pid); return !live })

	r := do(t, a, model.OpStop, p)
	wantCode(t, r, model.CodeSuccess, "stop of a process dead, its exit not handled yet")
	if r.Status.Hosted {
		t.Fatalf("still hosted after the stop: %+v", r.Status)
	}
	// The watcher comes back and handles the exit.
	a.mu.Lock()
	a.watchLocked(u)
	a.mu.Unlock()
	eventually(t, slowBox, "the exit handled", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return u.state != model.ProcRunning
	})
	a.mu.Lock()
	state, hosted := u.state, e.hosted
	a.mu.Unlock()
	if hosted || state == model.ProcBackoff || state == model.ProcStarting {
		t.Fatalf("after the stop and the late exit: state %s, hosted %v: a restart is on its way", state, hosted)
	}
	if n := len(ev.of(model.EventRestartSuccess)) + len(ev.of(model.EventRestartFailed)); n != 0 {
		t.Fatalf("%d restarts after the stop", n)
	}
	if st := do(t, a, model.OpStatus, p).Status; st.State == model.ProcRunning || st.PID > 0 {
		t.Fatalf("after the stop: %+v", st)
	}
}

// BenchmarkStatusOp: a status op of a hosted running process, as a
// request brings it (Handle): its time and what it allocates, which in a
// crash storm is garbage the collector's stop-the-world and assists make
// the status itself pay for.
func BenchmarkStatusOp(b *testing.B) {
	a := newAgent(b, "")
	p, _ := setup(b, "snap", nil)
	if r := do(b, a, model.OpStart, p); r.Code != model.CodeSuccess {
		b.Fatalf("start: %d %s", r.Code, r.Message)
	}
	req := model.AgentRequest{TaskID: "t", Op: model.OpStatus, Process: p}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := a.Handle(ctx, req); r.Code != model.CodeSuccess || r.Status.State != model.ProcRunning {
			b.Fatalf("status: %d %s %+v", r.Code, r.Message, r.Status)
		}
	}
}
