package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// failStatuses is a memory store whose status writes fail while fail is
// set.
type failStatuses struct {
	*store.Memory
	fail atomic.Bool
}

func (s *failStatuses) PutProcStatus(ctx context.Context, h model.Host, st model.ProcStatus) error {
	if s.fail.Load() {
		return errors.New("store down")
	}
	return s.Memory.PutProcStatus(ctx, h, st)
}

func (s *failStatuses) KeepProcStatus(ctx context.Context, h model.Host, st *model.ProcStatus) error {
	if s.fail.Load() {
		return errors.New("store down")
	}
	return s.Memory.KeepProcStatus(ctx, h, st)
}

// TestStatusStoredAfterFailedWrite: a status whose write failed is written
// with the next report of it, though that report says the same (only a
// change, or one 5 minutes old, is stored otherwise).
func TestStatusStoredAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	st := &failStatuses{Memory: store.NewMemory()}
	p := proc("ns", "app", nil)
	h := hostN(0)
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h}}); err != nil {
		t.Fatal(err)
	}
	f := newFake(1)
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	status := backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}}
	st.fail.Store(true)
	operate(t, e, status) // complete: its status write was tried, and failed
	st.fail.Store(false)
	operate(t, e, status)
	all, err := st.Memory.ProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := all[h]; len(got) != 1 || got[0].PID != 42 {
		t.Fatalf("stored statuses of %s: %+v, want the one reported (pid 42)", h, got)
	}
}

// keptStatuses is a memory store that records the statuses it is handed
// by address (KeepProcStatus) and counts those it is handed as copies.
type keptStatuses struct {
	*store.Memory
	mu     sync.Mutex
	kept   []*model.ProcStatus
	copied atomic.Int32
}

func (s *keptStatuses) PutProcStatus(ctx context.Context, h model.Host, st model.ProcStatus) error {
	s.copied.Add(1)
	return s.Memory.PutProcStatus(ctx, h, st)
}

func (s *keptStatuses) KeepProcStatus(ctx context.Context, h model.Host, st *model.ProcStatus) error {
	s.mu.Lock()
	s.kept = append(s.kept, st)
	s.mu.Unlock()
	return s.Memory.KeepProcStatus(ctx, h, st)
}

// TestStatusKeptNotCopied: a store that keeps statuses by address
// (engine.StatusKeeper, the memory store) is handed the engine's own
// status, the one a status op's result shares, not a copy of it: the
// memory store's copy of every status was the embedded engine's second.
func TestStatusKeptNotCopied(t *testing.T) {
	ctx := context.Background()
	st := &keptStatuses{Memory: store.NewMemory()}
	task, hosts := statusOpOn(t, st)
	if n := st.copied.Load(); n != 0 {
		t.Fatalf("%d statuses handed to the store as copies", n)
	}
	rs, err := st.Memory.Results(ctx, task.ID) // stored complete: by the time the watch ends
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.kept) != len(hosts) || len(rs) != len(hosts) {
		t.Fatalf("%d statuses kept, %d results, want %d", len(st.kept), len(rs), len(hosts))
	}
	for _, r := range rs {
		if r.Status == nil || !slices.Contains(st.kept, r.Status) {
			t.Fatalf("result of %s: status %p is not one the store keeps", r.Host, r.Status)
		}
	}
}

