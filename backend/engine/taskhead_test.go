package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// readCounting counts the store reads of a task's targets and results.
type readCounting struct {
	*store.Memory
	tasks, results atomic.Int64
}

func (c *readCounting) Task(ctx context.Context, id string) (model.Task, []model.Target, error) {
	c.tasks.Add(1)
	return c.Memory.Task(ctx, id)
}

func (c *readCounting) Results(ctx context.Context, id string) ([]model.Result, error) {
	c.results.Add(1)
	return c.Memory.Results(ctx, id)
}

// TestTaskHeadOfStoredCompleteTask: an engine that does not hold a task's
// run (a fan-out too big for its recent runs, or one another engine ran)
// answers TaskHead for a task stored complete from its record, as Task
// would, without reading its targets or results; a task stored still
// running is not answered (Task counts it from its results), and an
// unknown one is an error.
func TestTaskHeadOfStoredCompleteTask(t *testing.T) {
	ctx := context.Background()
	f := newFake(4)
	e, st := start(t, f, testCfg())
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range ch { // to the task's end: stored complete
	}
	want, err := e.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}

	cs := &readCounting{Memory: st}
	e2 := engine.New(testCfg(), f, f, cs)
	if err := e2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.Close() })
	got, ok, err := e2.TaskHead(ctx, task.ID)
	if err != nil || !ok {
		t.Fatalf("TaskHead of a task stored complete: ok %v, err %v", ok, err)
	}
	if got.ID != task.ID || got.Status != want.Task.Status || !got.Status.Final() || got.Counts != want.Task.Counts ||
		got.Targets != want.Task.Targets || !got.Finished.Equal(want.Task.Finished) {
		t.Fatalf("TaskHead %+v, Task %+v", got, want.Task)
	}
	if n, m := cs.tasks.Load(), cs.results.Load(); n != 0 || m != 0 {
		t.Fatalf("TaskHead read the task's targets %d and results %d times, want neither", n, m)
	}

	// Stored, not complete (run by another engine, or by none yet).
	running := model.Task{ID: "t-running", Op: model.OpStatus, Targets: 1, Status: model.TaskRunning, Counts: model.Counts{Running: 1}}
	if err := st.PutTask(ctx, running, []model.Target{{Host: f.hosts[0].Host, ProcKey: "ns:app"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e2.TaskHead(ctx, running.ID); ok || err != nil {
		t.Fatalf("TaskHead of a task stored running: ok %v, err %v; want not answered", ok, err)
	}
	if _, _, err := e2.TaskHead(ctx, "no-such-task"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("TaskHead of an unknown task: %v, want not found", err)
	}
}
