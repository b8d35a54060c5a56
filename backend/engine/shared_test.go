package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store/jsstore"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

// sharedNATS starts one embedded NATS server with JetStream (127.0.0.1).
func sharedNATS(t *testing.T) *natsembed.Embedded {
	t.Helper()
	c := config.Default().NATS
	c.Listen = "127.0.0.1:-1"
	c.StoreDir = t.TempDir()
	emb, err := natsembed.StartEmbedded(c, natsembed.EmbeddedOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	return emb
}

// sharedStore opens a JetStream store of its own on emb, as each server
// of a cluster does.
func sharedStore(t *testing.T, emb *natsembed.Embedded) *jsstore.Store {
	t.Helper()
	nc, err := emb.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	so := jsstore.OptionsFromConfig(config.Default())
	so.Memory = true
	st, err := jsstore.New(ctx, js, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// slowAgents answers every host after delay and counts the dispatches
// per host.
func slowAgents(n int, delay time.Duration) (*fakeAgents, func() map[model.Host]int) {
	f := newFake(n)
	var mu sync.Mutex
	calls := map[model.Host]int{}
	f.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		mu.Lock()
		calls[h]++
		mu.Unlock()
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return model.AgentReply{}, ctx.Err()
		}
		return model.AgentReply{Code: model.CodeSuccess, Status: &model.ProcStatus{State: model.ProcRunning, PID: 7}}, nil
	}
	return f, func() map[model.Host]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[model.Host]int, len(calls))
		for h, c := range calls {
			out[h] = c
		}
		return out
	}
}

// watched collects a watch channel in the background.
type watched struct {
	mu   sync.Mutex
	got  []model.Result
	done chan struct{}
}

