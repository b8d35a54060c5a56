package simulator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gseproc/model"
)

func hostsN(n int) []model.Host {
	hs := make([]model.Host, n)
	for i := range hs {
		hs[i] = model.Host{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}
	}
	return hs
}

func TestPick(t *testing.T) {
	hs := hostsN(500)
	for _, tc := range []struct {
		name string
		n    int
		want int
	}{{"none", 0, 0}, {"one", 1, 1}, {"some", 15, 15}, {"all", 500, 500}, {"more than all", 900, 500}} {
		t.Run(tc.name, func(t *testing.T) {
			a := Pick(7, model.SimOffline, hs, tc.n)
			assert.Len(t, a, tc.want)
			b := Pick(7, model.SimOffline, slices.Clone(hs), tc.n)
			assert.Equal(t, a, b, "the same seed picks the same hosts")
			assert.True(t, slices.IsSortedFunc(a, model.CompareHosts), "picks come in host order")
		})
	}
	rev := slices.Clone(hs)
	slices.Reverse(rev)
	assert.Equal(t, Pick(7, model.SimOffline, hs, 20), Pick(7, model.SimOffline, rev, 20), "the order of the selection does not matter")
	assert.NotEqual(t, Pick(7, model.SimOffline, hs, 20), Pick(8, model.SimOffline, hs, 20), "another seed, other hosts")
	assert.NotEqual(t, Pick(7, model.SimOffline, hs, 20), Pick(7, model.SimCrash, hs, 20), "another action, other hosts")
	small, big := Pick(7, model.SimOffline, hs, 10), Pick(7, model.SimOffline, hs, 40)
	for _, h := range small {
		assert.Contains(t, big, h, "a larger share picks a superset")
	}
}

func TestPickCount(t *testing.T) {
	for _, tc := range []struct {
		c    model.SimChange
		n    int
		want int
	}{
		{model.SimChange{}, 40, 40},
		{model.SimChange{Share: 0.03}, 400, 12},
		{model.SimChange{Share: 0.03}, 10, 1}, // at least one
		{model.SimChange{Share: 0.5}, 3, 2},   // rounded up
		{model.SimChange{Count: 10}, 4, 4},
		{model.SimChange{Count: 10}, 0, 0},
	} {
		assert.Equal(t, tc.want, tc.c.PickCount(tc.n), "%+v of %d", tc.c, tc.n)
	}
}

// clock is a scenario clock: time moves only when the test says.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// events collects a fleet's events in order.
type events struct {
	mu  sync.Mutex
	evs []model.Event
}

func collect(t *testing.T, f *Fleet) *events {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &events{}
	f.SubscribeEvents(ctx, func(ev model.Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() })
	return e
}

// wait returns the events once n have arrived (generous deadline).
func (e *events) wait(t *testing.T, n int) []model.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		got := slices.Clone(e.evs)
		e.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d events, got %d: %v", n, len(got), got)
		}
		time.Sleep(time.Millisecond)
	}
}

// before returns the events that came before the announcement msg, once
// it has come: a subscriber hears events in the order they were emitted,
// so nothing emitted before the announcement is still on its way.
func (e *events) before(t *testing.T, f *Fleet, msg string) []model.Event {
	t.Helper()
	f.Announce(msg)
	for {
		got := e.wait(t, 1)
		if i := slices.IndexFunc(got, func(ev model.Event) bool { return ev.Message == "sim: "+msg }); i >= 0 {
			return got[:i]
		}
		e.wait(t, len(got)+1)
	}
}

// clockedFleet is a fleet of n hosts on a scenario clock (time moves only
// when the test says), its events collected.
func clockedFleet(t *testing.T, n int) (*Fleet, *clock, *events) {
	f := New(quiet(n))
	t.Cleanup(func() { _ = f.Close() })
	c := &clock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	f.SetClock(c.Now)
	return f, c, collect(t, f)
}