// statusOpOn runs a status op over three fake hosts on an engine over st
// (a memory store underneath, the process put in it first): the task,
// complete and stored, and its hosts.
func statusOpOn(t *testing.T, st engine.Store) (model.Task, []model.Host) {
	t.Helper()
	ctx := context.Background()
	f := newFake(3)
	var hosts []model.Host
	for _, h := range f.hosts {
		hosts = append(hosts, h.Host)
	}
	if err := st.PutProcess(ctx, model.ProcessDef{Process: proc("ns", "app", nil), Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	task, _ := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	return task, hosts
}

// keptTasks is a memory store that records the targets it is handed by
// reference (KeepTask) and counts the tasks it is handed to copy.
type keptTasks struct {
	*store.Memory
	mu     sync.Mutex
	kept   [][]model.Target
	copied atomic.Int32
}

func (s *keptTasks) PutTask(ctx context.Context, t model.Task, targets []model.Target) error {
	s.copied.Add(1)
	return s.Memory.PutTask(ctx, t, targets)
}

func (s *keptTasks) KeepTask(ctx context.Context, t model.Task, targets []model.Target) error {
	s.mu.Lock()
	s.kept = append(s.kept, targets)
	s.mu.Unlock()
	return s.Memory.KeepTask(ctx, t, targets)
}

// TestTaskTargetsKeptNotCopied: a store that keeps a task's targets by
// reference (engine.TaskKeeper, the memory store) is handed them to keep,
// not to copy (the memory store's copy was 12 MB of an op over 228,000
// targets), and they are the task's targets, unchanged by the run.
func TestTaskTargetsKeptNotCopied(t *testing.T) {
	ctx := context.Background()
	st := &keptTasks{Memory: store.NewMemory()}
	task, hosts := statusOpOn(t, st)
	if n := st.copied.Load(); n != 0 {
		t.Fatalf("%d tasks handed to the store to copy", n)
	}
	st.mu.Lock()
	kept := st.kept
	st.mu.Unlock()
	if len(kept) != 1 || len(kept[0]) != len(hosts) {
		t.Fatalf("%d target lists kept, want 1 of %d targets", len(kept), len(hosts))
	}
	_, targets, err := st.Memory.Task(ctx, task.ID)
	if err != nil || !slices.Equal(targets, kept[0]) {
		t.Fatalf("stored targets %+v (%v), want those kept %+v", targets, err, kept[0])
	}
	for i, tg := range kept[0] {
		if tg.ProcKey != "ns:app" || !slices.Contains(hosts, tg.Host) {
			t.Fatalf("target %d kept as %+v", i, tg)
		}
	}
}

// writingStore is a memory store seen only as an engine.Store: it writes
// each status (no StatusKeeper, nor any other optional port), and counts
// the statuses and results written.
type writingStore struct {
	engine.Store
	statuses, results atomic.Int32
}

func (s *writingStore) PutProcStatus(ctx context.Context, h model.Host, st model.ProcStatus) error {
	s.statuses.Add(1)
	return s.Store.PutProcStatus(ctx, h, st)
}

func (s *writingStore) PutResult(ctx context.Context, r model.Result) error {
	s.results.Add(1)
	return s.Store.PutResult(ctx, r)
}

// host1Waits is a fake's reply: host 1 answers once release is closed,
// every host with a running status of pid.
func host1Waits(release <-chan struct{}, pid int) func(context.Context, model.Host, model.AgentRequest) (model.AgentReply, error) {
	return func(ctx context.Context, h model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		if h == hostN(1) {
			select {
			case <-release:
			case <-ctx.Done():
				return model.AgentReply{}, ctx.Err()
			}
		}
		return model.AgentReply{Code: 0, Message: "success", Status: &model.ProcStatus{State: model.ProcRunning, PID: pid, Hosted: true}}, nil
	}
}

// TestStatusesHeldBehindRuns: a store that writes statuses is handed them
// behind the runs in flight: a result of a run still in flight is stored
// while the status it reported waits; the statuses are stored once the
// run ends, and, with a run still in flight, once the oldest has waited
// the hold (5 s, by the engine's clock).
func TestStatusesHeldBehindRuns(t *testing.T) {
	ctx := context.Background()
	st := &writingStore{Store: store.NewMemory()}
	p := proc("ns", "app", nil)
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{hostN(0), hostN(1)}}); err != nil {
		t.Fatal(err)
	}
	// The engine's clock moves only when the test says: on a loaded
	// machine, the hold never ends by itself before the test looks.
	start := time.Now()
	var ahead atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(ahead.Load())) }
	release := make(chan struct{})
	f := newFake(2)
	f.reply = host1Waits(release, 42)
	e := engine.New(testCfg(), f, f, st, engine.WithClock(clock))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	status := backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns", Name: "app"}}

	// Host 0 answers, host 1 does not yet: host 0's result is stored,
	// its status is not (a writer storing in the order queued stored
	// the status first).
	task, err := e.Operate(ctx, status)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "host 0's result stored", time.Minute, func() bool { return st.results.Load() == 1 })
	if n := st.statuses.Load(); n != 0 {
		t.Fatalf("%d statuses stored with a run in flight, before the hold; want them held", n)
	}
	// The run ends: both statuses are stored.
	close(release)
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, ch)
	waitUntil(t, "both statuses stored once no run is in flight", time.Minute, func() bool { return st.statuses.Load() == 2 })
	// The batch that stored them counts in the backlog until the writer
	// takes again: waited for, not read at once.
	waitUntil(t, "an empty backlog once every status is stored", time.Minute, func() bool { _, writes := e.Backlog(); return writes == 0 })

	// A run that stays in flight: its statuses are stored once the
	// oldest has waited the hold.
	release = make(chan struct{})
	defer close(release)
	f.reply = host1Waits(release, 43)
	if _, err := e.Operate(ctx, status); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "host 0's second result stored", time.Minute, func() bool { return st.results.Load() == 3 })
	waitUntil(t, "a backlog of the one status held", time.Minute, func() bool { _, writes := e.Backlog(); return writes == 1 })
	if n := st.statuses.Load(); n != 2 {
		t.Fatalf("%d statuses stored with the second run in flight, before the hold; want 2 (the first run's)", n)
	}
	ahead.Store(int64(5 * time.Second))
	waitUntil(t, "host 0's new status stored once held 5 s, its run still in flight", time.Minute, func() bool { return st.statuses.Load() == 3 })
	all, err := st.ProcStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := all[hostN(0)]; len(got) != 1 || got[0].PID != 43 {
		t.Fatalf("stored status of host 0: %+v, want pid 43", got)
	}
}
