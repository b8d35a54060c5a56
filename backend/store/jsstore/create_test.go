package jsstore

import (
	"errors"
	"testing"
	"time"

	"gseproc/model"
)

// TestCreateTask: CreateTask stores the lease (its owner's), the audit
// entry, the targets and the task; made again by its owner (an answer
// lost), it finds all of it its own; by another owner, the lease refuses
// it (model.ErrConflict) and the lease stays the first owner's.
func TestCreateTask(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	s := open(t, emb, Options{})
	ctx := tctx(t)
	tgs := targets(3)
	id := model.FormatTaskID(time.Now(), 5)
	task := model.Task{ID: id, Op: model.OpStart, Targets: len(tgs), Status: model.TaskPending, Created: time.Now().UTC()}
	en := model.AuditEntry{Time: time.Now().UTC(), Action: model.AuditOperate, Result: model.AuditOK, TaskID: id,
		Actor: model.Actor{Operator: "alice"}, TargetCount: len(tgs)}
	if err := s.CreateTask(ctx, task, tgs, "A", time.Minute, en); err != nil {
		t.Fatal(err)
	}
	check := func(entries int) {
		t.Helper()
		got, gotTargets, err := s.Task(ctx, id)
		if err != nil || got.ID != id || len(gotTargets) != len(tgs) {
			t.Fatalf("task %+v with %d targets: %v", got, len(gotTargets), err)
		}
		ls, err := s.Leases(ctx)
		if err != nil || len(ls) != 1 || ls[0].TaskID != id || ls[0].Owner != "A" || ls[0].TTL != time.Minute {
			t.Fatalf("leases %+v: %v", ls, err)
		}
		as, err := s.Audit(ctx, model.AuditQuery{Limit: 10})
		if err != nil || len(as) != entries || as[0].TaskID != id || as[0].Actor.Operator != "alice" {
			t.Fatalf("audit %+v: %v", as, err)
		}
	}
	check(1)
	// Its owner again: the lease and the task are found its own (the
	// audit entry, under a new message id, is stored again).
	if err := s.CreateTask(ctx, task, tgs, "A", time.Minute, en); err != nil {
		t.Fatalf("again by its owner: %v", err)
	}
	check(2)
	// Another owner: refused by the lease.
	if err := s.CreateTask(ctx, task, tgs, "B", time.Minute, en); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("by another owner: %v, want ErrConflict", err)
	}
	// A task that differs, under an id taken: refused by the record.
	other := task
	other.Op = model.OpStop
	if err := s.CreateTask(ctx, other, tgs, "A", time.Minute, en); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("another task under the id: %v, want ErrConflict", err)
	}
	// Targets given twice: refused before anything is written.
	id2 := model.FormatTaskID(time.Now(), 6)
	task2 := task
	task2.ID = id2
	if err := s.CreateTask(ctx, task2, append(tgs, tgs[0]), "A", time.Minute, en); err == nil {
		t.Fatal("a target given twice was taken")
	}
	if ls, err := s.Leases(ctx); err != nil || len(ls) != 1 {
		t.Fatalf("leases after a refused task: %+v %v", ls, err)
	}
}
