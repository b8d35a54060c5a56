package jsstore

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"gseproc/backend/engine"
	"gseproc/model"
)

func leaseOf(t *testing.T, s *Store, id string) (engine.Lease, bool) {
	t.Helper()
	ls, err := s.Leases(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.TaskID == id {
			return l, true
		}
	}
	return engine.Lease{}, false
}

// TestLeases: acquire is exclusive, renew only by the owner, take only at
// the revision seen, release leaves the lease ownerless or deletes it.
func TestLeases(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	const id, ttl = "GSETASK:20260101000000:1", 2 * time.Second

	steps := []struct {
		name string
		do   func() (bool, error)
		ok   bool
		err  error
	}{
		{"A acquires", func() (bool, error) { return a.AcquireLease(ctx, id, "A", ttl) }, true, nil},
		{"A acquires again (its own)", func() (bool, error) { return a.AcquireLease(ctx, id, "A", ttl) }, true, nil},
		{"B cannot acquire", func() (bool, error) { return b.AcquireLease(ctx, id, "B", ttl) }, false, nil},
		{"A renews", func() (bool, error) { return true, a.RenewLease(ctx, id, "A", ttl) }, true, nil},
		{"B cannot renew A's", func() (bool, error) { return true, b.RenewLease(ctx, id, "B", ttl) }, true, model.ErrConflict},
	}
	for _, s := range steps {
		ok, err := s.do()
		if ok != s.ok || !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Fatalf("%s: %v %v, want %v %v", s.name, ok, err, s.ok, s.err)
		}
	}
	l, found := leaseOf(t, b, id)
	if !found || l.Owner != "A" || l.TTL != ttl || l.Rev == 0 {
		t.Fatalf("lease %+v %v", l, found)
	}
	// A renews after B's look: B's revision is stale, the take fails.
	if err := a.RenewLease(ctx, id, "A", ttl); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TakeLease(ctx, id, "B", ttl, l.Rev); ok || err != nil {
		t.Fatalf("take at a stale revision: %v %v", ok, err)
	}
	// Two takers at the current revision: exactly one wins.
	l, _ = leaseOf(t, b, id)
	okB, errB := b.TakeLease(ctx, id, "B", ttl, l.Rev)
	okC, errC := a.TakeLease(ctx, id, "C", ttl, l.Rev)
	if errB != nil || errC != nil || okB == okC {
		t.Fatalf("two takes at one revision: B %v %v, C %v %v", okB, errB, okC, errC)
	}
	if err := a.RenewLease(ctx, id, "A", ttl); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("renew by the old owner: %v", err)
	}
	// Release, not done: ownerless; anyone can take it at its revision.
	if err := a.ReleaseLease(ctx, id, "A", false); err != nil { // not A's: nothing happens
		t.Fatal(err)
	}
	if l, _ := leaseOf(t, a, id); l.Owner != "B" {
		t.Fatalf("released by a non-owner: %+v", l)
	}
	if err := b.ReleaseLease(ctx, id, "B", false); err != nil {
		t.Fatal(err)
	}
	l, found = leaseOf(t, a, id)
	if !found || l.Owner != "" {
		t.Fatalf("after release: %+v %v", l, found)
	}
	if ok, err := a.TakeLease(ctx, id, "A", ttl, l.Rev); !ok || err != nil {
		t.Fatalf("take an ownerless lease: %v %v", ok, err)
	}
	// Release, done: gone; the id can be acquired again.
	if err := a.ReleaseLease(ctx, id, "A", true); err != nil {
		t.Fatal(err)
	}
	if _, found := leaseOf(t, b, id); found {
		t.Fatal("lease still listed after release done")
	}
	if ok, err := b.AcquireLease(ctx, id, "B", ttl); !ok || err != nil {
		t.Fatalf("acquire after delete: %v %v", ok, err)
	}
}

