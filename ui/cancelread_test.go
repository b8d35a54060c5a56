package ui

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

// taskReads is a backend that counts whole task reads (Task, results
// and all) apart from reads without results (TaskSummary) and result
// by result (TaskResults).
type taskReads struct {
	backend.Backend
	whole, summary atomic.Int64
}

func (b *taskReads) Task(ctx context.Context, id string) (backend.TaskView, error) {
	b.whole.Add(1)
	return b.Backend.Task(ctx, id)
}

func (b *taskReads) TaskSummary(ctx context.Context, id string) (backend.TaskView, error) {
	b.summary.Add(1)
	return backend.TaskSummary(ctx, b.Backend, id)
}

func (b *taskReads) TaskResults(ctx context.Context, id string, fn func(*model.Result)) (backend.TaskView, error) {
	return backend.TaskResults(ctx, b.Backend, id, fn)
}

// TestCancelReadsTaskWithoutResults: the watch's cancel reads the task
// back without its results (they come through Watch), as its Init does:
// read whole, a task over 100,000 hosts was ~218,000 results at once.
// The notice still counts the hosts running, and every row still ends in
// its state on the engine.
func TestCancelReadsTaskWithoutResults(t *testing.T) {
	sc := quietSim(30)
	sc.LatencyMedian = config.Duration(3 * time.Second)
	sc.LatencyP99 = config.Duration(5 * time.Second)
	ec := config.Default().Engine
	ec.Concurrency = 2 // two hosts in flight, the rest wait their turn
	e, _ := simBackendEngine(t, sc, ec)
	be := &taskReads{Backend: e}
	d := newDriver(t, be, Options{Guard: time.Nanosecond}, 120, 40)
	openHosts(t, d, "app=nginx")
	w := statusWatch(t, d)
	d.until("streaming", func() bool { return w.streaming })
	whole, summary := be.whole.Load(), be.summary.Load()
	d.keys("x")
	d.until("dialog", func() bool { return d.m.dialog != nil })
	d.keys("y")
	d.until("cancel answered", func() bool { return w.cancelAsked })
	if be.whole.Load() != whole || be.summary.Load() <= summary {
		t.Fatalf("the cancel read the task whole %d times, without results %d times", be.whole.Load()-whole, be.summary.Load()-summary)
	}
	if !strings.Contains(d.m.flash, "not-yet-sent hosts cancelled") {
		t.Fatalf("notice %q", d.m.flash)
	}
	d.until("task final", func() bool { return taskFinal(w.task.Status) && !w.streaming })
	view, err := e.Task(context.Background(), w.task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w.counts != view.Task.Counts || w.res.len() != len(view.Results) {
		t.Fatalf("console counts %+v over %d rows, engine %+v over %d", w.counts, w.res.len(), view.Task.Counts, len(view.Results))
	}
	for _, r := range view.Results {
		if i, ok := w.res.find(r.Host, r.ProcKey); !ok || w.res.state(i) != r.State {
			t.Fatalf("%s %s: row %v, want %s", r.Host, r.ProcKey, ok, r.State)
		}
	}
}
