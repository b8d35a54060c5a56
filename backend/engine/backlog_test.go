package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// TestBacklogCountsUntilStored: Backlog counts every event handed to the
// engine until it is stored, those being stored included, and every
// result and status until it is: a benchmark waits on it for start-up's
// events to be stored, so it must not say 0 while one still waits.
func TestBacklogCountsUntilStored(t *testing.T) {
	f := newFake(50)
	st := &gatedWrites{gatedEvents: gatedEvents{Memory: store.NewMemory(), gate: make(chan struct{})}}
	e := engine.New(testCfg(), f, f, st)
	startAll(t, e)
	if ev, w := e.Backlog(); ev != 0 || w != 0 {
		t.Fatalf("backlog %d events, %d writes before anything: want 0, 0", ev, w)
	}
	const n = 100
	for i := range n {
		f.emit(model.Event{Host: hostN(i), Kind: model.EventAgentOnline, Time: time.Now()})
	}
	// None can be stored while the gate is shut: each is queued or in
	// the batch being stored.
	if ev, _ := e.Backlog(); ev != n {
		t.Fatalf("backlog %d events while none could be stored, want %d", ev, n)
	}
	task := operateOnAll(t, e, f)
	waitUntil(t, "the op's results queued", 20*time.Second, func() bool {
		_, w := e.Backlog()
		return w > 0
	})
	close(st.gate)
	waitUntil(t, "the backlog empty", 60*time.Second, func() bool {
		ev, w := e.Backlog()
		return ev == 0 && w == 0
	})
	if got := st.n.Load(); got != n {
		t.Fatalf("backlog empty with %d of %d events stored", got, n)
	}
	if got := st.results.Load(); got != int64(len(f.hosts)) {
		t.Fatalf("backlog empty with %d of %d results stored", got, len(f.hosts))
	}
	v, err := e.Task(context.Background(), task.ID)
	if err != nil || v.Task.Status != model.TaskDone {
		t.Fatalf("task %+v (%v): want done", v.Task, err)
	}
}

// gatedWrites is gatedEvents whose result writes wait for the same gate
// (and are counted).
type gatedWrites struct {
	gatedEvents
	results atomic.Int64
}

func (g *gatedWrites) PutResult(ctx context.Context, r model.Result) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.State.Final() {
		g.results.Add(1)
	}
	return g.Memory.PutResult(ctx, r)
}

var _ engine.Store = (*gatedWrites)(nil)
