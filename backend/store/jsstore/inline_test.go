package jsstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// TestOneTargetInRecord: a task of one target is stored with its target
// in its record, nothing in the targets bucket (one message fewer), and
// keeps it through every rewrite of the record (UpdateTask with the
// revision known and not, UpdateTaskFenced, ModifyTask, by its creator
// and by another store); the task and its target (with the agent id it
// was named by) read back the same from either store, and its results
// are stored against it. A task of two targets keeps them in the bucket.
func TestOneTargetInRecord(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	tg := targets(1)
	tg[0].AgentID = "0100000000000000000000000000000000"
	id := model.FormatTaskID(time.Now(), 11)
	task := model.Task{ID: id, Op: model.OpStatus, Targets: 1, Status: model.TaskPending, Created: time.Now().UTC()}
	if err := a.CreateTask(ctx, task, tg, "owner-a", 10*time.Second, model.AuditEntry{Action: model.AuditOperate, TaskID: id}); err != nil {
		t.Fatal(err)
	}
	keys := func(id string) int {
		n := 0
		if err := a.each(ctx, a.on().targets, enc(id)+".*", func(jetstream.KeyValueEntry) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := keys(id); n != 0 {
		t.Fatalf("a one-target task wrote %d keys in the targets bucket, want none", n)
	}
	check := func(step string, status model.TaskStatus) {
		t.Helper()
		for name, s := range map[string]*Store{"a": a, "b": b} {
			got, gtg, err := s.Task(ctx, id)
			if err != nil {
				t.Fatalf("%s: store %s reads the task: %v", step, name, err)
			}
			if got.Status != status || len(gtg) != 1 || gtg[0] != tg[0] {
				t.Fatalf("%s: store %s reads %s with targets %+v, want %s with %+v", step, name, got.Status, gtg, status, tg)
			}
		}
	}
	check("created", model.TaskPending)

	task.Status = model.TaskRunning
	if err := a.UpdateTask(ctx, task); err != nil { // the revision known
		t.Fatal(err)
	}
	check("updated by its creator", model.TaskRunning)
	task.Counts = model.Counts{Running: 1}
	if err := b.UpdateTask(ctx, task); err != nil { // the revision read
		t.Fatal(err)
	}
	check("updated by another store", model.TaskRunning)
	if err := a.ModifyTask(ctx, id, func(_ context.Context, t model.Task) (model.Task, error) {
		t.Selection = "modified"
		return t, nil
	}); err != nil {
		t.Fatal(err)
	}
	check("modified", model.TaskRunning)
	r := model.Result{TaskID: id, Host: tg[0].Host, ProcKey: tg[0].ProcKey, State: model.StateSuccess}
	if err := b.PutResultsFenced(ctx, id, 0, []model.Result{r}); err != nil {
		t.Fatal(err)
	}
	task.Status = model.TaskDone
	if err := a.UpdateTaskFenced(ctx, 0, task); err != nil { // its revision stale (b and ModifyTask wrote since)
		t.Fatal(err)
	}
	check("ended", model.TaskDone)
	if rs, err := b.Results(ctx, id); err != nil || len(rs) != 1 || rs[0].State != model.StateSuccess {
		t.Fatalf("results %+v, %v; want the one stored", rs, err)
	}

	id2 := model.FormatTaskID(time.Now(), 12)
	two := targets(2)
	if err := a.PutTask(ctx, model.Task{ID: id2, Op: model.OpStatus, Targets: 2, Status: model.TaskPending, Created: time.Now()}, two); err != nil {
		t.Fatal(err)
	}
	if n := keys(id2); n != 1 {
		t.Fatalf("a two-target task wrote %d keys in the targets bucket, want its one chunk", n)
	}
	if _, gtg, err := b.Task(ctx, id2); err != nil || len(gtg) != 2 {
		t.Fatalf("two-target task read with %d targets: %v", len(gtg), err)
	}
}
