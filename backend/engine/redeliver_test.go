package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// ackedAgents is fakeAgents whose events come as an AckedEventSource's: the
// test delivers each with an acknowledgement, as the agents' durable
// stream does.
type ackedAgents struct {
	*fakeAgents
	mu  sync.Mutex
	fns []func(model.Event, func(error))
}

func (a *ackedAgents) SubscribeAckedEvents(ctx context.Context, fn func(model.Event, func(error))) {
	a.mu.Lock()
	a.fns = append(a.fns, fn)
	a.mu.Unlock()
}

// deliver hands ev to the engine and waits for its acknowledgement.
func (a *ackedAgents) deliver(t *testing.T, ev model.Event) {
	t.Helper()
	done := make(chan error, 1)
	a.mu.Lock()
	fns := a.fns
	a.mu.Unlock()
	if len(fns) != 1 {
		t.Fatalf("%d acked subscribers, want 1", len(fns))
	}
	fns[0](ev, func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("event not stored: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("event not acknowledged within 30s")
	}
}

// An event stored and applied whose acknowledgement was lost comes again:
// it is stored once (by its id) and applied once: the restart is counted
// once in the last known status and subscribers see it once.
func TestRedeliveredEventAppliedOnce(t *testing.T) {
	ctx := context.Background()
	a := &ackedAgents{fakeAgents: newFake(1)}
	h := a.hosts[0].Host
	st := store.NewMemory()
	e := engine.New(testCfg(), a, a, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if err := e.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: []model.Host{h}}}); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := model.Event{ID: "agent-1", Time: time.Now(), Host: h, ProcKey: "ns:app", Kind: model.EventRestartSuccess, Message: "restarted"}
	a.deliver(t, ev)
	a.deliver(t, ev) // its acknowledgement was lost: delivered again
	other := ev
	other.ID, other.Kind = "agent-2", model.EventRestartFailed
	a.deliver(t, other) // the marker: handled after both

	var got []model.Event
	for len(got) < 2 {
		select {
		case x := <-sub:
			got = append(got, x)
		case <-time.After(30 * time.Second):
			t.Fatalf("subscriber got %d events within 30s, want 2", len(got))
		}
	}
	if got[0].ID != "agent-1" || got[1].ID != "agent-2" {
		t.Fatalf("subscriber got %+v, want agent-1 once then agent-2", got)
	}
	hv, err := e.Hosts(ctx, backend.HostQuery{Namespace: "ns"})
	if err != nil || len(hv) != 1 || len(hv[0].Procs) != 1 {
		t.Fatalf("hosts: %+v %v", hv, err)
	}
	if r := hv[0].Procs[0].Status.Restarts; r != 1 {
		t.Fatalf("restarts in the last known status: %d, want 1 (the redelivery counted again)", r)
	}
	evs, err := st.Events(ctx, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("stored %d events (%v), want 2", len(evs), err)
	}
}