func watchAll(ch <-chan model.Result) *watched {
	w := &watched{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for r := range ch {
			w.mu.Lock()
			w.got = append(w.got, r)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watched) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

// startAll starts every engine and closes it when the test ends.
func startAll(t *testing.T, es ...*engine.Engine) {
	t.Helper()
	for _, e := range es {
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
	}
}

// operateOnAll registers ns:app on every host of f through e and starts a
// status task on it.
func operateOnAll(t *testing.T, e *engine.Engine, f *fakeAgents) model.Task {
	t.Helper()
	ctx := context.Background()
	var all []model.Host
	for _, h := range f.hosts {
		all = append(all, h.Host)
	}
	if err := e.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: all}}); err != nil {
		t.Fatal(err)
	}
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharedStoreTakeover: two engines on one JetStream store. A runs a
// task; B follows it live. A stops mid-task (crashing: its store goes
// first and it lets nothing go; or closing gracefully: it lets its lease
// go). B, running all along, takes the task over, dispatches only what A
// had not finished, and B's watcher sees every target's stored result
// once, in Seq order.
func TestSharedStoreTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	for _, tc := range []struct {
		name  string
		crash bool
	}{{"crash", true}, {"graceful", false}} {
		t.Run(tc.name, func(t *testing.T) {
			emb := sharedNATS(t)
			cfg := testCfg()
			cfg.Concurrency = 4
			cfg.LeaseTTL = config.Duration(time.Second)
			const hosts = 60
			// About 2 s of work at concurrency 4: A stops after 10 results,
			// so a loaded machine still stops it mid-task.
			fa, callsA := slowAgents(hosts, 150*time.Millisecond)
			fb, callsB := slowAgents(hosts, 150*time.Millisecond)
			stA, stB := sharedStore(t, emb), sharedStore(t, emb)
			ctx := context.Background()
			a := engine.New(cfg, fa, fa, stA, engine.WithOwner("A"))
			b := engine.New(cfg, fb, fb, stB, engine.WithOwner("B"))
			startAll(t, a, b)
			task := operateOnAll(t, a, fa)
			ch, err := b.Watch(ctx, task.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			w := watchAll(ch)
			waitUntil(t, "results of A live at B", 20*time.Second, func() bool { return w.len() >= 10 })
			if ts, err := b.Tasks(ctx, 1); err != nil || len(ts) != 1 || ts[0].Counts.Final() < 10 || ts[0].Status != model.TaskRunning {
				t.Fatalf("B lists A's task as %+v (%v)", ts, err)
			}

			if tc.crash {
				_ = stA.Close()
				_ = a.Close()
			} else {
				_ = a.Close()
				_ = stA.Close()
			}
			before, err := b.Task(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			finalByA := map[model.Host]model.Result{}
			for _, r := range before.Results {
				if r.State.Final() {
					finalByA[r.Host] = r
				}
			}
			if len(finalByA) == hosts {
				t.Fatal("A finished the task before it stopped; make it slower")
			}

			select {
			case <-w.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("B's watcher did not end: %d/%d results", w.len(), hosts)
			}
			v, err := b.Task(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if v.Task.Status != model.TaskDone || countFinal(v.Results) != hosts {
				t.Fatalf("after takeover: %s, %d/%d final", v.Task.Status, countFinal(v.Results), hosts)
			}
			stored := map[model.Host]model.Result{}
			for _, r := range v.Results {
				stored[r.Host] = r
			}
			for h, r := range finalByA {
				if s := stored[h]; s.Seq != r.Seq || !s.Finished.Equal(r.Finished) {
					t.Errorf("%s: A's result was redone: %+v -> %+v", h, r, s)
				}
			}
			for h := range callsB() {
				if _, ok := finalByA[h]; ok {
					t.Errorf("%s: finished by A, dispatched again by B", h)
				}
			}
			if n := len(callsA()) + len(callsB()); n < hosts {
				t.Errorf("%d hosts dispatched in all, want %d", n, hosts)
			}
			if len(w.got) != hosts {
				t.Fatalf("B's watcher got %d results for %d targets", len(w.got), hosts)
			}
			seen := map[model.Host]bool{}
			for i, r := range w.got {
				if seen[r.Host] {
					t.Fatalf("B's watcher got %s twice", r.Host)
				}
				seen[r.Host] = true
				if s := stored[r.Host]; s.Seq != r.Seq {
					t.Fatalf("B's watcher got %s seq %d, stored seq %d", r.Host, r.Seq, s.Seq)
				}
				if i > 0 && r.Seq <= w.got[i-1].Seq {
					t.Fatalf("B's watcher: seq %d after %d", r.Seq, w.got[i-1].Seq)
				}
			}
			t.Logf("%d targets: %d by A, %d by B", hosts, len(finalByA), len(callsB()))
		})
	}
}

// TestSharedStoreNoTakeoverWhileRunning: a task that lasts many lease TTLs
// on a healthy engine is never taken over by the other: each host is
// dispatched once, by A only, and B's live watcher sees every result.
func TestSharedStoreNoTakeoverWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.Concurrency = 2
	cfg.LeaseTTL = config.Duration(600 * time.Millisecond)
	const hosts = 40
	fa, callsA := slowAgents(hosts, 80*time.Millisecond) // ~1.6 s: several TTLs
	fb, callsB := slowAgents(hosts, 80*time.Millisecond)
	ctx := context.Background()
	a := engine.New(cfg, fa, fa, sharedStore(t, emb), engine.WithOwner("A"))
	b := engine.New(cfg, fb, fb, sharedStore(t, emb), engine.WithOwner("B"))
	startAll(t, a, b)
	task := operateOnAll(t, a, fa)
	ch, err := b.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := watchAll(ch)
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("B's watcher did not end: %d/%d", w.len(), hosts)
	}
	if len(w.got) != hosts {
		t.Fatalf("B's watcher got %d results for %d targets", len(w.got), hosts)
	}
	if n := len(callsB()); n != 0 {
		t.Fatalf("B dispatched %d hosts of a task A was running", n)
	}
	for h, n := range callsA() {
		if n != 1 {
			t.Fatalf("%s dispatched %d times", h, n)
		}
	}
	v, err := b.Task(ctx, task.ID)
	if err != nil || v.Task.Status != model.TaskDone {
		t.Fatalf("task at B: %+v %v", v.Task, err)
	}
}

func countFinal(rs []model.Result) int {
	n := 0
	for _, r := range rs {
		if r.State.Final() {
			n++
		}
	}
	return n
}

// TestSharedStoreRestartSameOwner: an engine that stops mid-task without
// letting its lease go and starts again under the same owner id resumes
// the task in Start, without waiting for the lease to expire.
func TestSharedStoreRestartSameOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.Concurrency = 2
	cfg.LeaseTTL = config.Duration(time.Hour) // expiry never helps here
	const hosts = 30
	f, _ := slowAgents(hosts, 40*time.Millisecond)
	ctx := context.Background()
	st1 := sharedStore(t, emb)
	e1 := engine.New(cfg, f, f, st1, engine.WithOwner("S"))
	if err := e1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	task := operateOnAll(t, e1, f)
	waitUntil(t, "some results", 20*time.Second, func() bool {
		v, err := e1.Task(ctx, task.ID)
		return err == nil && v.Task.Counts.Final() >= 3
	})
	_ = st1.Close() // crash: nothing let go
	_ = e1.Close()

	e2 := engine.New(cfg, f, f, sharedStore(t, emb), engine.WithOwner("S"))
	startAll(t, e2)
	ch, err := e2.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, ch)
	v, err := e2.Task(ctx, task.ID)
	if err != nil || v.Task.Status != model.TaskDone || countFinal(v.Results) != hosts || len(got) != hosts {
		t.Fatalf("after restart: %+v, %d watched (%v)", v.Task, len(got), err)
	}
}

