package transport

import (
	"math"
	"testing"
	"time"
)

// TestFleetBeatInterval: fleet size, shortest interval, rate bound ->
// the interval every agent of the fleet is handed.
func TestFleetBeatInterval(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		n    int
		min  time.Duration
		rate int
		want time.Duration
	}{
		{0, 5 * s, 5000, 5 * s},
		{1, 5 * s, 5000, 5 * s},
		{10_000, 5 * s, 5000, 5 * s},                   // 2,000/s at 5 s: under the bound
		{25_000, 5 * s, 5000, 5 * s},                   // exactly the bound
		{25_001, 5 * s, 5000, 5946 * time.Millisecond}, // one step up (2^(1/4))
		{50_000, 5 * s, 5000, 10 * s},                  // two doublings: 4 steps
		{100_000, 5 * s, 5000, 20 * s},                 // 5,000/s
		{100_001, 5 * s, 5000, 23784 * time.Millisecond},
		{1_000_000, 5 * s, 5000, 226274 * time.Millisecond},  // 4,419/s
		{100_000, 5 * s, 50, 2152695 * time.Millisecond},     // Nomad's default rate: ~36 minutes
		{100_000_000, 5 * s, 50, 3044370 * time.Millisecond}, // capped: the last step under an hour
		{100_000, 5 * s, 0, 5 * s},                           // no bound
		{100_000, 0, 5000, 0},                                // no rule
		{100_000, 100 * time.Millisecond, 1000, 102400 * time.Millisecond},
		{3, 100 * time.Millisecond, 10, 336359 * time.Microsecond}, // under a second: to the nanosecond
		{100_000, 2 * time.Hour, 5000, 2 * time.Hour},              // a minimum past the cap stays
	} {
		got := FleetBeatInterval(c.n, c.min, c.rate)
		if c.want < time.Second && got.Round(time.Microsecond) == c.want {
			continue
		}
		if got != c.want {
			t.Errorf("FleetBeatInterval(%d, %s, %d) = %s, want %s", c.n, c.min, c.rate, got, c.want)
		}
		// Never over the rate, but where the cap yields.
		if c.rate > 0 && got > 0 && got < 3000*s && float64(c.n)/got.Seconds() > float64(c.rate)*1.0001 {
			t.Errorf("FleetBeatInterval(%d, %s, %d) = %s: %.0f beats a second", c.n, c.min, c.rate, got, float64(c.n)/got.Seconds())
		}
	}
}

// TestBeatCode: an interval's step is found back from it (a host told a
// step's interval reports it, to the millisecond).
func TestBeatCode(t *testing.T) {
	for _, min := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second, 7 * time.Second} {
		r := beatRule{min: min, rate: 1}
		for k := range r.maxStep() + 1 {
			if c := r.beatCode(r.interval(k), true); int(c) != k+2 {
				t.Errorf("min %s: step %d (%s) coded %d, want %d", min, k, r.interval(k), c, k+2)
			}
		}
		if c := r.beatCode(r.interval(3), false); c != 0 {
			t.Errorf("min %s: a host taking no hints coded %d", min, c)
		}
		if c := r.beatCode(min/2, true); c != 1 {
			t.Errorf("min %s: an interval under the minimum coded %d", min, c)
		}
		if c := r.beatCode(100*time.Hour, true); int(c) <= 2+r.maxStep() {
			t.Errorf("min %s: 100 h coded %d, not past the last step (%d)", min, c, 2+r.maxStep())
		}
	}
}

