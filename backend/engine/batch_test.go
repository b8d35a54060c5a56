package engine_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// TestBatchedWritesAreDurable: on the JetStream store, results and
// statuses go through the engine's batching writer; once the task is
// complete, a second engine on the same store (as after a restart) finds
// the task complete with every result and every host's last status, and
// a watch of the finished task sends every result once.
func TestBatchedWritesAreDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	f := newFake(3000)
	a := engine.New(testCfg(), f, f, sharedStore(t, emb), engine.WithOwner("A"))
	startAll(t, a)
	task := operateOnAll(t, a, f)
	ctx := context.Background()
	ch, err := a.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := watchAll(ch)
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("task not complete after 60s: %d results", w.len())
	}
	if w.len() != 3000 {
		t.Fatalf("watch sent %d results, want 3000", w.len())
	}

	// Another engine on the store: what it reads was stored.
	b := engine.New(testCfg(), f, f, sharedStore(t, emb), engine.WithOwner("B"))
	startAll(t, b)
	v, err := b.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Task.Status != model.TaskDone || v.Task.Counts.Success != 3000 {
		t.Fatalf("stored task %s %+v, want done with 3000 successes", v.Task.Status, v.Task.Counts)
	}
	for _, r := range v.Results {
		if r.State != model.StateSuccess {
			t.Fatalf("stored result %+v", r)
		}
	}
	hv, err := b.Hosts(ctx, backend.HostQuery{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, h := range hv {
		for _, p := range h.Procs {
			if p.Status.State == model.ProcRunning && p.Status.PID == 42 {
				running++
			}
		}
	}
	if running != 3000 {
		t.Fatalf("%d hosts with a stored running status, want 3000", running)
	}
}

// TestEventStormIsStored: 20,000 events emitted at once (agents coming
// online together) are all queued, stored and fanned out: none dropped.
func TestEventStormIsStored(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	f := newFake(1)
	st := sharedStore(t, emb)
	var logs syncBuffer
	e := engine.New(testCfg(), f, f, st, engine.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	startAll(t, e)
	// More than 65,536 at once (the queue's old fixed size, which dropped
	// the rest): a fleet's agents all coming online after a restart.
	const n = 20000
	for i := range n {
		f.emit(model.Event{Host: hostN(i), Kind: model.EventAgentOnline, Time: time.Now()})
	}
	// The store keeps its last MaxEvents (10,000): the newest is the last emitted.
	waitUntil(t, "the last event stored", 60*time.Second, func() bool {
		evs, err := st.Events(context.Background(), 1)
		return err == nil && len(evs) == 1 && evs[0].Host == hostN(n-1)
	})
	evs, err := st.Events(context.Background(), 0)
	if err != nil || len(evs) != 10000 || evs[0].Host != hostN(n-10000) {
		t.Fatalf("stored %d events (%v), first from %v: want the last 10000 in order", len(evs), err, evs[0].Host)
	}
	if strings.Contains(logs.String(), "event dropped") {
		t.Fatal("events dropped:\n" + logs.String())
	}
}

// TestEventBurstWhileStoreBlocked: 100,000 agents come online while the
// store is stuck (here: every event write waits for a gate); the engine
// queues them all, without blocking the source and without dropping one
// (the old fixed queue of 65,536 dropped the rest), and stores every one
// once the store answers again.
func TestEventBurstWhileStoreBlocked(t *testing.T) {
	f := newFake(1)
	st := &gatedEvents{Memory: store.NewMemory(store.WithKeepEvents(10)), gate: make(chan struct{})}
	var logs syncBuffer
	e := engine.New(testCfg(), f, f, st, engine.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	startAll(t, e)
	const n = 100000
	for i := range n {
		f.emit(model.Event{Host: hostN(i), Kind: model.EventAgentOnline, Time: time.Now()})
	}
	close(st.gate)
	waitUntil(t, "every event stored", 60*time.Second, func() bool { return st.n.Load() == n })
	if strings.Contains(logs.String(), "event dropped") {
		t.Fatal("events dropped")
	}
	evs, err := st.Events(context.Background(), 1)
	if err != nil || len(evs) != 1 || evs[0].Host != hostN(n-1) {
		t.Fatalf("last event %v (%v): want the last emitted, in order", evs, err)
	}
}

// gatedEvents is a memory store whose event writes wait for gate.
type gatedEvents struct {
	*store.Memory
	gate chan struct{}
	n    atomic.Int64
}

func (g *gatedEvents) AppendEvent(ctx context.Context, ev model.Event) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.n.Add(1)
	return g.Memory.AppendEvent(ctx, ev)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
