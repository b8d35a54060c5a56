package jsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// TestStoreWaitBound: with NATS gone, every kind of store call made with
// a bound (backend.WithStoreWait, as the API server sets it) fails with
// model.ErrUnavailable and the reason once the bound is spent (an
// unanswered request is given one attempt's time), instead of waiting out
// the store's minute of patience for a leader election.
func TestStoreWaitBound(t *testing.T) {
	e := startNATS(t, natsCfg(t, t.TempDir()))
	s := open(t, e, Options{})
	ctx := tctx(t)
	if err := s.PutProcess(ctx, proc("web", "nginx")); err != nil {
		t.Fatal(err)
	}
	task := model.Task{ID: "T1", Op: model.OpStart, Targets: 1, Status: model.TaskRunning}
	if err := s.PutTask(ctx, task, targets(1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Task(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
	e.Shutdown()

	const bound = 300 * time.Millisecond
	bctx := backend.WithStoreWait(ctx, bound)
	calls := map[string]func() error{
		"put process": func() error { return s.PutProcess(bctx, proc("web", "apache")) },
		"processes":   func() error { _, err := s.Processes(bctx); return err },
		"next seq": func() error {
			// NextSeq reserves numbers in blocks: spend the block first.
			for range seqBlock + 1 {
				if _, err := s.NextSeq(bctx); err != nil {
					return err
				}
			}
			return nil
		},
		"put task": func() error { return s.PutTask(bctx, model.Task{ID: "T2", Op: model.OpStart, Targets: 1}, targets(1)) },
		"tasks":    func() error { _, err := s.Tasks(bctx, 10); return err },
		"task":     func() error { _, _, err := s.Task(bctx, "T9"); return err },
		"results":  func() error { _, err := s.Results(bctx, "T1"); return err },
		"audit": func() error {
			_, err := s.AppendAudit(bctx, model.AuditEntry{Action: model.AuditOperate, Summary: "x"})
			return err
		},
	}
	type outcome struct {
		name string
		err  error
		took time.Duration
	}
	out := make(chan outcome, len(calls))
	for name, call := range calls {
		go func() {
			t0 := time.Now()
			err := call()
			out <- outcome{name, err, time.Since(t0)}
		}()
	}
	for range calls {
		o := <-out
		t.Logf("%s: %s: %v", o.name, o.took, o.err)
		if !errors.Is(o.err, model.ErrUnavailable) {
			t.Errorf("%s with NATS gone: %v, not ErrUnavailable", o.name, o.err)
		}
		// One unanswered attempt (3 s) at most, and a loaded machine's
		// scheduling delay: not the minute.
		if o.took > attemptTimeout+3*time.Second {
			t.Errorf("%s with NATS gone took %s", o.name, o.took)
		}
	}
	// The bound is the request's: once one of its calls found the store
	// down, its later calls fail at once with that error (a request of
	// several calls is not kept an attempt's time per call).
	rctx := backend.WithStoreWait(ctx, bound)
	first := s.PutProcess(rctx, proc("web", "lighttpd"))
	if !errors.Is(first, model.ErrUnavailable) {
		t.Fatalf("first call of a request with NATS gone: %v", first)
	}
	down := backend.StoreDown(rctx)
	if down == nil || !errors.Is(first, down) {
		t.Fatalf("the request's outage not recorded: %v (first %v)", down, first)
	}
	for name, call := range map[string]func() error{
		"processes": func() error { _, err := s.Processes(rctx); return err },
		"tasks":     func() error { _, err := s.Tasks(rctx, 10); return err },
	} {
		t0 := time.Now()
		err := call()
		if !errors.Is(err, model.ErrUnavailable) || !errors.Is(err, down) {
			t.Errorf("%s after the request found the store down: %v, want %v", name, err, down)
		}
		// At once: far less than the attempt (3 s) the first one spent.
		if took := time.Since(t0); took >= attemptTimeout {
			t.Errorf("%s after the request found the store down took %s", name, took)
		}
	}
	// Without a bound a call keeps the store's patience: still waiting
	// when its own context ends.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := s.Tasks(short, 10); errors.Is(err, model.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unbounded call: %v", err)
	}
}
