package model

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRolloutParse(t *testing.T) {
	for _, tc := range []struct {
		spec   RolloutSpec
		want   string // Rollout.String() when valid
		fields []string
	}{
		{spec: RolloutSpec{Batch: "10%", Canary: "1", Pause: "30s", MaxFail: "2"},
			want: "batch 10% · canary 1 · pause 30s · max-fail 2 per batch"},
		{spec: RolloutSpec{Batch: " 5 ", Pause: "manual", MaxFail: "5%", FailScope: FailPerTask},
			want: "batch 5 · pause until resumed · max-fail 5% per task"},
		{spec: RolloutSpec{Batch: "100%", Canary: "0", Pause: "0"}, want: "batch 100% · max-fail 0 per batch"},
		{spec: RolloutSpec{Batch: "0%"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "0"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "101%"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "-3"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "ten"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "+3"}, fields: []string{"rollout.batch"}},
		{spec: RolloutSpec{Batch: "5", Canary: "6"}, fields: []string{"rollout.canary"}},
		{spec: RolloutSpec{Batch: "5%", Canary: "6%"}, fields: []string{"rollout.canary"}},
		{spec: RolloutSpec{Batch: "5", Canary: "-1", MaxFail: "-1", Pause: "-2s", FailScope: "host"},
			fields: []string{"rollout.canary", "rollout.max_fail", "rollout.pause", "rollout.fail_scope"}},
		{spec: RolloutSpec{Batch: "5", MaxFail: "120%"}, fields: []string{"rollout.max_fail"}},
		{spec: RolloutSpec{Batch: "5", Pause: "25h"}, fields: []string{"rollout.pause"}},
		{spec: RolloutSpec{Batch: "5", Pause: "soon"}, fields: []string{"rollout.pause"}},
	} {
		r, err := ParseRollout(tc.spec)
		if tc.fields != nil {
			ve, ok := err.(ValidationError)
			if !ok {
				t.Errorf("%+v: want a ValidationError on %v, got %v", tc.spec, tc.fields, err)
				continue
			}
			if got := ve.Fields(); !slices.Equal(got, tc.fields) {
				t.Errorf("%+v: fields %v, want %v (%v)", tc.spec, got, tc.fields, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc.spec, err)
			continue
		}
		if got := r.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.spec, got, tc.want)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Rollout
		if err := json.Unmarshal(b, &back); err != nil || back != r {
			t.Errorf("%s: round trip gave %+v, %v; want %+v", b, back, err, r)
		}
	}
}

