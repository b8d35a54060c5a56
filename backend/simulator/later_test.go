package simulator

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gseproc/backend/config"
	"gseproc/model"
)

// later is DispatchLaterTo's answer to one request to host h, waited for
// (the test fails if it does not come within a generous bound;
// TestDispatchLaterMany checks that none comes twice).
func later(t *testing.T, f *Fleet, ctx context.Context, deadline time.Time, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
	t.Helper()
	type answer struct {
		rep model.AgentReply
		err error
	}
	ch := make(chan answer, 2)
	require.True(t, laterTo(f, ctx, deadline, h, req, func(rep model.AgentReply, err error) { ch <- answer{rep, err} }), "taken")
	select {
	case a := <-ch:
		return a.rep, a.err
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
	return model.AgentReply{}, nil
}

// laterTo is DispatchLaterTo of host h, found by its address, answer
// called with a status of its own (the one DispatchLaterTo lends is used
// again once to returns).
func laterTo(f *Fleet, ctx context.Context, deadline time.Time, h model.Host, req model.AgentRequest, answer func(model.AgentReply, error)) bool {
	at, ok := f.lookup(h)
	if !ok {
		at = -1
	}
	return f.DispatchLaterTo(ctx, deadline, int(at), req, func(_ any, rep model.AgentReply, err error) {
		if rep.Status != nil {
			st := *rep.Status
			rep.Status = &st
		}
		answer(rep, err)
	}, nil)
}

// TestDispatchLaterAnswersAsDispatch: two fleets of one seed, one asked
// through Dispatch, the other through DispatchLaterTo, the same requests in
// the same order, give the same answers (codes, pids, outputs, states,
// errors), failures, offline and unreachable hosts included.
func TestDispatchLaterAnswersAsDispatch(t *testing.T) {
	cfg := quiet(300)
	cfg.Seed = 7
	cfg.FailureRate = 0.3
	cfg.OfflineRate = 0.05
	cfg.UnreachableRate = 0.05
	cfg.LatencyMedian = config.Duration(200 * time.Microsecond)
	cfg.LatencyP99 = config.Duration(time.Millisecond)
	a, b := New(cfg), New(cfg)
	defer a.Close()
	defer b.Close()
	def := a.Definitions()[0]
	line := func(rep model.AgentReply, err error) string {
		if err != nil {
			return err.Error()
		}
		st := "-"
		if rep.Status != nil {
			st = fmt.Sprintf("%s/%d/%t", rep.Status.State, rep.Status.PID, rep.Status.Hosted)
		}
		return fmt.Sprintf("%d %q %q %s", rep.Code, rep.Message, rep.Output, st)
	}
	var pa, pb []string
	kinds := map[string]bool{}
	for i := range 60 {
		h := model.Host{IP: hostIP(i%3, i/3).String(), CloudID: i % 3}
		snap, _ := a.Host(h)
		kinds[snap.Kind] = true
		// An offline host answers only at the deadline: a short one.
		timeout := 10 * time.Second
		if snap.Kind == "offline" {
			timeout = 5 * time.Millisecond
		}
		for _, op := range []model.OpType{model.OpStatus, model.OpStart, model.OpRestart, model.OpStatus, model.OpReload, model.OpStop, model.OpKill} {
			for _, p := range []model.Process{inline("x"), def.Process} {
				req := model.AgentRequest{Op: op, Process: p}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				rep, err := a.Dispatch(ctx, h, req)
				cancel()
				pa = append(pa, line(rep, err))
				pb = append(pb, line(later(t, b, context.Background(), time.Now().Add(timeout), h, req)))
			}
		}
	}
	assert.True(t, kinds["offline"] && kinds["unreachable"] && kinds["normal"], "hosts of every kind asked: %v", kinds)
	assert.Equal(t, pa, pb, "same seed, same requests: same answers")
}

// TestDispatchLaterTakes: what DispatchLaterTo leaves to Dispatch (a
// change run once per op id, a group, a tail, a cancel, any request once
// the fleet is closed) and a place the fleet has no host at are refused,
// answer not called; each answer's token is its request's.
func TestDispatchLaterTakes(t *testing.T) {
	f := New(quiet(4))
	h := model.Host{IP: "10.0.0.1"}
	never := func(model.AgentReply, error) { t.Error("answered a request not taken") }
	ctx := context.Background()
	for _, req := range []model.AgentRequest{
		{Op: model.OpStart, OpID: "op-1", Process: inline("x")},
		{Op: model.OpStart, Group: &model.ProcessGroup{}, Process: inline("x")},
		{Op: model.OpStatus, Tail: &model.TailRequest{}, Process: inline("x")},
		{Op: model.OpStart, OpID: "op-2", CancelOp: true, Process: inline("x")},
	} {
		assert.False(t, laterTo(f, ctx, time.Time{}, h, req, never), "%+v", req)
	}
	status := model.AgentRequest{Op: model.OpStatus, Process: inline("x")}
	neverTo := func(any, model.AgentReply, error) { t.Error("answered a request not taken") }
	assert.False(t, f.DispatchLaterTo(ctx, time.Time{}, -1, status, neverTo, nil), "no place -1")
	assert.False(t, f.DispatchLaterTo(ctx, time.Time{}, 4, status, neverTo, nil), "no place past the last")
	toks := make(chan any, 3)
	for tok := range 3 {
		require.True(t, f.DispatchLaterTo(ctx, time.Time{}, tok, status, func(got any, _ model.AgentReply, err error) {
			assert.NoError(t, err)
			toks <- got
		}, tok))
	}
	seen := map[any]bool{}
	for range 3 {
		select {
		case tok := <-toks:
			seen[tok] = true
		case <-time.After(30 * time.Second):
			t.Fatal("no answer")
		}
	}
	assert.Equal(t, map[any]bool{0: true, 1: true, 2: true}, seen, "each answer with its request's token")
	// A status (changes nothing) and an op without an op id are taken.
	_, err := later(t, f, ctx, time.Time{}, h, model.AgentRequest{Op: model.OpStatus, OpID: "op-3", Process: inline("x")})
	require.NoError(t, err)
	_, err = later(t, f, ctx, time.Time{}, h, model.AgentRequest{Op: model.OpStart, Process: inline("x")})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.False(t, laterTo(f, ctx, time.Time{}, h, model.AgentRequest{Op: model.OpStatus, Process: inline("x")}, never), "closed")
}

// TestDispatchLaterWaits: an answer comes after the host's latency; a
// deadline before the latency's end is answered DeadlineExceeded at the
// deadline, the op not applied; an offline host's request is answered
// DeadlineExceeded at its deadline; a ctx cancelled with
// model.ErrCancelled gets the stopped op, as from Dispatch.
func TestDispatchLaterWaits(t *testing.T) {
	cfg := quiet(4)
	cfg.LatencyMedian = config.Duration(15 * time.Millisecond)
	cfg.LatencyP99 = config.Duration(15 * time.Millisecond)
	f := New(cfg)
	defer f.Close()
	h := model.Host{IP: "10.0.0.1"}
	ctx := context.Background()
	start := time.Now()
	rep, err := later(t, f, ctx, time.Time{}, h, model.AgentRequest{Op: model.OpStart, Process: inline("x")})
	require.NoError(t, err)
	assert.Equal(t, model.CodeSuccess, rep.Code)
	assert.GreaterOrEqual(t, time.Since(start), 15*time.Millisecond, "the drawn latency is waited")

	cfg.LatencyMedian, cfg.LatencyP99 = config.Duration(time.Hour), config.Duration(time.Hour)
	g := New(cfg)
	defer g.Close()
	start = time.Now()
	_, err = later(t, g, ctx, time.Now().Add(20*time.Millisecond), h, model.AgentRequest{Op: model.OpStart, Process: inline("y")})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "answered at the deadline")
	snap, _ := g.Host(h)
	if st, ok := snap.Proc(inline("y").Key()); ok {
		assert.Equal(t, model.ProcStopped, st.State, "an op cut short is not applied")
	}

	// A cancel is seen when the answer is due: a latency short enough to
	// wait, long enough that a loaded machine cancels before it ends.
	cctx, cancel := context.WithCancelCause(ctx)
	h2 := model.Host{IP: "10.0.0.2"}
	done := make(chan model.AgentReply, 1)
	cfg.LatencyMedian, cfg.LatencyP99 = config.Duration(time.Second), config.Duration(time.Second)
	k := New(cfg)
	defer k.Close()
	require.True(t, laterTo(k, cctx, time.Time{}, h2, model.AgentRequest{Op: model.OpStart, Process: inline("z")}, func(rep model.AgentReply, err error) {
		assert.NoError(t, err)
		done <- rep
	}))
	cancel(model.ErrCancelled)
	select {
	case rep := <-done:
		assert.True(t, rep.Cancelled, "the op stopped, as Dispatch says it")
		assert.Equal(t, model.CodeCommandFailed, rep.Code)
		require.NotNil(t, rep.Status)
		assert.Equal(t, model.ProcStopped, rep.Status.State)
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}

	off := quiet(4)
	off.OfflineRate = 1
	o := New(off)
	defer o.Close()
	start = time.Now()
	_, err = later(t, o, ctx, time.Now().Add(30*time.Millisecond), h, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "an offline host is silent until the deadline")
}