func kinds(evs []model.Event) map[model.EventKind]int {
	m := map[model.EventKind]int{}
	for _, e := range evs {
		m[e.Kind]++
	}
	return m
}

// deployedHosts is every host process key is deployed on.
func deployedHosts(f *Fleet, key string) []model.Target {
	for _, d := range f.Definitions() {
		if d.Process.Key() == key {
			ts := make([]model.Target, len(d.Hosts))
			for i, h := range d.Hosts {
				ts[i] = model.Target{Host: h, ProcKey: key}
			}
			return ts
		}
	}
	return nil
}

func allHosts(f *Fleet) []model.Target {
	his, _ := f.Hosts(context.Background())
	ts := make([]model.Target, len(his))
	for i, h := range his {
		ts[i] = model.Target{Host: h.Host}
	}
	return ts
}

func TestControlOfflineOnline(t *testing.T) {
	f := New(quiet(200))
	defer f.Close()
	evs := collect(t, f)
	ctx := context.Background()
	out, err := f.Control(ctx, model.SimChange{Action: model.SimOffline, Count: 5}, allHosts(f), "whole fleet")
	require.NoError(t, err)
	assert.Equal(t, 200, out.Selected)
	require.Len(t, out.Picked, 5)
	got := evs.wait(t, 1+out.Changed)
	assert.Equal(t, model.EventSimControl, got[0].Kind, "the cause comes before the effects")
	assert.Contains(t, got[0].Message, "took 5 of 200 hosts (whole fleet) offline")
	assert.Equal(t, out.Changed, kinds(got)[model.EventAgentOffline])
	for _, p := range out.Picked {
		s, _ := f.Host(p.Host)
		assert.True(t, s.Offline, "%s is offline", p.Host)
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := f.Dispatch(ctx, p.Host, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "an offline agent never answers")
	}
	back, err := f.Control(ctx, model.SimChange{Action: model.SimOnline}, out.Picked, "")
	require.NoError(t, err)
	assert.Equal(t, 5, back.Changed)
	got = evs.wait(t, 2+2*out.Changed)
	assert.Equal(t, out.Changed, kinds(got)[model.EventAgentOnline])
}

func TestControlCrashAbsorbed(t *testing.T) {
	f, c, evs := clockedFleet(t, 300)
	const key = "web:nginx"
	out, err := f.Control(context.Background(), model.SimChange{Action: model.SimCrash, Share: 0.5, RestartFails: 0.5}, deployedHosts(f, key), key)
	require.NoError(t, err)
	require.NotZero(t, out.Changed)
	// Every crashed process restarted at once or went to BACKOFF.
	backoff := 0
	for _, p := range out.Picked {
		s, _ := f.Host(p.Host)
		st, _ := s.Proc(key)
		switch st.State {
		case model.ProcBackoff:
			backoff++
		case model.ProcRunning:
		case model.ProcStopped: // was not running before the crash
		default:
			t.Fatalf("%s: %s after a crash", p.Host, st.State)
		}
	}
	require.NotZero(t, backoff, "with half the relaunches failing some wait in BACKOFF")
	// The restart policy's delay passes on the scenario clock: they come back.
	f.Advance(c.Add(time.Minute))
	for _, p := range out.Picked {
		s, _ := f.Host(p.Host)
		st, _ := s.Proc(key)
		assert.NotEqual(t, model.ProcBackoff, st.State, "%s relaunched after its delay", p.Host)
	}
	got := evs.wait(t, 1+out.Changed+backoff)
	k := kinds(got)
	assert.Equal(t, backoff, k[model.EventRestartFailed])
	assert.Equal(t, out.Changed, k[model.EventRestartSuccess], "every crashed process came back")
}