// TestBeatHint: whether a host is told another interval, and which.
func TestBeatHint(t *testing.T) {
	s := time.Second
	r := beatRule{min: 5 * s, rate: 5000}
	code := func(d time.Duration) uint8 { return r.beatCode(d, true) }
	for _, c := range []struct {
		name   string
		code   uint8
		n      int
		uptime time.Duration
		tell   time.Duration // 0: not told
	}{
		{"takes no hints", 0, 100_000, time.Hour, 0},
		{"at the fleet's interval", code(20 * s), 100_000, time.Hour, 0},
		{"faster than the fleet's: told at once", code(5 * s), 100_000, 0, 20 * s},
		{"one step faster", code(16818 * time.Millisecond), 100_000, 0, 20 * s},
		{"under the minimum, small fleet", code(time.Second), 10, 0, 5 * s},
		{"under the minimum, large fleet", code(time.Second), 100_000, 0, 20 * s},
		{"fleet grew a little: same step", code(20 * s), 99_000, time.Hour, 0},
		{"fleet shrank a step: kept", code(20 * s), 84_000, time.Hour, 0},
		{"fleet shrank two steps: kept", code(20 * s), 70_000, time.Hour, 0},
		{"fleet halved: told the shorter", code(20 * s), 50_000, time.Hour, 10 * s},
		{"fleet halved, server just started: kept", code(20 * s), 50_000, 59 * s, 0},
		{"fleet halved, server up three intervals", code(20 * s), 50_000, 60 * s, 10 * s},
		{"restarted server, first host heard", code(20 * s), 1, 0, 0},
		{"slow by its own config, small fleet", code(8 * s), 10, time.Hour, 0},
		{"far slower by its own config", code(60 * s), 10, time.Hour, 5 * s},
		// Past the last step (a host saying an interval near the int64
		// limit): its interval is the longest, not a float overflowed
		// into a negative one that passed the uptime check at once.
		{"the last code, server just started: kept", math.MaxUint8, 10, 0, 0},
		{"the last code, server up three hours: told", math.MaxUint8, 10, 3 * time.Hour, 5 * s},
	} {
		k, ok := r.hint(c.code, c.n, c.uptime)
		var got time.Duration
		if ok {
			got = r.interval(k)
		}
		if got != c.tell {
			t.Errorf("%s: told %s, want %s", c.name, got, c.tell)
		}
	}
	// No bound: every host that takes hints is brought to the minimum
	// (within the band).
	r0 := beatRule{min: 5 * s}
	if k, ok := r0.hint(r0.beatCode(20*s, true), 100_000, time.Hour); !ok || r0.interval(k) != 5*s {
		t.Errorf("no rate bound: a 20 s host told %v %s, want 5s", ok, r0.interval(k))
	}
	// No rule: nobody is told anything.
	if _, ok := (beatRule{}).hint(1, 100_000, time.Hour); ok {
		t.Error("no rule: a host was told")
	}
}

// TestTakeHint: what an agent takes from a server (hostile by default:
// bounded; nonsense refused, the interval kept).
func TestTakeHint(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		configured, hint time.Duration
		ok               bool
	}{
		{5 * s, 20 * s, true},
		{5 * s, 5 * s, true},
		{5 * s, s, true},                       // a second: the floor
		{5 * s, 999 * time.Millisecond, false}, // faster than a second
		{5 * s, 0, false},
		{5 * s, -s, false},
		{5 * s, time.Hour, true},
		{5 * s, time.Hour + 1, false},
		{5 * s, 1 << 62, false},
		{100 * time.Millisecond, 100 * time.Millisecond, true}, // configured under a second: its own is the floor
		{100 * time.Millisecond, 50 * time.Millisecond, false},
		{2 * time.Hour, 2 * time.Hour, true}, // configured over the cap: its own is the ceiling
	} {
		got, ok := takeHint(c.configured, c.hint)
		if ok != c.ok || (ok && got != c.hint) {
			t.Errorf("takeHint(%s, %s) = %s, %v; want ok %v", c.configured, c.hint, got, ok, c.ok)
		}
	}
}

// TestBeatGraceCoversChange: a host told a longer interval is not
// offline before its first beat at it can come (the rest of its old
// interval, then a phase of up to the new one), nor kept longer than
// three of its interval once heard at it.
func TestBeatGraceCoversChange(t *testing.T) {
	s := time.Second
	for _, c := range []struct{ old, new time.Duration }{
		{5 * s, 20 * s}, {5 * s, 5946 * time.Millisecond}, {20 * s, 5 * s}, {time.Hour, s}, {s, time.Hour},
	} {
		g := beatGrace(16*s, c.old, c.new)
		if worst := c.old + beatPhase(c.new, 0); g < worst {
			t.Errorf("%s -> %s: grace %s, but the first beat may come %s after the last", c.old, c.new, g, worst)
		}
		if heard := beatGrace(16*s, c.new, 0); heard != max(16*s, 3*c.new) {
			t.Errorf("heard at %s: grace %s", c.new, heard)
		}
	}
	for _, u := range []float64{0, 0.5, 0.999999} {
		if p := beatPhase(20*s, u); p <= 0 || p > 20*s {
			t.Errorf("beatPhase(20s, %v) = %s", u, p)
		}
	}
}
