package server

import (
	"context"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// countingTasks counts Task calls; it holds no run (no TaskHead), as a
// node does for a task past its recent runs: Task reads the store.
type countingTasks struct {
	backend.Backend
	tasks atomic.Int64
}

func (c *countingTasks) Task(ctx context.Context, id string) (backend.TaskView, error) {
	c.tasks.Add(1)
	return c.Backend.Task(ctx, id)
}

// TestTaskWithoutResultsReadsOnce: GET a task with results=false from a
// backend that does not hold its run reads the task once, a rolled one
// too (its roll view is made from its results), and answers the task and
// its roll without results.
func TestTaskWithoutResultsReadsOnce(t *testing.T) {
	e := newEnv(t, openCfg())
	ctx := context.Background()
	cb := &countingTasks{Backend: e.eng}
	srv := New(cb, openCfg(), nil)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
	})
	e2 := &env{t: t, srv: srv, hs: hs, eng: e.eng, fleet: e.fleet}

	for _, roll := range []*model.RolloutSpec{nil, {Batch: "50%"}} {
		task, err := e.eng.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}, Rollout: roll})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := e.eng.Watch(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range ch { // to the task's end
		}
		before := cb.tasks.Load()
		r := e2.do("GET", "/api/v1/tasks/"+url.PathEscape(task.ID)+"?results=false", nil, nil)
		if !r.Result {
			t.Fatalf("rollout %v: %s", roll, r.raw)
		}
		tv := decode[backend.TaskView](t, r.Data)
		if tv.Task.ID != task.ID || tv.Results == nil || len(tv.Results) != 0 || (roll != nil) != (tv.Roll != nil) {
			t.Fatalf("rollout %v: %s, want the task (and its roll) without results", roll, r.raw)
		}
		if n := cb.tasks.Load() - before; n != 1 {
			t.Fatalf("rollout %v: the task was read %d times, want once", roll, n)
		}
	}
}
