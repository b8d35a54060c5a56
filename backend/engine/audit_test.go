package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// TestAuditRecordsEveryChange: each entry point records the actor of its
// context, the scope, targets, task and outcome, refusals included.
func TestAuditRecordsEveryChange(t *testing.T) {
	e, _ := start(t, newFake(4), testCfg(), engine.WithReadOnly(false))
	who := model.Actor{App: "app1", User: "u1", Operator: "op1", Via: "ssh"}
	ctx := backend.WithActor(context.Background(), who)

	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpRestart, Selector: backend.Selector{Namespace: "ns", Name: "app"}, Operator: "req-operator"})
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := e.Watch(ctx, task.ID, 0)
	collect(t, ch)
	if _, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStop, Selector: backend.Selector{Namespace: "none"}}); err == nil {
		t.Fatal("operate on an empty namespace accepted")
	}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns", "z", nil), Hosts: []model.Host{hostN(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteProcess(ctx, "ns:z"); err != nil {
		t.Fatal(err)
	}
	if err := e.Cancel(ctx, "GSETASK:20200101000000:1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("cancel of an unknown task: %v", err)
	}
	// A call without an actor in its context still names its channel.
	if err := e.SaveProcess(context.Background(), model.ProcessDef{Process: proc("ns", "y", nil)}); err == nil {
		t.Fatal("definition without hosts accepted")
	}

	// task_finished is recorded once the task's end is stored, which
	// may come after the other calls.
	var fin []model.AuditEntry
	deadline := time.Now().Add(20 * time.Second)
	for len(fin) == 0 && time.Now().Before(deadline) {
		fin, _ = e.Audit(ctx, model.AuditQuery{Action: model.AuditTaskFinished})
		time.Sleep(10 * time.Millisecond)
	}
	if len(fin) != 1 || fin[0].TaskID != task.ID || fin[0].Actor.Operator != "req-operator" || fin[0].Op != "restart" ||
		fin[0].Summary != "done: 4 targets, 4 success, 0 failed, 0 timeout, 0 unreachable, 0 cancelled" {
		t.Fatalf("task_finished: %+v", fin)
	}
	all, _ := e.Audit(ctx, model.AuditQuery{})
	var es []model.AuditEntry
	for _, x := range all {
		if x.Action != model.AuditTaskFinished {
			es = append(es, x)
		}
	}
	type want struct {
		action, result, op, task string
		actor                    model.Actor
	}
	wants := []want{ // newest first
		{model.AuditSaveProcess, model.AuditRefused, "", "", model.Actor{Via: "engine"}},
		{model.AuditCancel, model.AuditRefused, "", "GSETASK:20200101000000:1", who},
		{model.AuditDeleteProcess, model.AuditOK, "", "", who},
		{model.AuditSaveProcess, model.AuditOK, "", "", who},
		{model.AuditOperate, model.AuditRefused, "stop", "", who},
		{model.AuditOperate, model.AuditOK, "restart", task.ID, who},
		{model.AuditSeed, model.AuditOK, "", "", model.Actor{Via: "seed"}}, // start's
	}
	if len(es) != len(wants) {
		t.Fatalf("%d entries, want %d: %+v", len(es), len(wants), es)
	}
	for i, w := range wants {
		x := es[i]
		if x.Action != w.action || x.Result != w.result || x.Op != w.op || x.TaskID != w.task || x.Actor.App != w.actor.App ||
			x.Actor.Operator != w.actor.Operator || x.Actor.Via != w.actor.Via {
			t.Errorf("entry %d: %+v, want %+v", i, x, w)
		}
	}
	if op := es[5]; op.TargetCount != 4 || len(op.Namespaces) != 1 || op.Namespaces[0] != "ns" || op.Targets[0] != "namespace=ns name=app" {
		t.Errorf("operate entry: %+v", op)
	}
	if _, err := e.Audit(ctx, model.AuditQuery{Action: "nope"}); err == nil {
		t.Error("audit query with a bad action accepted")
	}
}

// failingAudit is a store whose audit trail cannot be written.
type failingAudit struct{ *store.Memory }

func (failingAudit) AppendAudit(context.Context, model.AuditEntry) (uint64, error) {
	return 0, errors.New("audit stream unavailable")
}

// TestOperateNotRunWithoutAudit: an operation that cannot be recorded is
// refused and nothing is stored or dispatched.
func TestOperateNotRunWithoutAudit(t *testing.T) {
	f := newFake(3)
	st := failingAudit{store.NewMemory()}
	e := engine.New(testCfg(), f, f, st)
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	var hosts []model.Host
	for _, h := range f.hosts {
		hosts = append(hosts, h.Host)
	}
	// Seeding records its entry too, so it fails here (the definition is
	// stored): the operation below is what must not run.
	if err := e.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: hosts}}); err == nil || !strings.Contains(err.Error(), "audit stream unavailable") {
		t.Fatalf("seed without an audit entry: %v", err)
	}
	if _, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpKill, Selector: backend.Selector{Namespace: "ns"}}); err == nil {
		t.Fatal("operation run without an audit entry")
	}
	if ts, _ := st.Tasks(ctx, 0); len(ts) != 0 {
		t.Fatalf("tasks stored: %+v", ts)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("%d dispatches", n)
	}
}