// TestDispatchLaterMany: requests of many latencies, queued at once, are
// each answered once: counted per request once every one is answered and
// the fleet closed (its answering goroutine ended), not within a window.
func TestDispatchLaterMany(t *testing.T) {
	cfg := quiet(2000)
	cfg.LatencyMedian = config.Duration(5 * time.Millisecond)
	cfg.LatencyP99 = config.Duration(40 * time.Millisecond)
	f := New(cfg)
	defer f.Close()
	hosts, err := f.Hosts(context.Background())
	require.NoError(t, err)
	answers := make([]atomic.Int32, len(hosts))
	got := make(chan struct{}, len(hosts))
	for i, hi := range hosts {
		require.True(t, laterTo(f, context.Background(), time.Now().Add(time.Minute), hi.Host, model.AgentRequest{Op: model.OpStatus, Process: inline("x")},
			func(rep model.AgentReply, err error) {
				assert.NoError(t, err)
				assert.Equal(t, model.CodeSuccess, rep.Code)
				answers[i].Add(1)
				got <- struct{}{}
			}))
	}
	for range hosts {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("not every request answered")
		}
	}
	require.NoError(t, f.Close())
	for i := range answers {
		if n := answers[i].Load(); n != 1 {
			t.Fatalf("request %d answered %d times", i, n)
		}
	}
}

// TestDueAt: a time as a due time, counted from now; one too far off
// for a due time (a request's deadline in the year 9999) is the latest,
// not one wrapped into the past (which answered an offline host's
// request at once).
func TestDueAt(t *testing.T) {
	now := time.Now()
	q := laterQueue{epoch: now.Add(-time.Hour)}
	at := int64(time.Hour)
	for _, c := range []struct {
		name string
		t    time.Time
		want int64
	}{
		{"now", now, at},
		{"a second ahead", now.Add(time.Second), at + int64(time.Second)},
		{"a second ago", now.Add(-time.Second), at - int64(time.Second)},
		{"the year 9999", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), math.MaxInt64},
		{"just under the latest", now.Add(time.Duration(math.MaxInt64 - at)), math.MaxInt64},
	} {
		if got := q.dueAt(c.t, now); got != c.want {
			t.Errorf("%s: dueAt %d, want %d", c.name, got, c.want)
		}
	}
}
