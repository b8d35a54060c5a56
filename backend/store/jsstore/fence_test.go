package jsstore

import (
	"errors"
	"testing"
	"time"

	"gseproc/backend/engine"
	"gseproc/model"
)

// TestFence: the task's creator writes with token 0 until another store
// fences the task; from then on the old token's results and task updates
// are refused (whatever they carry) and the new owner's are stored; the
// fence does not show among the task's results and goes with the task.
func TestFence(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	tgs := targets(3)
	id := model.FormatTaskID(time.Now(), 7)
	task := model.Task{ID: id, Op: model.OpStart, Targets: len(tgs), Status: model.TaskRunning, Created: time.Now()}
	if err := a.PutTask(ctx, task, tgs); err != nil {
		t.Fatal(err)
	}
	res := func(i int, by string) model.Result {
		return model.Result{TaskID: id, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess, Message: by}
	}
	// The creator, never fenced: token 0.
	if err := a.PutResultsFenced(ctx, id, 0, []model.Result{res(0, "A")}); err != nil {
		t.Fatal(err)
	}
	fb, err := b.Fence(ctx, id)
	if err != nil || fb == 0 {
		t.Fatalf("fence: %d %v", fb, err)
	}
	if err := b.PutResultsFenced(ctx, id, fb, []model.Result{res(1, "B")}); err != nil {
		t.Fatal(err)
	}
	// A, deposed without knowing: neither a new target nor B's is written.
	for _, i := range []int{1, 2} {
		if err := a.PutResultsFenced(ctx, id, 0, []model.Result{res(i, "A")}); !errors.Is(err, model.ErrConflict) {
			t.Fatalf("deposed owner's result %d: %v, want ErrConflict", i, err)
		}
	}
	done := task
	done.Status = model.TaskDone
	if err := a.UpdateTaskFenced(ctx, 0, done); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("deposed owner's task update: %v, want ErrConflict", err)
	}
	if err := b.PutResultsFenced(ctx, id, fb, []model.Result{res(2, "B")}); err != nil {
		t.Fatal(err)
	}
	failed := task
	failed.Status = model.TaskFailed
	if err := b.UpdateTaskFenced(ctx, fb, failed); err != nil {
		t.Fatal(err)
	}
	rs, err := a.Results(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A", "B", "B"}
	if len(rs) != len(want) {
		t.Fatalf("%d results (the fence among them?): %+v", len(rs), rs)
	}
	for i, r := range rs {
		if r.Message != want[i] {
			t.Fatalf("result %d stored by %q, want %q", i, r.Message, want[i])
		}
	}
	got, _, err := a.Task(ctx, id)
	if err != nil || got.Status != model.TaskFailed {
		t.Fatalf("task %s %v: the deposed owner's update won", got.Status, err)
	}
	// A third owner fences again: B is deposed in turn.
	fa, err := a.Fence(ctx, id)
	if err != nil || fa <= fb {
		t.Fatalf("second fence %d after %d: %v", fa, fb, err)
	}
	if err := b.PutResultsFenced(ctx, id, fb, []model.Result{res(0, "B")}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("B after A's fence: %v", err)
	}
	if err := a.deleteTask(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n, err := a.fence(ctx, id); err != nil || n != 0 {
		t.Fatalf("fence after the task was deleted: %d %v", n, err)
	}
}

// TestFenceMany: results of several tasks stored in one call each meet
// their own task's fence: a task fenced by another store has its results
// refused (model.ErrConflict, nothing of it written), the others' are
// stored, and a set naming a result of another task is refused alone.
func TestFenceMany(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	tgs := targets(2)
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = model.FormatTaskID(time.Now(), uint64(10+i))
		task := model.Task{ID: ids[i], Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning, Created: time.Now()}
		if err := a.PutTask(ctx, task, tgs); err != nil {
			t.Fatal(err)
		}
	}
	res := func(id string, i int) model.Result {
		return model.Result{TaskID: id, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess, Message: "A"}
	}
	if _, err := b.Fence(ctx, ids[1]); err != nil { // ids[1] taken over by B
		t.Fatal(err)
	}
	errs := a.PutResultsFencedMany(ctx, []engine.FencedResults{
		{TaskID: ids[0], Results: refs([]model.Result{res(ids[0], 0), res(ids[0], 1)})},
		{TaskID: ids[1], Results: refs([]model.Result{res(ids[1], 0)})},
		{TaskID: ids[2], Results: refs([]model.Result{res(ids[0], 0)})}, // another task's result
	})
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], model.ErrConflict) || errs[2] == nil || errors.Is(errs[2], model.ErrConflict) {
		t.Fatalf("errors %v: want nil, a conflict, a refusal", errs)
	}
	for i, want := range []int{2, 0, 0} {
		rs, err := a.Results(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != want {
			t.Fatalf("task %d: %d results stored, want %d: %+v", i, len(rs), want, rs)
		}
	}
}

// TestFenceTrustedOnlyFresh: a task update trusts the fence read of a
// results write only within fenceFresh; past it the update reads the
// fence again, and a deposed owner's update is refused though its last
// results write found the fence its own.
func TestFenceTrustedOnlyFresh(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	tgs := targets(1)
	id := model.FormatTaskID(time.Now(), 9)
	task := model.Task{ID: id, Op: model.OpStatus, Targets: 1, Status: model.TaskRunning, Created: time.Now()}
	if err := a.PutTask(ctx, task, tgs); err != nil {
		t.Fatal(err)
	}
	r := model.Result{TaskID: id, Host: tgs[0].Host, ProcKey: tgs[0].ProcKey, State: model.StateSuccess}
	if err := a.PutResultsFenced(ctx, id, 0, []model.Result{r}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Fence(ctx, id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fenceFresh + 10*time.Millisecond)
	done := task
	done.Status = model.TaskDone
	if err := a.UpdateTaskFenced(ctx, 0, done); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("deposed owner's update past fenceFresh: %v, want ErrConflict", err)
	}
}