// pausedRenewals is a store whose engine believes it renews its leases
// but does not: a server paused or cut off from the store's lease keys
// that has not noticed yet.
type pausedRenewals struct{ *jsstore.Store }

func (pausedRenewals) RenewLease(context.Context, string, string, time.Duration) error { return nil }

// TestSharedStoreFencing: A creates a task and stops renewing its lease
// without knowing (pausedRenewals) while its hosts are slow; B takes the
// task over, runs it and stores it done. Then A's hosts answer: A's
// results and its task end are refused by the fence, A abandons the run,
// and what B stored stays, every result and the task. (A may dispatch a
// few more targets before its refused writes come back: their op ids are
// B's, so a host answers them from its ledger and runs nothing again.)
func TestSharedStoreFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.Concurrency = 2
	cfg.LeaseTTL = config.Duration(500 * time.Millisecond)
	const hosts = 6
	release := make(chan struct{})
	fa := newFake(hosts)
	var callsA atomic.Int64
	fa.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		callsA.Add(1)
		<-release // A's hosts answer only once B is through
		return model.AgentReply{Code: model.CodeSuccess, Message: "by A", Status: &model.ProcStatus{State: model.ProcRunning, PID: 1}}, nil
	}
	fb := newFake(hosts)
	fb.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		return model.AgentReply{Code: model.CodeSuccess, Message: "by B", Status: &model.ProcStatus{State: model.ProcRunning, PID: 2}}, nil
	}
	ctx := context.Background()
	a := engine.New(cfg, fa, fa, pausedRenewals{sharedStore(t, emb)}, engine.WithOwner("A"))
	b := engine.New(cfg, fb, fb, sharedStore(t, emb), engine.WithOwner("B"))
	startAll(t, a, b)
	task := operateOnAll(t, a, fa)
	waitUntil(t, "A dispatching", 20*time.Second, func() bool { return callsA.Load() == int64(cfg.Concurrency) })
	waitUntil(t, "B took the task over and finished it", 30*time.Second, func() bool {
		v, err := b.Task(ctx, task.ID)
		return err == nil && v.Task.Status == model.TaskDone
	})
	close(release)
	// A stores nothing more: its results are refused, it abandons the run.
	waitUntil(t, "A abandoned the run", 20*time.Second, func() bool {
		info, err := a.Info(ctx)
		return err == nil && info.Running == 0
	})
	// Read from the store (not from B's memory of the task, which says
	// done before B has stored it so: its results, then the task, are
	// written after; read at once, the store could still hold the task
	// as A created it).
	st := sharedStore(t, emb)
	var stored model.Task
	var rs []model.Result
	waitUntil(t, "B's end stored", 30*time.Second, func() bool {
		var err error
		if stored, _, err = st.Task(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		if rs, err = st.Results(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		return stored.Status.Final()
	})
	if stored.Status != model.TaskDone || countFinal(rs) != hosts || stored.Counts.Success != hosts {
		t.Fatalf("stored task %s %+v with %d/%d final results", stored.Status, stored.Counts, countFinal(rs), hosts)
	}
	for _, r := range rs {
		if r.Message != "by B" {
			t.Fatalf("%s: the deposed owner's result was stored: %q", r.Host, r.Message)
		}
	}
}

// gatedRenewal is a store whose first lease renewal stops before it is
// made, says so on entered, goes on once proceed is closed and says it
// returned on returned; later renewals pass. It counts the tasks read (a
// takeover reads its task).
type gatedRenewal struct {
	*jsstore.Store
	once                       sync.Once
	entered, proceed, returned chan struct{}
	reads                      atomic.Int64
}

func (g *gatedRenewal) RenewLease(ctx context.Context, taskID, owner string, ttl time.Duration) error {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.Store.RenewLease(ctx, taskID, owner, ttl)
	}
	close(g.entered)
	<-g.proceed
	defer close(g.returned)
	// Made however long it was held (the renewal's own bound is a third
	// of the TTL): a renewal that reached the store late.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	return g.Store.RenewLease(ctx, taskID, owner, ttl)
}

func (g *gatedRenewal) Task(ctx context.Context, id string) (model.Task, []model.Target, error) {
	g.reads.Add(1)
	return g.Store.Task(ctx, id)
}

