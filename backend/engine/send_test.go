package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/model"
)

// asyncFleet serves the simulated fleet as an AsyncDispatcher: each
// request answered from a goroutine of its own, one host's refused at
// once (done called before DispatchAsync returns); it counts the
// requests in flight and their peak.
type asyncFleet struct {
	*simulator.Fleet
	refuse         model.Host
	inflight, peak atomic.Int64
	sent           atomic.Int64
}

func (a *asyncFleet) DispatchAsync(ctx context.Context, host model.Host, req model.AgentRequest, done func(model.AgentReply, error)) {
	a.sent.Add(1)
	if host == a.refuse {
		done(model.AgentReply{}, errors.New("dispatch: not sent"))
		return
	}
	n := a.inflight.Add(1)
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
	go func() {
		rep, err := a.Fleet.Dispatch(ctx, host, req)
		a.inflight.Add(-1)
		done(rep, err)
	}()
}

// A run over an AsyncDispatcher sends every target, at most the
// engine's concurrency at once, records every answer (an error given
// before the send returned too) and completes the task.
func TestAsyncFanOut(t *testing.T) {
	fleet := simulator.New(quietFleet(300))
	t.Cleanup(func() { _ = fleet.Close() }) // after the engine (engineOver's cleanup runs first)
	hosts, err := fleet.Hosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ad := &asyncFleet{Fleet: fleet, refuse: hosts[7].Host}
	ec := config.Default().Engine
	ec.Concurrency = 16
	e := engineOver(t, fleet, ad, ec)
	ctx := context.Background()
	n := allHosts(t, e, fleet)
	for round := range 3 {
		task, res := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "bench"}})
		if len(res) != n {
			t.Fatalf("round %d: %d results of %d targets", round, len(res), n)
		}
		failed := 0
		for _, r := range res {
			switch {
			case r.Host == ad.refuse:
				failed++
				if r.State != model.StateFailed {
					t.Fatalf("the refused host's result %+v, want failed", r)
				}
			case r.State != model.StateSuccess:
				t.Fatalf("result %+v", r)
			}
		}
		if failed != 1 {
			t.Fatalf("round %d: the refused host has %d results", round, failed)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := e.Task(ctx, task.ID)
			if err == nil && v.Task.Status.Final() {
				if v.Task.Counts.Final() != n {
					t.Fatalf("task %+v", v.Task.Counts)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task not complete: %+v %v", v.Task, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if p := ad.peak.Load(); p > int64(ec.Concurrency) || p < 2 {
		t.Fatalf("at most %d requests in flight, want 2..%d (the concurrency)", p, ec.Concurrency)
	}
	if s := ad.sent.Load(); s != int64(3*n) {
		t.Fatalf("%d requests sent for 3 rounds over %d targets", s, n)
	}
}

// A run sent async and cancelled midway: the targets not sent yet are
// cancelled, those in flight are stopped (their dispatch ends with
// model.ErrCancelled) and recorded cancelled, those answered keep their
// answer; the task ends cancelled with every result final.
func TestAsyncFanOutCancelled(t *testing.T) {
	sc := quietFleet(200)
	sc.LatencyMedian, sc.LatencyP99 = config.Duration(40*time.Millisecond), config.Duration(60*time.Millisecond)
	fleet := simulator.New(sc)
	t.Cleanup(func() { _ = fleet.Close() }) // after the engine (engineOver's cleanup runs first)
	ad := &asyncFleet{Fleet: fleet}
	ec := config.Default().Engine
	ec.Concurrency = 8
	e := engineOver(t, fleet, ad, ec)
	ctx := context.Background()
	n := allHosts(t, e, fleet)
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var res []model.Result
	for r := range ch {
		res = append(res, r)
		if len(res) == 10 {
			if err := e.Cancel(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(res) != n {
		t.Fatalf("%d results of %d targets", len(res), n)
	}
	var ok, cancelled int
	for _, r := range res {
		switch r.State {
		case model.StateSuccess:
			ok++
		case model.StateCancelled:
			cancelled++
		default:
			t.Fatalf("result %+v: want success or cancelled", r)
		}
	}
	if ok < 10 || cancelled == 0 || ad.sent.Load() >= int64(n) {
		t.Fatalf("%d succeeded, %d cancelled, %d of %d sent; want the first ten answered, the rest cancelled, not all sent", ok, cancelled, ad.sent.Load(), n)
	}
	v, err := e.Task(ctx, task.ID)
	if err != nil || v.Task.Status != model.TaskCanceled {
		t.Fatalf("task %+v, %v; want cancelled", v.Task, err)
	}
}