// TestWatchResults: stored results first, then live ones; the channel
// closes once the task is stored complete.
func TestWatchResults(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	if _, err := b.WatchResults(ctx, "GSETASK:20260101000000:9"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
	tgs := targets(5)
	task := model.Task{ID: "GSETASK:20260101000000:1", Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning, Created: time.Unix(1, 0)}
	if err := a.PutTask(ctx, task, tgs); err != nil {
		t.Fatal(err)
	}
	put := func(i int) {
		t.Helper()
		r := model.Result{TaskID: task.ID, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, Op: model.OpStatus, State: model.StateSuccess, Seq: int64(i + 1)}
		if err := a.PutResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	put(1)
	ch, err := b.WatchResults(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	recv := func(n int) []int64 {
		t.Helper()
		var seqs []int64
		for range n {
			select {
			case r, ok := <-ch:
				if !ok {
					t.Fatalf("closed after %v", seqs)
				}
				seqs = append(seqs, r.Seq)
			case <-time.After(10 * time.Second):
				t.Fatalf("no result after %v", seqs)
			}
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		return seqs
	}
	if got := recv(2); got[0] != 1 || got[1] != 2 {
		t.Fatalf("stored results: %v", got)
	}
	put(3)
	put(2)
	if got := recv(2); got[0] != 3 || got[1] != 4 {
		t.Fatalf("live results: %v", got)
	}
	put(4)
	task.Status = model.TaskDone
	if err := a.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if got := recv(1); got[0] != 5 {
		t.Fatalf("last result: %v", got)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("a result after the last")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not closed after the task completed")
	}
}

// BenchmarkWatchResults: a result stored by one store reaches another
// store's WatchResults (put and delivery, one at a time: the latency).
func BenchmarkWatchResults(b *testing.B) {
	emb := startNATS(b, natsCfg(b, b.TempDir()))
	w, r := open(b, emb, Options{Memory: true}), open(b, emb, Options{Memory: true})
	ctx := tctx(b)
	tgs := targets(b.N)
	task := model.Task{ID: "GSETASK:20260101000000:1", Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning}
	if err := w.PutTask(ctx, task, tgs); err != nil {
		b.Fatal(err)
	}
	ch, err := r.WatchResults(ctx, task.ID)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		res := model.Result{TaskID: task.ID, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess, Seq: int64(i + 1)}
		if err := w.PutResult(ctx, res); err != nil {
			b.Fatal(err)
		}
		if got := <-ch; got.Seq != res.Seq {
			b.Fatalf("got seq %d, want %d", got.Seq, res.Seq)
		}
	}
}

// BenchmarkPutResultMemory is the same store writes without a watcher,
// to compare with BenchmarkWatchResults.
func BenchmarkPutResultMemory(b *testing.B) {
	emb := startNATS(b, natsCfg(b, b.TempDir()))
	w := open(b, emb, Options{Memory: true})
	ctx := tctx(b)
	tgs := targets(b.N)
	task := model.Task{ID: "GSETASK:20260101000000:1", Op: model.OpStatus, Targets: len(tgs), Status: model.TaskRunning}
	if err := w.PutTask(ctx, task, tgs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		res := model.Result{TaskID: task.ID, Host: tgs[i].Host, ProcKey: tgs[i].ProcKey, State: model.StateSuccess, Seq: int64(i + 1)}
		if err := w.PutResult(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenewLease: one lease renewal (a read and a compare-and-set).
func BenchmarkRenewLease(b *testing.B) {
	emb := startNATS(b, natsCfg(b, b.TempDir()))
	s := open(b, emb, Options{Memory: true})
	ctx := tctx(b)
	if ok, err := s.AcquireLease(ctx, "t", "A", time.Second); !ok || err != nil {
		b.Fatal(ok, err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.RenewLease(ctx, "t", "A", time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenewLeaseRevisionMoved: renewals of one owner's lease that race
// (each reads the lease, then writes on the revision it read) all
// succeed: a write refused because the revision moved under it, with the
// lease still the owner's, is no conflict. One used to fail as
// model.ErrConflict (its engine would abandon a task it still owns).
func TestRenewLeaseRevisionMoved(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	if ok, err := s.AcquireLease(ctx, "T1", "engine-1", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	const n = 8
	errs := make(chan error, n)
	var start sync.WaitGroup
	start.Add(1)
	for range n {
		go func() {
			start.Wait()
			errs <- s.RenewLease(ctx, "T1", "engine-1", time.Minute)
		}()
	}
	start.Done()
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("renew racing the owner's other renewals: %v", err)
		}
	}
	// Another owner's lease is still a conflict.
	if err := s.RenewLease(ctx, "T1", "engine-2", time.Minute); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("renew of another owner's lease: %v, want ErrConflict", err)
	}
}