func TestRolloutPlan(t *testing.T) {
	one := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	for _, tc := range []struct {
		spec  RolloutSpec
		hosts []int
		want  []Batch
	}{
		{RolloutSpec{Batch: "2"}, one(5), []Batch{{0, 2, 2, false}, {2, 4, 2, false}, {4, 5, 1, false}}},
		{RolloutSpec{Batch: "10%", Canary: "1"}, one(25), []Batch{{0, 1, 1, true}, {1, 4, 3, false}, {4, 7, 3, false},
			{7, 10, 3, false}, {10, 13, 3, false}, {13, 16, 3, false}, {16, 19, 3, false}, {19, 22, 3, false}, {22, 25, 3, false}}},
		{RolloutSpec{Batch: "1%"}, one(3), []Batch{{0, 1, 1, false}, {1, 2, 1, false}, {2, 3, 1, false}}},
		{RolloutSpec{Batch: "100%", Canary: "1"}, []int{2, 1, 3}, []Batch{{0, 2, 1, true}, {2, 6, 2, false}}},
		{RolloutSpec{Batch: "50", Canary: "9"}, one(4), []Batch{{0, 4, 4, true}}},
		{RolloutSpec{Batch: "3"}, nil, nil},
	} {
		r, err := ParseRollout(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Plan(tc.hosts); !slices.Equal(got, tc.want) {
			t.Errorf("%+v over %v:\n got %v\nwant %v", tc.spec, tc.hosts, got, tc.want)
		}
	}
}

func TestDecideRoll(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)
	plan := []Batch{{0, 1, 1, true}, {1, 4, 3, false}, {4, 7, 3, false}}
	plain := []Batch{{0, 3, 3, false}, {3, 6, 3, false}}
	spec := func(s RolloutSpec) Rollout {
		r, err := ParseRollout(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := spec(RolloutSpec{Batch: "3", Canary: "1", MaxFail: "1"})
	done := func(size, ok, bad int, at time.Time) BatchProgress {
		return BatchProgress{Size: size, OK: ok, Bad: bad, LastFinished: at}
	}
	for _, tc := range []struct {
		name   string
		r      Rollout
		in     RollInput
		do     RollDo
		batch  int
		until  time.Time
		reason string
	}{
		{name: "nothing started: the canary goes first", r: base,
			in: RollInput{Batches: plan, Total: BatchProgress{Size: 7, Pending: 7}},
			do: RollDispatch, batch: 0, reason: "batch 1 of 3 starting"},
		{name: "canary with targets still to send: go on sending", r: base,
			in: RollInput{Batches: plan, Started: 1, Current: BatchProgress{Size: 1, Pending: 1}},
			do: RollDispatch, batch: 0},
		{name: "canary running", r: base,
			in: RollInput{Batches: plan, Started: 1, Current: BatchProgress{Size: 1, Running: 1}},
			do: RollRunning, batch: 0},
		{name: "canary failed: stop even under max-fail", r: base,
			in: RollInput{Batches: plan, Started: 1, Current: done(1, 0, 1, t0)},
			do: RollStop, batch: 0, reason: "canary batch failed: 1 of 1 targets failed"},
		{name: "canary done, no pause: next batch", r: base,
			in: RollInput{Batches: plan, Started: 1, Current: done(1, 1, 0, t0), Now: t0},
			do: RollDispatch, batch: 1, reason: "batch 2 of 3 starting"},
		{name: "one failure in a batch is tolerated by max-fail 1", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: BatchProgress{Size: 3, Running: 1, OK: 1, Bad: 1}},
			do: RollRunning, batch: 1},
		{name: "two failures exceed max-fail 1 while the batch still runs", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: BatchProgress{Size: 3, Running: 1, Bad: 2}},
			do: RollStop, batch: 1, reason: "failure threshold exceeded in batch 2: 2 of its 3 targets failed (max-fail 1 per batch)"},
		{name: "per task: failures add up over batches",
			r:  spec(RolloutSpec{Batch: "3", MaxFail: "1", FailScope: FailPerTask}),
			in: RollInput{Batches: plain, Started: 2, Current: BatchProgress{Size: 3, Running: 2, Bad: 1}, Total: BatchProgress{Size: 6, Bad: 2}},
			do: RollStop, batch: 1, reason: "failure threshold exceeded in batch 2: 2 of the task's 6 targets failed (max-fail 1 per task)"},
		{name: "percent: 1 of 3 is over 20%",
			r:  spec(RolloutSpec{Batch: "3", MaxFail: "20%"}),
			in: RollInput{Batches: plain, Started: 1, Current: BatchProgress{Size: 3, Running: 2, Bad: 1}},
			do: RollStop, batch: 0},
		{name: "percent: 1 of 3 is within 34%",
			r:  spec(RolloutSpec{Batch: "3", MaxFail: "34%"}),
			in: RollInput{Batches: plain, Started: 1, Current: BatchProgress{Size: 3, Running: 2, Bad: 1}},
			do: RollRunning, batch: 0},
		{name: "timed pause: wait until the last result plus the pause",
			r:  spec(RolloutSpec{Batch: "3", Pause: "30s"}),
			in: RollInput{Batches: plain, Started: 1, Current: done(3, 3, 0, t0), Now: t0.Add(10 * time.Second)},
			do: RollWait, batch: 1, until: t0.Add(30 * time.Second), reason: "batch 1 of 2 done: pausing 30s before the next"},
		{name: "timed pause over: next batch",
			r:  spec(RolloutSpec{Batch: "3", Pause: "30s"}),
			in: RollInput{Batches: plain, Started: 1, Current: done(3, 3, 0, t0), Now: t0.Add(30 * time.Second)},
			do: RollDispatch, batch: 1},
		{name: "manual pause: wait for an operator",
			r:  spec(RolloutSpec{Batch: "3", Pause: "manual"}),
			in: RollInput{Batches: plain, Started: 1, Current: done(3, 3, 0, t0), Now: t0},
			do: RollWaitResume, batch: 1, reason: "batch 1 of 2 done: waiting for an operator to resume"},
		{name: "manual pause released by a resume",
			r:  spec(RolloutSpec{Batch: "3", Pause: "manual"}),
			in: RollInput{Batches: plain, Started: 1, Current: done(3, 3, 0, t0), Control: RollControl{Waiting: 1, Released: 1}},
			do: RollDispatch, batch: 1},
		{name: "the first batch never waits for a manual pause",
			r:  spec(RolloutSpec{Batch: "3", Pause: "manual"}),
			in: RollInput{Batches: plain},
			do: RollDispatch, batch: 0},
		{name: "paused mid-batch: no more targets sent", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: BatchProgress{Size: 3, Pending: 2, Running: 1}, Control: RollControl{Paused: true, PausedBy: "ann"}},
			do: RollWaitResume, batch: 1, reason: "paused by ann"},
		{name: "paused with the rest running: running says so", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: BatchProgress{Size: 3, Running: 1, OK: 2}, Control: RollControl{Paused: true, PausedBy: "ann"}},
			do: RollRunning, batch: 1, reason: "batch 2 of 3 running; paused by ann: no more hosts are sent the op"},
		{name: "paused between batches", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: done(3, 3, 0, t0), Control: RollControl{Paused: true}},
			do: RollWaitResume, batch: 2, reason: "paused"},
		{name: "an abort wins over everything", r: base,
			in: RollInput{Batches: plan, Started: 2, Current: BatchProgress{Size: 3, Pending: 2, Bad: 1}, Control: RollControl{Paused: true, Aborted: true, AbortedBy: "bob"}},
			do: RollStop, batch: 1, reason: "aborted by bob"},
		{name: "all batches done", r: base,
			in: RollInput{Batches: plan, Started: 3, Current: done(3, 2, 1, t0)},
			do: RollDone, batch: 2, reason: "all 3 batches done"},
		{name: "threshold met in the last batch still stops (the task says why)", r: base,
			in: RollInput{Batches: plan, Started: 3, Current: done(3, 1, 2, t0)},
			do: RollStop, batch: 2},
		{name: "an empty plan is done", r: base, in: RollInput{}, do: RollDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideRoll(tc.r, tc.in)
			if d.Do != tc.do || d.Batch != tc.batch || !d.Until.Equal(tc.until) {
				t.Fatalf("got %+v, want do %s batch %d until %v", d, tc.do, tc.batch, tc.until)
			}
			if tc.reason != "" && d.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", d.Reason, tc.reason)
			}
			if d.Reason == "" || strings.Contains(d.Reason, "%!") {
				t.Fatalf("reason %q", d.Reason)
			}
		})
	}
}

func TestBatchProgress(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)
	var p BatchProgress
	for _, s := range []ResultState{StatePending, StatePending, StateRunning, StateSuccess} {
		p.Add(Result{State: s})
	}
	p.Move(StatePending, Result{State: StateRunning})
	p.Move(StateRunning, Result{State: StateUnreachable, Finished: t0})
	p.Move(StateRunning, Result{State: StateTimeout, Finished: t0.Add(-time.Second)})
	want := BatchProgress{Size: 4, Pending: 1, OK: 1, Bad: 2, LastFinished: t0}
	if p != want {
		t.Fatalf("got %+v, want %+v (unreachable and timed out count as failures)", p, want)
	}
}
