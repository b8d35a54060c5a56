package ui

import (
	"testing"
	"time"
)

// TestReloads: the pacing of event-driven reloads, step by step on a
// made-up clock (no sleeps): one load in flight, at most one start every
// reloadGap, and a change told during a load is answered by another load.
func TestReloads(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	type step struct {
		do      string // started, changed, done, fired
		at      time.Duration
		load    bool
		wait    time.Duration
		loading bool
		queued  bool
		stale   bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a change long after the last load loads at once", []step{
			{do: "started", loading: true},
			{do: "done", at: time.Second},
			{do: "changed", at: time.Minute, load: true},
		}},
		{"a change right after a load waits for the gap", []step{
			{do: "started", loading: true},
			{do: "done", at: 500 * time.Millisecond},
			{do: "changed", at: time.Second, wait: time.Second, queued: true},
			{do: "changed", at: 1500 * time.Millisecond, queued: true}, // the tick covers it
			{do: "fired"},
			{do: "started", at: 2 * time.Second, loading: true},
		}},
		{"a change during a load is answered after it", []step{
			{do: "started", loading: true},
			{do: "changed", at: 100 * time.Millisecond, loading: true, stale: true},
			{do: "changed", at: 200 * time.Millisecond, loading: true, stale: true},
			{do: "done", at: 300 * time.Millisecond, wait: 1700 * time.Millisecond, queued: true},
		}},
		{"a slow load with a change during it reloads at once", []step{
			{do: "started", loading: true},
			{do: "changed", at: time.Second, loading: true, stale: true},
			{do: "done", at: 5 * time.Second, load: true},
		}},
		{"a load without changes during it asks nothing", []step{
			{do: "started", loading: true},
			{do: "done", at: 5 * time.Second},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r reloads
			for i, s := range c.steps {
				now := t0.Add(s.at)
				var load bool
				var wait time.Duration
				switch s.do {
				case "started":
					r.started(now)
				case "changed":
					load, wait = r.changed(now)
				case "done":
					load, wait = r.done(now)
				case "fired":
					r.fired()
				}
				if load != s.load || wait != s.wait || r.loading != s.loading || r.queued != s.queued || r.stale != s.stale {
					t.Fatalf("step %d (%s at %s): load %v wait %s, loading %v queued %v stale %v; want load %v wait %s, loading %v queued %v stale %v",
						i, s.do, s.at, load, wait, r.loading, r.queued, r.stale, s.load, s.wait, s.loading, s.queued, s.stale)
				}
			}
		})
	}
}
