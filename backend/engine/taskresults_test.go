package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gseproc/model"
)

// chunkedRun is a status run "T" over its targets, two chunks of results
// and some, none started, at now.
func chunkedRun() (r *run, targets []model.Target, now time.Time) {
	targets = make([]model.Target, 2*resultChunk+3)
	for i := range targets {
		targets[i] = model.Target{Host: model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, ProcKey: "ns:p", AgentID: fmt.Sprint("a", i)}
	}
	now = time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	return newRun(model.Task{ID: "T", Op: model.OpStatus}, targets, map[string]model.Process{}, nil), targets, now
}

// holding is an engine holding run r (task "T"), its clock at now.
func holding(r *run, now time.Time) *Engine {
	return &Engine{now: func() time.Time { return now }, runs: map[string]*run{"T": r}}
}

// TestTaskResultsAsWhenTheReadBegan: TaskResults of a run this engine holds
// gives every result whole, as Task does, and a result made final while
// the read goes on (after the read of its chunk began) as it was when the
// read began, running, with no Seq: the largest Seq given stays the read's
// start, so that a Watch from it replays that final result.
func TestTaskResultsAsWhenTheReadBegan(t *testing.T) {
	r, targets, now := chunkedRun()
	n := len(targets)
	finish := func(i int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		res := r.result(i)
		res.State, res.Started, res.Finished, res.Message = model.StateRunning, now, now, "ok"
		r.setResult(i, res)
		res.State = model.StateSuccess
		r.finishLocked(i, res, now)
	}
	finish(0)
	finish(n - 1)
	e := holding(r, now)
	v, err := e.Task(context.Background(), "T")
	if err != nil {
		t.Fatal(err)
	}
	late := resultChunk + 1 // in the second chunk: made final while the first is given
	var got []model.Result
	tv, err := e.TaskResults(context.Background(), "T", func(res *model.Result) {
		if len(got) == 0 {
			finish(late)
		}
		got = append(got, *res)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tv.Task, v.Task) || tv.Results != nil {
		t.Fatalf("task %+v (%d results), want %+v", tv.Task, len(tv.Results), v.Task)
	}
	if len(got) != n {
		t.Fatalf("%d results, want %d", len(got), n)
	}
	var maxSeq int64
	for i := range got {
		want := v.Results[i]
		if i == late {
			want = model.Result{TaskID: "T", Host: targets[i].Host, ProcKey: "ns:p", AgentID: targets[i].AgentID,
				Op: model.OpStatus, State: model.StateRunning, Started: now}
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("result %d:\n got %+v\nwant %+v", i, got[i], want)
		}
		maxSeq = max(maxSeq, got[i].Seq)
	}
	if maxSeq != 2 {
		t.Fatalf("largest Seq given %d, want 2 (the read's start)", maxSeq)
	}
	if s := r.result(late); s.State != model.StateSuccess || s.Seq != 3 {
		t.Fatalf("the run's result %+v, want success with Seq 3", s)
	}
}

// TestTaskResultsPendingCancelledDuringTheRead: a target pending when the
// read began and cancelled while it goes on (never sent) is given as it
// was then, pending, not as running, a state it never had.
func TestTaskResultsPendingCancelledDuringTheRead(t *testing.T) {
	r, targets, now := chunkedRun()
	n := len(targets)
	e := holding(r, now)
	v, err := e.Task(context.Background(), "T")
	if err != nil {
		t.Fatal(err)
	}
	from := resultChunk + 1 // in the second chunk: cancelled while the first is given
	var got []model.Result
	if _, err := e.TaskResults(context.Background(), "T", func(res *model.Result) {
		if len(got) == 0 {
			r.mu.Lock()
			r.cancelPendingFromLocked(from, now, "cancelled")
			r.mu.Unlock()
		}
		got = append(got, *res)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d results, want %d", len(got), n)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], v.Results[i]) || got[i].State != model.StatePending {
			t.Fatalf("result %d:\n got %+v\nwant %+v", i, got[i], v.Results[i])
		}
	}
	if s := r.result(from); s.State != model.StateCancelled {
		t.Fatalf("the run's result %+v, want cancelled", s)
	}
}
