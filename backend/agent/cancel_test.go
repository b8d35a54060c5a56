//go:build linux

package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store/jsstore"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

// slowStart is a resident process whose start_cmd runs long and never
// writes the pid file: the start is in flight until op_timeout. The
// command's shell writes its own pid first (the process group's leader),
// and starts a child in its group.
func slowStart(t *testing.T) (model.Process, string) {
	t.Helper()
	p, dir := setup(t, "slow", map[string]string{})
	p.Spec.Control.StartCmd = `echo $$ > cmd.pid; sleep 300 & wait`
	p.Spec.Policy.OpTimeout = 120
	p.Spec.Policy.StartCheckEndSecs = 120
	t.Cleanup(func() { killGroupOf(filepath.Join(dir, "cmd.pid")) })
	return p, dir
}

// killGroupOf kills the process group whose leader's pid is in path.
func killGroupOf(path string) {
	if pid := pidFromFile(path); pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// groupGone reports whether no process is left in the group of leader pid.
func groupGone(pid int) bool {
	return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
}

// commandRunning waits until the long start_cmd runs and returns its
// process group (its shell's pid).
func commandRunning(t *testing.T, dir string) int {
	t.Helper()
	var pgid int
	eventually(t, slowBox, "start_cmd running", func() bool {
		pgid = pidFromFile(filepath.Join(dir, "cmd.pid"))
		return pgid > 1 && !groupGone(pgid)
	})
	return pgid
}

// cancelledResult collects a task's results and checks the one target was
// cancelled while it ran.
func cancelledResult(t *testing.T, ch <-chan model.Result) model.Result {
	t.Helper()
	var got []model.Result
	for r := range ch {
		got = append(got, r)
	}
	if len(got) != 1 {
		t.Fatalf("want 1 result, got %d: %+v", len(got), got)
	}
	r := got[0]
	if r.State != model.StateCancelled || !strings.Contains(r.Message, "cancelled while running on the host") ||
		!strings.Contains(r.Message, model.ErrCancelled.Error()) {
		t.Fatalf("result: want cancelled while running, got %s %d %q", r.State, r.Code, r.Message)
	}
	return r
}

// cancelWhileRunning starts slowStart's process on host through run,
// cancels the task through at as soon as its start_cmd runs (watching it
// there), and checks the one result is cancelled and the command's
// process group killed. It returns the task, the process and its
// directory.
func cancelWhileRunning(t *testing.T, run, at *engine.Engine, host model.Host) (model.Task, model.Process, string) {
	t.Helper()
	ctx := context.Background()
	p, dir := slowStart(t)
	task, err := run.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{{Process: p, Hosts: []model.Host{host}}}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := at.Watch(wctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	pgid := commandRunning(t, dir)
	if err := at.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	cancelledResult(t, ch)
	eventually(t, slowBox, "start_cmd's process group gone", func() bool { return groupGone(pgid) })
	return task, p, dir
}

// TestCancelStopsRunningCommand cancels a task while its start_cmd runs on
// a real in-process agent: the command's whole process group is killed,
// the result is cancelled (not a timeout), the task is cancelled, and the
// agent's process is not left STARTING.
func TestCancelStopsRunningCommand(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	eng := localEngine(t, a)
	ctx := context.Background()

	task, p, _ := cancelWhileRunning(t, eng, eng, a.host)
	tv, err := eng.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tv.Task.Status != model.TaskCanceled || tv.Task.Counts.Cancelled != 1 {
		t.Fatalf("task: %s %+v", tv.Task.Status, tv.Task.Counts)
	}
	rep := a.Handle(ctx, model.AgentRequest{Op: model.OpStatus, Process: p})
	if rep.Status == nil || rep.Status.State.Up() {
		t.Fatalf("after the cancel the process is %+v", rep.Status)
	}
	audit, err := eng.Audit(ctx, model.AuditQuery{Action: model.AuditCancel, TaskID: task.ID})
	if err != nil || len(audit) != 1 || !strings.Contains(audit[0].Summary, "1 running told to stop") {
		t.Fatalf("audit of the cancel: %+v %v", audit, err)
	}
}

// TestCancelFromAnotherServer runs a task on one engine (server A) over
// NATS with a real agent served by the transport, and cancels it through
// another engine (server B) sharing A's JetStream store: B records the
// cancel, A sees it, tells the agent, and the agent kills the command's
// process group; both servers read the task as cancelled.
func TestCancelFromAnotherServer(t *testing.T) {
	t.Parallel()
	nc := config.Default().NATS
	nc.Listen = "127.0.0.1:-1"
	nc.StoreDir = t.TempDir()
	emb, err := natsembed.StartEmbedded(nc, natsembed.EmbeddedOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx := context.Background()

	a := newAgent(t, "")
	anc, err := emb.Connect("agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anc.Close)
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- transport.ServeAgent(sctx, anc, a, transport.ServeOptions{HeartbeatInterval: config.Default().NATS.HeartbeatInterval.D()})
	}()
	t.Cleanup(func() { stopServe(); <-served })

	server := func(name string) *engine.Engine {
		conn, err := emb.Connect(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		js, err := jetstream.New(conn)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, slowBox)
		defer cancel()
		so := jsstore.OptionsFromConfig(config.Default())
		so.Memory = true
		st, err := jsstore.New(sctx, js, so)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		d, err := transport.NewDispatcher(conn, transport.DispatcherOptions{OfflineAfter: config.Default().NATS.OfflineAfter.D()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		e := engine.New(config.Default().Engine, d, d, st, engine.WithOwner(name))
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	srvA, srvB := server("server-a"), server("server-b")

	eventually(t, slowBox, "agent online at server A", func() bool {
		hs, _ := srvA.Hosts(ctx, backend.HostQuery{Hosts: []model.Host{a.host}})
		return len(hs) == 1 && hs[0].State == model.AgentOnline
	})
	task, _, dir := cancelWhileRunning(t, srvA, srvB, a.host)
	for name, srv := range map[string]*engine.Engine{"A": srvA, "B": srvB} {
		eventually(t, slowBox, "task cancelled at server "+name, func() bool {
			tv, err := srv.Task(ctx, task.ID)
			return err == nil && tv.Task.Status == model.TaskCanceled && tv.Task.Counts.Cancelled == 1
		})
	}
	audit, err := srvB.Audit(ctx, model.AuditQuery{Action: model.AuditCancel, TaskID: task.ID})
	if err != nil || len(audit) != 1 || !strings.Contains(audit[0].Summary, "requested of the server running the task") {
		t.Fatalf("audit of the cancel at B: %+v %v", audit, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "slow.pid")); err == nil {
		t.Fatal("the cancelled start wrote its pid file")
	}
}

// TestCancelOpByID: a cancel sent as a request (AgentRequest.CancelOp, as
// a server that took a task over sends it) of an op this agent never saw
// is recorded cancelled: the op, when it still comes, is answered
// cancelled from the ledger and runs nothing. A cancel of an op that had
// finished answers its outcome. A cancel of an op running (the
// transport's cancel by op id ended its context) answers cancelled once
// the command's process group is gone.
func TestCancelOpByID(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ctx := context.Background()
	p, dir := setup(t, "byid", nil)
	p.Spec.Control.StartCmd = "echo ran >> ran.log; ./daemon.sh >/dev/null 2>&1 &"
	req := model.AgentRequest{TaskID: "t1", OpID: "t1/0:127.0.0.1/test:byid", Op: model.OpStart, Process: p}

	cancel := req
	cancel.CancelOp = true
	r := a.Handle(ctx, cancel)
	if !r.Cancelled || r.Code != model.CodeCommandFailed || !strings.Contains(r.Message, "cancelled before it ran") {
		t.Fatalf("cancel of an op never seen: %+v", r)
	}
	r = a.Handle(ctx, req)
	if !r.Cancelled {
		t.Fatalf("the op after its cancel: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cancelled op ran (%v)", err)
	}

	done := req
	done.TaskID, done.OpID = "t2", "t2/0:127.0.0.1/test:byid"
	wantCode(t, a.Handle(ctx, done), model.CodeSuccess, "start")
	done.CancelOp = true
	if r := a.Handle(ctx, done); r.Cancelled || r.Code != model.CodeSuccess {
		t.Fatalf("cancel of a finished op: %+v, want its outcome (success)", r)
	}

	slow, sdir := slowStart(t)
	run := model.AgentRequest{TaskID: "t3", OpID: "t3/0:127.0.0.1/test:slow", Op: model.OpStart, Process: slow}
	octx, stop := context.WithCancelCause(ctx) // what the transport's cancel by op id ends
	answered := make(chan model.AgentReply, 1)
	go func() { answered <- a.Handle(octx, run) }()
	pgid := commandRunning(t, sdir)
	stop(model.ErrCancelled)
	run.CancelOp = true
	if r := a.Handle(ctx, run); !r.Cancelled {
		t.Fatalf("cancel of a running op: %+v", r)
	}
	// SIGKILLed before the answer; a zombie still answers kill 0 until
	// it is reaped.
	eventually(t, slowBox, "the command's process group gone", func() bool { return groupGone(pgid) })
	if r := <-answered; !r.Cancelled {
		t.Fatalf("the running op's own answer: %+v", r)
	}
}