// TestRenewalKeepsNoLeaseOfAFinishedTask: a task finishes while its
// lease is being renewed (the renewal may have begun while the task was
// being created). The renewal does not leave the lease created again
// after the task let it go (a renewal finding no lease acquires it): the
// lease goes, and no lease scan takes the finished task over. (Before,
// the lease came back in the engine's name and its next scan took the
// task over, reading it to find it complete: under an operate_proc load,
// hundreds of reads of targets, each a JetStream consumer.)
func TestRenewalKeepsNoLeaseOfAFinishedTask(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.LeaseTTL = config.Duration(300 * time.Millisecond) // a renewal and a scan every 100 ms
	st := sharedStore(t, emb)
	g := &gatedRenewal{Store: st, entered: make(chan struct{}), proceed: make(chan struct{}), returned: make(chan struct{})}
	f := newFake(1)
	f.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		<-g.entered // the host answers while the renewal is under way
		return model.AgentReply{Code: model.CodeSuccess, Status: &model.ProcStatus{State: model.ProcRunning, PID: 1}}, nil
	}
	e := engine.New(cfg, f, f, g, engine.WithOwner("A"))
	startAll(t, e)
	task := operateOnAll(t, e, f)
	ctx := context.Background()
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The task's end waits for the renewal, or goes past it.
	time.AfterFunc(200*time.Millisecond, func() { close(g.proceed) })
	if got := collect(t, ch); len(got) != 1 {
		t.Fatalf("%d results, want 1", len(got))
	}
	select {
	case <-g.returned:
	case <-time.After(20 * time.Second):
		t.Fatal("the renewal did not return in 20 s")
	}
	waitUntil(t, "the finished task's lease gone", 20*time.Second, func() bool {
		ls, err := st.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.TaskID == task.ID {
				return false
			}
		}
		return true
	})
	if n := g.reads.Load(); n != 0 {
		t.Fatalf("the finished task was read %d times (taken over: its lease was created again)", n)
	}
}

// failedCreation is a gatedRenewal whose task writes fail once the first
// renewal is under way: a task whose creation fails while its claimed
// lease is being renewed.
type failedCreation struct{ *gatedRenewal }

func (f failedCreation) PutTask(ctx context.Context, t model.Task, targets []model.Target) error {
	select {
	case <-f.entered:
	case <-time.After(20 * time.Second):
		return errors.New("test: no renewal entered in 20 s")
	}
	return errors.New("test: the task is not stored")
}

// CreateTask fails as PutTask does: the engine creates its tasks through
// it on a JetStream store (engine.TaskCreator).
func (f failedCreation) CreateTask(ctx context.Context, t model.Task, targets []model.Target, _ string, _ time.Duration, _ model.AuditEntry) error {
	return f.PutTask(ctx, t, targets)
}

// TestRenewalKeepsNoLeaseOfAFailedCreation: a task's creation fails (its
// store write) while the lease it claimed is being renewed. The renewal
// does not leave the lease created again after the creation let it go:
// the lease goes, and no lease scan takes the task that never was over.
// (Before, the run-less renewal found no run to look at again, the lease
// came back in the engine's name and its next scan took it over, reading
// the task to find it gone; with the engine gone, another waited the
// lease's TTL to do so.)
func TestRenewalKeepsNoLeaseOfAFailedCreation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.LeaseTTL = config.Duration(300 * time.Millisecond) // a renewal and a scan every 100 ms
	st := sharedStore(t, emb)
	g := &gatedRenewal{Store: st, entered: make(chan struct{}), proceed: make(chan struct{}), returned: make(chan struct{})}
	f := newFake(1)
	e := engine.New(cfg, f, f, failedCreation{g}, engine.WithOwner("A"))
	startAll(t, e)
	ctx := context.Background()
	if err := e.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: []model.Host{f.hosts[0].Host}}}); err != nil {
		t.Fatal(err)
	}
	// The creation's release waits for the renewal, or goes past it.
	time.AfterFunc(200*time.Millisecond, func() { close(g.proceed) })
	if _, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}}); err == nil {
		t.Fatal("the task was created, though its write failed")
	}
	select {
	case <-g.returned:
	case <-time.After(20 * time.Second):
		t.Fatal("the renewal did not return in 20 s")
	}
	waitUntil(t, "no lease left", 20*time.Second, func() bool {
		ls, err := st.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ls) == 0
	})
	// A lease created again by the renewal (returned before the wait) goes
	// only when a scan took it over, reading the task first.
	if n := g.reads.Load(); n != 0 {
		t.Fatalf("the task that never was was read %d times (taken over: its lease was created again)", n)
	}
}
