package engine

import (
	"testing"
	"time"
)

// TestStatusesDue: the whole rule of the statuses held behind the runs in
// flight, by table.
func TestStatusesDue(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name    string
		n       int
		waited  time.Duration
		running int
		due     bool
		after   time.Duration
	}{
		{"none held", 0, 0, 0, false, 0},
		{"none held, runs in flight", 0, time.Hour, 3, false, 0},
		{"no run in flight", 1, 0, 0, true, 0},
		{"a run in flight, just queued", 1, 0, 1, false, statusHold},
		{"a run in flight, waited a while", 10, 2 * time.Second, 1, false, statusHold - 2*time.Second},
		{"a run in flight, waited just under the hold", 10, statusHold - time.Nanosecond, 1, false, time.Nanosecond},
		{"a run in flight, waited the hold", 10, statusHold, 1, true, 0},
		{"a run in flight, waited past the hold", 10, time.Minute, 4, true, 0},
		{"a run in flight, one under the most held", statusHoldMax - 1, 0, 1, false, statusHold},
		{"a run in flight, the most held", statusHoldMax, 0, 1, true, 0},
		{"a run in flight, a clock gone back", 10, -time.Second, 1, false, statusHold + time.Second},
	} {
		due, after := statusesDue(c.n, t0, t0.Add(c.waited), c.running)
		if due != c.due || after != c.after {
			t.Errorf("%s: statusesDue(%d held, waited %s, %d running) = %v, %s; want %v, %s", c.name, c.n, c.waited, c.running, due, after, c.due, c.after)
		}
	}
}