func TestControlFlap(t *testing.T) {
	f, c, evs := clockedFleet(t, 50)
	h := allHosts(f)[7]
	s, _ := f.Host(h.Host)
	require.Equal(t, "normal", s.Kind)
	_, err := f.Control(context.Background(), model.SimChange{Action: model.SimFlap, Times: 2, EveryMS: 1000}, []model.Target{h}, "")
	require.NoError(t, err)
	s, _ = f.Host(h.Host)
	assert.True(t, s.Offline, "the first half of a flap is offline")
	f.Advance(c.Add(500 * time.Millisecond)) // not due yet
	s, _ = f.Host(h.Host)
	assert.True(t, s.Offline)
	for range 3 {
		f.Advance(c.Add(time.Second))
	}
	s, _ = f.Host(h.Host)
	assert.False(t, s.Offline, "a flap ends with the agent back")
	f.Advance(c.Add(time.Second))
	got := evs.before(t, f, "end of the test")
	var seq []model.EventKind
	for _, e := range got {
		seq = append(seq, e.Kind)
	}
	assert.Equal(t, []model.EventKind{model.EventSimControl, model.EventAgentOffline, model.EventAgentOnline, model.EventAgentOffline, model.EventAgentOnline}, seq)
	assert.Len(t, got, 5, "two flaps are four toggles")
}

func TestControlMemory(t *testing.T) {
	f := New(quiet(300))
	defer f.Close()
	evs := collect(t, f)
	var key string
	for _, d := range f.Definitions() {
		if d.Process.Spec.Resource.Mem > 0 && len(d.Hosts) > 3 {
			key = d.Process.Key()
			break
		}
	}
	require.NotEmpty(t, key, "the catalog has a process with a mem limit")
	out, err := f.Control(context.Background(), model.SimChange{Action: model.SimMemory, Count: 3}, deployedHosts(f, key), "")
	require.NoError(t, err)
	got := evs.wait(t, 1+out.Changed)
	assert.Equal(t, out.Changed, kinds(got)[model.EventLimitExceeded])
	for _, p := range out.Picked {
		s, _ := f.Host(p.Host)
		st, _ := s.Proc(key)
		assert.Equal(t, model.ProcStopped, st.State, "held down over its limit")
	}
	// Held: a crash round does not bring it back, an operator's start does.
	for _, p := range out.Picked {
		i, _ := f.lookup(p.Host)
		f.crash(i, f.defKey[key], key, false)
		s, _ := f.Host(p.Host)
		st, _ := s.Proc(key)
		assert.Equal(t, model.ProcStopped, st.State)
	}
}

func TestControlLatencyFailuresRestore(t *testing.T) {
	f := New(quiet(20))
	defer f.Close()
	ctx := context.Background()
	hs := allHosts(f)[:1]
	h := hs[0].Host
	p := inline("app")
	dispatch(t, f, h, model.OpStart, p)
	one := 1.0
	_, err := f.Control(ctx, model.SimChange{Action: model.SimFailures, Rate: &one}, hs, "")
	require.NoError(t, err)
	r := dispatch(t, f, h, model.OpRestart, p)
	assert.NotEqual(t, model.CodeSuccess, r.Code, "every command fails at rate 1")
	_, err = f.Control(ctx, model.SimChange{Action: model.SimLatency, LatencyMS: 200}, hs, "")
	require.NoError(t, err)
	start := time.Now()
	dispatch(t, f, h, model.OpStatus, p)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "the host answers slowly")
	_, err = f.Control(ctx, model.SimChange{Action: model.SimRestore}, hs, "")
	require.NoError(t, err)
	r = dispatch(t, f, h, model.OpRestart, p)
	assert.Equal(t, model.CodeSuccess, r.Code, "restored to the quiet profile")
}

func TestControlSkipsHostsItDoesNotSimulate(t *testing.T) {
	f := New(quiet(20))
	defer f.Close()
	out, err := f.Control(context.Background(), model.SimChange{Action: model.SimOffline},
		[]model.Target{{Host: model.Host{IP: "192.168.9.9"}}, allHosts(f)[0]}, "")
	require.NoError(t, err)
	assert.Equal(t, 1, out.Skipped)
	assert.Equal(t, 1, out.Selected)
	assert.Contains(t, out.Message, "1 real agents left alone")
}
