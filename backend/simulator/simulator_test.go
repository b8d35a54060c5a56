package simulator

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gseproc/backend/config"
	"gseproc/model"
)

// quiet is a fleet with no latency, failures, offline hosts or crashes.
func quiet(hosts int) config.SimulatorConfig {
	return config.SimulatorConfig{Hosts: hosts, Seed: 42, Clouds: 3, Namespaces: []string{"web", "db", "cache", "batch", "gse"}}
}

// inline is a process no host was generated with, as the API sends one.
func inline(name string) model.Process {
	return model.Process{
		Meta: model.Meta{Namespace: "biz_2", Name: "/data/app/" + name},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: name, SetupPath: "/data/app", PidPath: "/data/app/" + name + ".pid"},
			Control:  model.Control{StartCmd: "./start.sh", StopCmd: "./stop.sh", RestartCmd: "./restart.sh", ReloadCmd: "./reload.sh"},
			Policy:   model.DefaultPolicy(), // as the engine sends it: what the definition left out has its default
		},
	}
}

func dispatch(t *testing.T, f *Fleet, h model.Host, op model.OpType, p model.Process) model.AgentReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := f.Dispatch(ctx, h, model.AgentRequest{TaskID: "GSETASK:20260101000000:1", Op: op, Process: p})
	require.NoError(t, err)
	require.NotNil(t, r.Status, "every reply carries the process status")
	return r
}

func TestOpsOnOneHost(t *testing.T) {
	f := New(quiet(10))
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	p := inline("svc")

	type want struct {
		code    int
		running bool
		hosted  bool
		newPID  bool // pid differs from the previous running pid
		samePID bool
	}
	steps := []struct {
		op   model.OpType
		want want
	}{
		{model.OpStatus, want{code: 0}},
		{model.OpStop, want{code: 829}},
		{model.OpKill, want{code: 829}},
		{model.OpReload, want{code: 829}},
		{model.OpUnregister, want{code: 829}},
		// A hosted process found not running is brought up by the
		// restart policy, as on the agent (model/opsem).
		{model.OpRegister, want{code: 0, running: true, hosted: true, newPID: true}},
		{model.OpRegister, want{code: 850, running: true, hosted: true, samePID: true}},
		{model.OpUnregister, want{code: 0, running: true, samePID: true}},
		{model.OpStop, want{code: 0}},
		{model.OpStart, want{code: 0, running: true, hosted: true, newPID: true}},
		{model.OpStart, want{code: 828, running: true, hosted: true, samePID: true}},
		{model.OpStatus, want{code: 0, running: true, hosted: true, samePID: true}},
		{model.OpReload, want{code: 0, running: true, hosted: true, samePID: true}},
		{model.OpRestart, want{code: 0, running: true, hosted: true, newPID: true}},
		{model.OpUnregister, want{code: 0, running: true, samePID: true}},
		{model.OpRestart, want{code: 0, running: true, newPID: true}}, // hosting unchanged
		{model.OpRegister, want{code: 0, running: true, hosted: true, samePID: true}},
		{model.OpStop, want{code: 0}},
		{model.OpStop, want{code: 829}},
		{model.OpStart, want{code: 0, running: true, hosted: true, newPID: true}},
		{model.OpKill, want{code: 0}},
		{model.OpRestart, want{code: 0, running: true, newPID: true}}, // restart of a stopped one starts it
		{model.OpType(5), want{code: 832, running: true, samePID: true}},
		{model.OpType(99), want{code: 832, running: true, samePID: true}},
	}
	lastPID := -1
	for n, s := range steps {
		t.Run(fmt.Sprintf("%02d_%s", n, s.op), func(t *testing.T) {
			r := dispatch(t, f, h, s.op, p)
			st := *r.Status
			assert.Equal(t, s.want.code, r.Code, "code (message %q)", r.Message)
			assert.NotEmpty(t, r.Message)
			assert.Equal(t, p.Key(), st.ProcKey)
			assert.Equal(t, "svc", st.ProcName)
			assert.Equal(t, s.want.hosted, st.Hosted, "hosted")
			if s.want.running {
				assert.Equal(t, model.ProcRunning, st.State)
				assert.Greater(t, st.PID, 1)
				assert.False(t, st.StartTime.IsZero())
				if s.want.newPID {
					assert.NotEqual(t, lastPID, st.PID, "new pid")
				}
				if s.want.samePID {
					assert.Equal(t, lastPID, st.PID, "same pid")
				}
				assert.Greater(t, st.CPU, 0.0)
				assert.Greater(t, st.Mem, 0.0)
				lastPID = st.PID
			} else {
				assert.Equal(t, model.ProcStopped, st.State)
				assert.Equal(t, -1, st.PID)
				assert.Zero(t, st.CPU)
				lastPID = -1
			}
			snap, ok := f.Host(h)
			require.True(t, ok)
			got, ok := snap.Proc(p.Key())
			if n == 0 {
				assert.False(t, ok, "a status query keeps no state for a process never seen")
				return
			}
			require.True(t, ok, "the host keeps the process")
			assert.Equal(t, st.PID, got.PID)
			assert.Equal(t, st.Hosted, got.Hosted)
		})
	}
	// Benign codes are the ones clients count as success.
	assert.True(t, model.Benign(model.OpUnregister, 829))
}

func TestDeployedProcessesStartFromGeneratedState(t *testing.T) {
	f := New(quiet(300))
	defs := f.Definitions()
	require.NotEmpty(t, defs)
	running, stopped := 0, 0
	for _, d := range defs[:4] {
		for _, h := range d.Hosts[:min(20, len(d.Hosts))] {
			snap, ok := f.Host(h)
			require.True(t, ok)
			before, ok := snap.Proc(d.Process.Key())
			require.True(t, ok, "%s deployed on %s", d.Process.Key(), h)
			r := dispatch(t, f, h, model.OpStatus, d.Process)
			assert.Equal(t, 0, r.Code)
			assert.Equal(t, before.PID, r.Status.PID, "status agrees with the snapshot")
			assert.Equal(t, before.Hosted, r.Status.Hosted)
			r = dispatch(t, f, h, model.OpStart, d.Process)
			if before.State == model.ProcRunning {
				running++
				assert.Equal(t, 828, r.Code)
				assert.False(t, before.StartTime.After(time.Now()))
			} else {
				stopped++
				assert.Equal(t, 0, r.Code)
			}
		}
	}
	assert.Greater(t, running, stopped, "most generated processes run")
}

func TestFailures(t *testing.T) {
	cfg := quiet(50)
	cfg.FailureRate = 1
	f := New(cfg)
	codes := map[int]int{}
	for i := range 50 {
		h := model.Host{IP: hostIP(i%3, i/3).String(), CloudID: i % 3}
		p := inline("app")
		r := dispatch(t, f, h, model.OpStart, p)
		codes[r.Code]++
		require.Contains(t, []int{836, 65535}, r.Code)
		assert.NotEmpty(t, r.Output, "failures carry command output")
		assert.NotEmpty(t, r.Message)
		if r.Code == 65535 {
			assert.Contains(t, r.Message, r.Output)
			assert.True(t, strings.HasPrefix(r.Message, "Script exit code non-zero"))
		}
		assert.Equal(t, model.ProcStopped, r.Status.State, "a failed start leaves it stopped")
		// Status, register and unregister run no command: they never fail.
		assert.Equal(t, 0, dispatch(t, f, h, model.OpStatus, p).Code)
		assert.Equal(t, 0, dispatch(t, f, h, model.OpRegister, p).Code)
		assert.Equal(t, 0, dispatch(t, f, h, model.OpUnregister, p).Code)
		// Precondition codes come first.
		assert.Equal(t, 829, dispatch(t, f, h, model.OpStop, p).Code)
	}
	assert.Positive(t, codes[836], "some starts fail to come up")
	assert.Positive(t, codes[65535], "some start commands fail")

	// A failing stop leaves the process running.
	d := f.Definitions()[0]
	for _, h := range d.Hosts {
		snap, _ := f.Host(h)
		if st, _ := snap.Proc(d.Process.Key()); st.State == model.ProcRunning {
			r := dispatch(t, f, h, model.OpStop, d.Process)
			assert.Equal(t, 65535, r.Code)
			assert.Equal(t, model.ProcRunning, r.Status.State)
			assert.Equal(t, st.PID, r.Status.PID)
			return
		}
	}
	t.Fatal("no running deployment found")
}

func TestStartWithoutCommand(t *testing.T) {
	f := New(quiet(3))
	p := inline("nocmd")
	p.Spec.Control.StartCmd = ""
	r := dispatch(t, f, model.Host{IP: "10.0.0.1"}, model.OpStart, p)
	assert.Equal(t, 65535, r.Code)
	assert.Contains(t, r.Output, "start_cmd")
}

func TestDeterminism(t *testing.T) {
	cfg := quiet(500)
	cfg.Seed = 7
	cfg.FailureRate = 0.3
	cfg.OfflineRate = 0.05
	cfg.UnreachableRate = 0.05
	a, b := New(cfg), New(cfg)

	ha, err := a.Hosts(context.Background())
	require.NoError(t, err)
	hb, err := b.Hosts(context.Background())
	require.NoError(t, err)
	require.Len(t, ha, 500)
	require.Len(t, hb, 500)
	for i := range ha {
		require.Equal(t, ha[i].Host, hb[i].Host)
		require.Equal(t, ha[i].Labels, hb[i].Labels)
		require.Equal(t, ha[i].State, hb[i].State)
	}
	da, db := a.Definitions(), b.Definitions()
	require.Equal(t, len(da), len(db))
	for i := range da {
		require.Equal(t, da[i].Process, db[i].Process)
		require.Equal(t, da[i].Hosts, db[i].Hosts)
	}

	pattern := func(f *Fleet) []string {
		var out []string
		for i := range 100 {
			h := model.Host{IP: hostIP(i%3, i/3).String(), CloudID: i % 3}
			// An offline host answers only at the deadline, so it gets a
			// short one; every other host a generous one, so a slow
			// machine cannot turn an answer into a timeout.
			timeout := 10 * time.Second
			if snap, ok := f.Host(h); ok && snap.Kind == "offline" {
				timeout = time.Millisecond
			}
			for _, op := range []model.OpType{model.OpStart, model.OpRestart, model.OpReload, model.OpStop, model.OpStart, model.OpKill} {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				r, err := f.Dispatch(ctx, h, model.AgentRequest{Op: op, Process: inline("x")})
				cancel()
				if err != nil {
					out = append(out, err.Error())
					continue
				}
				out = append(out, fmt.Sprintf("%d/%d/%s", r.Code, r.Status.PID, r.Output))
			}
		}
		return out
	}
	pa, pb := pattern(a), pattern(b)
	assert.Equal(t, pa, pb, "same seed, same calls: same answers")

	// Latency streams repeat too.
	cfg.LatencyMedian = config.Duration(40 * time.Millisecond)
	cfg.LatencyP99 = config.Duration(400 * time.Millisecond)
	a, b = New(cfg), New(cfg)
	for i := range 20 {
		assert.Equal(t, a.lat.draw(&a.hosts[i].rng), b.lat.draw(&b.hosts[i].rng))
	}

	// Another seed gives another fleet.
	cfg.Seed = 8
	c := New(cfg)
	dc := c.Definitions()
	same := true
	for i := range min(len(da), len(dc)) {
		same = same && slices.Equal(da[i].Hosts, dc[i].Hosts)
	}
	assert.False(t, same, "a different seed deploys differently")
}

func TestOfflineHostBlocksUntilDeadline(t *testing.T) {
	cfg := quiet(4)
	cfg.OfflineRate = 1
	f := New(cfg)
	h := model.Host{IP: "10.0.0.1"}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.Dispatch(ctx, h, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	snap, _ := f.Host(h)
	assert.Equal(t, "offline", snap.Kind)

	// SetOffline on a normal host, then back.
	g := New(quiet(4))
	g.SetOffline(h, true)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	_, err = g.Dispatch(ctx2, h, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	infos, _ := g.Hosts(context.Background())
	assert.Equal(t, model.AgentOffline, infos[0].State)
	g.SetOffline(h, false)
	assert.Equal(t, 0, dispatch(t, g, h, model.OpStatus, inline("x")).Code)

	// Bringing back a profile-offline host makes it answer.
	f.SetOffline(h, false)
	assert.Equal(t, 0, dispatch(t, f, h, model.OpStatus, inline("x")).Code)
}

func TestCancelledWhileWaitingLatency(t *testing.T) {
	cfg := quiet(2)
	cfg.LatencyMedian = config.Duration(time.Hour)
	cfg.LatencyP99 = config.Duration(time.Hour)
	f := New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := f.Dispatch(ctx, model.Host{IP: "10.0.0.1"}, model.AgentRequest{Op: model.OpStart, Process: inline("x")})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	snap, _ := f.Host(model.Host{IP: "10.0.0.1"})
	if st, ok := snap.Proc(inline("x").Key()); ok {
		assert.Equal(t, model.ProcStopped, st.State, "an op cut short is not applied")
	}

	cfg.LatencyMedian = config.Duration(15 * time.Millisecond)
	cfg.LatencyP99 = config.Duration(15 * time.Millisecond)
	f = New(cfg)
	start := time.Now()
	dispatch(t, f, model.Host{IP: "10.0.0.1"}, model.OpStatus, inline("x"))
	assert.GreaterOrEqual(t, time.Since(start), 15*time.Millisecond, "the drawn latency is waited")
}

func TestUnreachable(t *testing.T) {
	cfg := quiet(4)
	cfg.UnreachableRate = 1
	f := New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := f.Dispatch(ctx, model.Host{IP: "10.1.0.1", CloudID: 1}, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
	require.ErrorIs(t, err, model.ErrUnreachable)
	assert.NoError(t, ctx.Err(), "answered before the deadline")
	assert.Contains(t, err.Error(), "1:10.1.0.1")

	// A host the fleet does not have is unreachable too.
	g := New(quiet(4))
	for _, h := range []model.Host{{IP: "192.168.1.1"}, {IP: "10.0.0.1", CloudID: 9}, {IP: "not-an-ip"}, {IP: "::1"}} {
		_, err := g.Dispatch(ctx, h, model.AgentRequest{Op: model.OpStatus, Process: inline("x")})
		assert.ErrorIs(t, err, model.ErrUnreachable, "%v", h)
	}
}

func TestProfileRates(t *testing.T) {
	cfg := quiet(20000)
	cfg.OfflineRate = 0.1
	cfg.UnreachableRate = 0.05
	f := New(cfg)
	kinds := map[uint8]int{}
	for i := range f.hosts {
		kinds[f.hosts[i].kind]++
	}
	assert.InDelta(t, 0.10, float64(kinds[kindOffline])/20000, 0.01)
	assert.InDelta(t, 0.05, float64(kinds[kindUnreachable])/20000, 0.01)

	cfg = quiet(3000)
	cfg.FailureRate = 0.2
	f = New(cfg)
	failed := 0
	for i := range 3000 {
		h := model.Host{IP: hostIP(i%3, i/3).String(), CloudID: i % 3}
		if dispatch(t, f, h, model.OpStart, inline("x")).Code != 0 {
			failed++
		}
	}
	assert.InDelta(t, 0.2, float64(failed)/3000, 0.03, "failure rate honoured")
}

func TestLatencyDistribution(t *testing.T) {
	l := newLatency(40*time.Millisecond, 400*time.Millisecond)
	s := uint64(1)
	ds := make([]time.Duration, 20000)
	for i := range ds {
		ds[i] = l.draw(&s)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	med, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
	assert.InDelta(t, 40, float64(med)/1e6, 4, "median ms")
	assert.InDelta(t, 400, float64(p99)/1e6, 80, "p99 ms")
	assert.True(t, newLatency(0, 0).zero)
	z := newLatency(0, time.Second)
	assert.Zero(t, z.draw(&s))
}

func TestPoisson(t *testing.T) {
	s := uint64(3)
	for _, lambda := range []float64{0.5, 4, 200} {
		sum := 0
		for range 4000 {
			sum += poisson(&s, lambda)
		}
		assert.InDelta(t, lambda, float64(sum)/4000, lambda*0.1+0.05, "lambda %v", lambda)
	}
	assert.Zero(t, poisson(&s, 0))
}

func TestRunCrashesAndRestarts(t *testing.T) {
	cfg := quiet(6)
	cfg.Namespaces = []string{"web"}
	cfg.CrashRate = 600 // ten per second per process
	f := New(cfg)
	defer f.Close()

	// Make sure a known process is hosted and running.
	h := model.Host{IP: "10.0.0.1"}
	p := inline("crashy")
	r := dispatch(t, f, h, model.OpStart, p)
	require.Equal(t, 0, r.Code)
	pid0 := r.Status.PID

	events, stop := runEvents(f)
	defer stop()

	deadline := time.After(10 * time.Second)
	var got model.Event
	for got.ProcKey != p.Key() {
		select {
		case got = <-events:
			require.Contains(t, []model.EventKind{model.EventRestartSuccess, model.EventLimitExceeded}, got.Kind)
			require.NotEmpty(t, got.Message)
			require.False(t, got.Time.IsZero())
		case <-deadline:
			t.Fatal("no restart event for the hosted process within 10s")
		}
	}
	stop()
	assert.Equal(t, model.EventRestartSuccess, got.Kind, "failure rate 0: relaunches succeed")
	assert.Equal(t, h, got.Host)
	assert.Contains(t, got.Message, "restart it success")
	snap, _ := f.Host(h)
	st, _ := snap.Proc(p.Key())
	assert.Equal(t, model.ProcRunning, st.State)
	assert.NotEqual(t, pid0, st.PID, "brought back with a new pid")
	assert.GreaterOrEqual(t, st.Restarts, 1)
	assert.True(t, st.Hosted)

	// An unhosted process is never touched by Run.
	q := inline("loose")
	g := New(cfg)
	defer g.Close()
	require.Equal(t, 0, dispatch(t, g, h, model.OpStart, q).Code)
	require.Equal(t, 0, dispatch(t, g, h, model.OpUnregister, q).Code)
	pid := dispatch(t, g, h, model.OpStatus, q).Status.PID
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	g.Run(ctx2)
	st2 := dispatch(t, g, h, model.OpStatus, q).Status
	assert.Equal(t, pid, st2.PID)
	assert.Zero(t, st2.Restarts)
}

// runEvents runs f until stop (which waits for Run to return; a second
// call does nothing) and hands its events over on a channel; an event
// that finds 1024 waiting is dropped.
func runEvents(f *Fleet) (events <-chan model.Event, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan model.Event, 1024)
	f.SubscribeEvents(ctx, func(e model.Event) {
		select {
		case ch <- e:
		default:
		}
	})
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.Run(ctx) }()
	return ch, func() { cancel(); <-runDone }
}

// TestRunZeroRetriesGivesUpAtOnce: start_retries 0 given on purpose is 0
// (it used to become the default 4): a hosted process that crashes is
// given up at once, never restarted.
func TestRunZeroRetriesGivesUpAtOnce(t *testing.T) {
	cfg := quiet(6)
	cfg.Namespaces = []string{"web"}
	cfg.CrashRate = 600
	f := New(cfg)
	defer f.Close()
	h := model.Host{IP: "10.0.0.1"}
	p := inline("noretry")
	p.Spec.Policy.StartRetries = 0
	require.Equal(t, 0, dispatch(t, f, h, model.OpStart, p).Code)

	events, stop := runEvents(f)
	defer stop()
	deadline := time.After(10 * time.Second)
	var got model.Event
	for got.ProcKey != p.Key() || got.Kind == model.EventLimitExceeded {
		select {
		case got = <-events:
		case <-deadline:
			t.Fatal("no event for the hosted process within 10s")
		}
	}
	stop()
	assert.Equal(t, model.EventGiveUp, got.Kind, "start_retries 0: given up at the first crash, not restarted")
	st := dispatch(t, f, h, model.OpStatus, p).Status
	assert.Equal(t, model.ProcFatal, st.State)
	assert.Zero(t, st.Restarts)
}

func TestRunRestartFailedThenGiveUp(t *testing.T) {
	cfg := quiet(1)
	cfg.Namespaces = []string{"cache"}
	cfg.CrashRate = 600
	cfg.FailureRate = 1
	f := New(cfg)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan model.Event, EventBuffer)
	f.SubscribeEvents(ctx, func(e model.Event) { events <- e })
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.Run(ctx) }()
	failed := map[string]int{}
	var gaveUp model.Event
	for gaveUp.Kind == "" {
		select {
		case e := <-events:
			switch e.Kind {
			case model.EventRestartFailed:
				assert.Contains(t, e.Message, "restart it failed")
				failed[e.ProcKey]++
			case model.EventGiveUp:
				gaveUp = e
			case model.EventRestartSuccess:
				t.Errorf("relaunch succeeded at failure rate 1: %+v", e)
			}
		case <-ctx.Done():
			t.Fatal("no give-up event")
		}
	}
	cancel()
	<-runDone
	assert.Equal(t, model.DefaultStartRetries, failed[gaveUp.ProcKey], "gives up after start_retries failures")
	snap, _ := f.Host(gaveUp.Host)
	st, ok := snap.Proc(gaveUp.ProcKey)
	require.True(t, ok)
	// Given up as the agent gives up (model/opsem): FATAL, still hosted,
	// until an operator's start.
	assert.True(t, st.Hosted, "still hosted")
	assert.Equal(t, model.ProcFatal, st.State)
	assert.Equal(t, -1, st.PID)
}

func TestRunLimitExceeded(t *testing.T) {
	cfg := quiet(1)
	cfg.Namespaces = []string{"cache"}
	cfg.CrashRate = 600
	f := New(cfg)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan model.Event, 1)
	f.SubscribeEvents(ctx, func(e model.Event) {
		if e.Kind == model.EventLimitExceeded {
			select {
			case got <- e:
			default:
			}
		}
	})
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	select {
	case e := <-got:
		assert.Positive(t, e.Value)
		assert.Contains(t, e.Message, "exceeds its limit")
	case <-ctx.Done():
		t.Fatal("no limit event")
	}
}

func TestSlowSubscriberDoesNotBlockRun(t *testing.T) {
	cfg := quiet(200)
	cfg.CrashRate = 600
	f := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	f.SubscribeEvents(ctx, func(model.Event) { <-release }) // stuck
	var mu sync.Mutex
	fast := 0
	f.SubscribeEvents(ctx, func(model.Event) { mu.Lock(); fast++; mu.Unlock() })
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.Run(ctx) }()
	fastCount := func() int { mu.Lock(); defer mu.Unlock(); return fast }
	deadline := time.Now().Add(10 * time.Second)
	for (f.Dropped() == 0 || fastCount() <= EventBuffer) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Positive(t, f.Dropped(), "the stuck subscriber loses events")
	assert.Greater(t, fastCount(), EventBuffer, "the other subscriber keeps getting them")
	cancel()
	<-runDone
	close(release)
	f.Close() // waits for both delivery goroutines
	f.SubscribeEvents(context.Background(), func(model.Event) { t.Error("subscribed after Close") })
	f.emit(model.Event{})
}

func TestSetOfflineEmitsEvents(t *testing.T) {
	f := New(quiet(3))
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan model.Event, 4)
	f.SubscribeEvents(ctx, func(e model.Event) { ch <- e })
	h := model.Host{IP: "10.1.0.1", CloudID: 1}
	f.SetOffline(h, true)
	f.SetOffline(h, true) // no change, no event
	f.SetOffline(h, false)
	for _, want := range []model.EventKind{model.EventAgentOffline, model.EventAgentOnline} {
		select {
		case e := <-ch:
			assert.Equal(t, want, e.Kind)
			assert.Equal(t, h.AgentID(), e.Host.AgentID())
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
}

func TestDefinitionsValidate(t *testing.T) {
	cfg := quiet(300)
	cfg.Namespaces = append(cfg.Namespaces, "payments")
	cfg.Demo = true
	f := New(cfg)
	defs := f.Definitions()
	keys := map[string]bool{}
	autos := map[model.AutoType]int{}
	nss := map[string]bool{}
	for _, d := range defs {
		p := d.Process
		require.NoError(t, p.Validate(p.Key()))
		assert.False(t, keys[p.Key()], "duplicate %s", p.Key())
		keys[p.Key()] = true
		nss[p.Meta.Namespace] = true
		autos[p.Spec.Policy.AutoType]++
		assert.NotEmpty(t, d.Hosts, "%s is deployed somewhere", p.Key())
		assert.NotEmpty(t, p.Meta.Labels["app"])
		assert.Contains(t, []string{"prod", "staging", "test"}, p.Meta.Labels["env"])
		assert.Equal(t, p.Spec.Identity.ProcName, p.Meta.Labels["proc_name"])
		assert.NotEmpty(t, p.Spec.Control.StartCmd)
		assert.NotEmpty(t, p.Spec.Control.StopCmd)
		if p.Meta.Labels["env"] != "test" { // the documents' proc-test has no limits
			assert.Positive(t, p.Spec.Resource.CPU)
			assert.Positive(t, p.Spec.Resource.Mem)
		}
		if p.Spec.Policy.AutoType == model.AutoPeriodic {
			assert.Positive(t, p.Spec.Policy.CycleTime)
		}
		for _, h := range d.Hosts {
			var v model.Validator
			h.Validate(&v, "host")
			require.NoError(t, v.Err())
			_, ok := f.lookup(h)
			require.True(t, ok)
		}
	}
	assert.Positive(t, autos[model.AutoResident])
	assert.Positive(t, autos[model.AutoPeriodic])
	assert.Positive(t, autos[model.AutoOneShot])
	assert.Greater(t, autos[model.AutoResident], autos[model.AutoPeriodic]+autos[model.AutoOneShot])
	for _, ns := range cfg.Namespaces {
		assert.True(t, nss[ns], "namespace %s has definitions", ns)
	}
	// Definitions returns copies of the labels.
	defs[0].Process.Meta.Labels["app"] = "changed"
	assert.NotEqual(t, "changed", f.Definitions()[0].Process.Meta.Labels["app"])
}

func TestHostsInventory(t *testing.T) {
	f := New(quiet(300))
	hs, err := f.Hosts(context.Background())
	require.NoError(t, err)
	require.Len(t, hs, 300)
	clouds := map[int]int{}
	seen := map[string]bool{}
	for _, h := range hs {
		clouds[h.Host.CloudID]++
		assert.False(t, seen[h.Host.AgentID()], "duplicate %s", h.Host)
		seen[h.Host.AgentID()] = true
		assert.True(t, strings.HasPrefix(h.Host.IP, fmt.Sprintf("10.%d.", h.Host.CloudID)), h.Host.IP)
		for _, k := range []string{"zone", "os", "rack", "role"} {
			assert.NotEmpty(t, h.Labels[k], k)
		}
		assert.Equal(t, model.AgentOnline, h.State)
	}
	assert.Equal(t, map[int]int{0: 100, 1: 100, 2: 100}, clouds)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.Hosts(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestHostLabelsInto: a host list's labels (HostsUnlabelled, then
// HostLabelsInto each host's into one map) are Hosts' labels, host by
// host, demo hosts too; a map Hosts gave is the caller's.
func TestHostLabelsInto(t *testing.T) {
	cfg := quiet(300)
	cfg.Demo = true
	f := New(cfg)
	ctx := context.Background()
	hs, err := f.Hosts(ctx)
	require.NoError(t, err)
	bare, err := f.HostsUnlabelled(ctx)
	require.NoError(t, err)
	require.Len(t, bare, len(hs))
	m := map[string]string{"stale": "x"}
	for i, h := range hs {
		assert.Nil(t, bare[i].Labels)
		bare[i].Labels = h.Labels
		assert.Equal(t, h, bare[i])
		f.HostLabelsInto(i, m)
		assert.Equal(t, h.Labels, m, h.Host.String())
		assert.Len(t, m, 5)
	}
	assert.Equal(t, "r001", hs[0].Labels["rack"])
	f.HostLabelsInto(len(hs), m)
	assert.Empty(t, m)
	hs[0].Labels["rack"] = "changed"
	again, err := f.Hosts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "r001", again[0].Labels["rack"])
}

// TestOwns: the fleet owns the hosts Hosts lists, as Hosts spells them,
// and no other.
func TestOwns(t *testing.T) {
	cfg := quiet(300)
	cfg.Demo = true
	f := New(cfg)
	hs, err := f.Hosts(context.Background())
	require.NoError(t, err)
	for _, h := range hs {
		assert.True(t, f.Owns(h.Host), h.Host.String())
	}
	for _, h := range []model.Host{{IP: "10.0.0.1", CloudID: 9}, {IP: "10.9.9.9"}, {IP: "::ffff:" + hs[0].Host.IP, CloudID: hs[0].Host.CloudID}, {IP: "not an ip"}} {
		assert.False(t, f.Owns(h), h.String())
	}
}

func TestDemo(t *testing.T) {
	cfg := quiet(5)
	cfg.Demo = true
	cfg.FailureRate = 1
	cfg.OfflineRate = 0.5
	cfg.UnreachableRate = 0.5
	f := New(cfg)
	demo := []model.Host{{IP: "10.0.0.1", CloudID: 0}, {IP: "10.0.0.1", CloudID: 1}, {IP: "127.0.0.1"}}
	for _, h := range demo {
		snap, ok := f.Host(h)
		require.True(t, ok, "%s exists", h)
		assert.Equal(t, "normal", snap.Kind)
		assert.Equal(t, h, snap.Host)
	}
	want := []model.Host{demo[0], demo[1], demo[2]}
	var names []string
	for _, d := range f.Definitions() {
		if d.Process.Meta.Namespace != "gse" || !strings.HasPrefix(d.Process.Meta.Name, "proc-test") {
			continue
		}
		names = append(names, d.Process.Meta.Name)
		id := d.Process.Spec.Identity
		assert.Equal(t, "/data/gsetest/", id.SetupPath)
		assert.Equal(t, "root", id.User)
		assert.Equal(t, 20, d.Process.Spec.Policy.StartInterval)
		assert.Equal(t, "/data/gsetest/"+id.ProcName+".pid", id.PidPath)
		assert.Equal(t, "./start.sh", d.Process.Spec.Control.StartCmd)
		assert.Equal(t, d.Process.Meta.Name, d.Process.Meta.Labels["proc_name"])
		assert.ElementsMatch(t, want, d.Hosts)
	}
	assert.ElementsMatch(t, []string{"proc-test", "proc-test-1"}, names)

	// The documents' examples succeed whatever the failure profile: the
	// meta form on a deployed process and an inline process_infos entry.
	var procTest model.Process
	for _, d := range f.Definitions() {
		if d.Process.Key() == "gse:proc-test" {
			procTest = d.Process
		}
	}
	for _, h := range demo[:2] {
		for _, op := range model.AllOps() {
			r := dispatch(t, f, h, op, procTest)
			assert.True(t, model.Benign(op, r.Code), "%s %s: code %d %s", h, op, r.Code, r.Message)
			r = dispatch(t, f, h, op, inline("nginx"))
			assert.True(t, model.Benign(op, r.Code), "%s %s inline: code %d %s", h, op, r.Code, r.Message)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	base := config.Default().Simulator
	tests := []struct {
		name  string
		mod   func(*config.SimulatorConfig)
		field string
	}{
		{"failure", func(c *config.SimulatorConfig) { c.FailureRate = 1.5 }, "simulator.failure_rate: 1.5 is out of range [0,1]"},
		{"failure nan", func(c *config.SimulatorConfig) { c.FailureRate = math.NaN() }, "simulator.failure_rate"},
		{"offline", func(c *config.SimulatorConfig) { c.OfflineRate = -0.1 }, "simulator.offline_rate"},
		{"unreachable", func(c *config.SimulatorConfig) { c.UnreachableRate = 2 }, "simulator.unreachable_rate"},
		{"sum", func(c *config.SimulatorConfig) { c.OfflineRate, c.UnreachableRate = 0.6, 0.6 }, "offline_rate + unreachable_rate"},
		{"crash", func(c *config.SimulatorConfig) { c.CrashRate = -1 }, "simulator.crash_rate"},
		{"hosts", func(c *config.SimulatorConfig) { c.Hosts = -3 }, "simulator.hosts"},
		{"hosts big", func(c *config.SimulatorConfig) { c.Hosts = 2_000_000 }, "simulator.hosts"},
		{"clouds", func(c *config.SimulatorConfig) { c.Clouds = 300 }, "simulator.clouds"},
		{"ns empty", func(c *config.SimulatorConfig) { c.Namespaces = []string{"web", " "} }, "simulator.namespaces[1]"},
		{"ns colon", func(c *config.SimulatorConfig) { c.Namespaces = []string{"a:b"} }, "simulator.namespaces[0]"},
		{"ns dup", func(c *config.SimulatorConfig) { c.Namespaces = []string{"web", "web"} }, "listed twice"},
		{"median", func(c *config.SimulatorConfig) { c.LatencyMedian = -1 }, "simulator.latency_median"},
		{"p99", func(c *config.SimulatorConfig) {
			c.LatencyMedian, c.LatencyP99 = config.Duration(time.Second), config.Duration(time.Millisecond)
		}, "simulator.latency_p99"},
	}
	require.NoError(t, base.Validate())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mod(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
			_, err = NewChecked(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.field)
			assert.Panics(t, func() { New(c) })
		})
	}
	// Several bad fields are all reported.
	c := base
	c.FailureRate, c.CrashRate = 3, -2
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failure_rate")
	assert.Contains(t, err.Error(), "crash_rate")
}

// TestDefaultsOnce: the fleet's defaults are the config's, applied once
// (config.Default, which config.Load fills): the default config is a
// usable fleet, a zero one is refused with its fields named instead of
// defaulted a second time, and a zero seed stays meaningful (it draws one).
func TestDefaultsOnce(t *testing.T) {
	d := config.Default().Simulator
	d.Seed = 1
	f := New(d)
	assert.Equal(t, 300, f.Len())
	assert.NotEmpty(t, f.Definitions())
	assert.Equal(t, int64(1), f.Seed())
	d.Seed = 0
	g := New(d)
	assert.NotZero(t, g.Seed(), "seed 0 draws one")
	_, err := NewChecked(config.SimulatorConfig{Seed: 1})
	require.Error(t, err)
	for _, field := range []string{"simulator.hosts", "simulator.clouds", "simulator.namespaces"} {
		assert.Contains(t, err.Error(), field)
	}
}

func TestHundredThousandHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("large fleet")
	}
	cfg := quiet(100_000)
	cfg.Clouds = 1 // addresses carry past 10.0.255.254
	f := New(cfg)
	require.Equal(t, 100_000, f.Len())
	last := model.Host{IP: hostIP(0, 99_999).String()}
	assert.Equal(t, "10.1.137.178", last.IP)
	assert.Equal(t, 0, dispatch(t, f, last, model.OpStatus, inline("x")).Code)
	snap, ok := f.Host(last)
	require.True(t, ok)
	assert.NotEmpty(t, snap.Procs)
}

func TestConcurrentUse(t *testing.T) {
	cfg := quiet(50)
	cfg.CrashRate = 120
	cfg.FailureRate = 0.1
	f := New(cfg)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.SubscribeEvents(ctx, func(model.Event) {})
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.Run(ctx) }()
	var defs []model.ProcessDef
	for _, d := range f.Definitions() {
		if len(d.Hosts) > 0 { // a small fleet may not have every definition deployed
			defs = append(defs, d)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				d := defs[(g+i)%len(defs)]
				h := d.Hosts[i%len(d.Hosts)]
				op := model.AllOps()[(g*7+i)%len(model.AllOps())]
				c, cc := context.WithTimeout(ctx, time.Second)
				r, err := f.Dispatch(c, h, model.AgentRequest{Op: op, Process: d.Process})
				cc()
				switch {
				case err != nil: // the fleet has no offline host and no latency
					t.Errorf("dispatch %s to %s: %v", op, h, err)
				case r.Status == nil:
					t.Error("reply without status")
				}
				if i%50 == 0 {
					if _, ok := f.Host(h); !ok {
						t.Errorf("host %s unknown", h)
					}
					if hs, err := f.Hosts(ctx); err != nil || len(hs) != f.Len() {
						t.Errorf("hosts: %d of %d, %v", len(hs), f.Len(), err)
					}
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	<-runDone
}

func TestStatusFieldsAreCoherent(t *testing.T) {
	f := New(quiet(30))
	for _, d := range f.Definitions() {
		for _, h := range d.Hosts[:1] {
			st := dispatch(t, f, h, model.OpStatus, d.Process).Status
			if st.State == model.ProcRunning {
				assert.LessOrEqual(t, st.CPU, d.Process.Spec.Resource.CPU, "cpu within its limit")
				assert.LessOrEqual(t, st.Mem, d.Process.Spec.Resource.Mem, "mem within its limit")
				assert.Positive(t, st.MemRSS)
				assert.True(t, strings.HasSuffix(st.Cmdline, "/"+d.Process.Spec.Identity.ProcName))
				assert.NotEmpty(t, st.Version)
				assert.True(t, st.StartTime.Before(time.Now()))
				assert.Positive(t, st.PID, "GSE's status content reads it")
			}
		}
	}
}

func ExampleFleet_Dispatch() {
	d := config.Default().Simulator
	f := New(config.SimulatorConfig{Hosts: 10, Seed: 1, Demo: true, Clouds: d.Clouds, Namespaces: d.Namespaces})
	h := model.Host{IP: "10.0.0.1", CloudID: 1}
	var proc model.Process
	for _, d := range f.Definitions() {
		if d.Process.Key() == "gse:proc-test" {
			proc = d.Process
		}
	}
	ctx := context.Background()
	for _, op := range []model.OpType{model.OpStop, model.OpStop, model.OpStart, model.OpRegister} {
		r, err := f.Dispatch(ctx, h, model.AgentRequest{Op: op, Process: proc})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(op, r.Code, r.Status.State, r.Status.Hosted)
	}
	// Output:
	// stop 0 stopped false
	// stop 829 stopped false
	// start 0 running true
	// register 850 running true
}

func TestConfigFromTOML(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	cfg, err := config.Load(write("ok.toml", `
[simulator]
hosts = 1200
seed = 99
clouds = 2
namespaces = ["web", "payments"]
demo = true
latency_median = "5ms"
latency_p99 = "50ms"
failure_rate = 0.02
offline_rate = 0.01
unreachable_rate = 0.01
crash_rate = 0.5
`))
	require.NoError(t, err)
	require.Empty(t, cfg.Warnings)
	s := cfg.Simulator
	assert.Equal(t, 1200, s.Hosts)
	assert.Equal(t, int64(99), s.Seed)
	assert.Equal(t, 2, s.Clouds)
	assert.Equal(t, []string{"web", "payments"}, s.Namespaces)
	assert.True(t, s.Demo)
	assert.Equal(t, 5*time.Millisecond, s.LatencyMedian.D())
	assert.Equal(t, 50*time.Millisecond, s.LatencyP99.D())
	assert.Equal(t, 0.02, s.FailureRate)
	assert.Equal(t, 0.5, s.CrashRate)
	f := New(s)
	assert.Equal(t, 1202, f.Len(), "demo adds 1:10.0.0.1 and 0:127.0.0.1")

	_, err = config.Load(write("bad.toml", "[simulator]\nfailure_rate = 1.5\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "simulator.failure_rate: 1.5 is out of range [0,1]")

	// Defaults with no [simulator] section at all.
	cfg, err = config.Load(write("empty.toml", ""))
	require.NoError(t, err)
	assert.Equal(t, 300, cfg.Simulator.Hosts)
	assert.Equal(t, 3, cfg.Simulator.Clouds)
	assert.Equal(t, 40*time.Millisecond, cfg.Simulator.LatencyMedian.D())
}

// TestOpIDRunsOnce: a simulated host runs an op id once, like a real
// agent: a repeat answers the recorded code with the status now.
func TestOpIDRunsOnce(t *testing.T) {
	f := New(quiet(10))
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	p := inline("svc")
	send := func(op model.OpType, id string) model.AgentReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := f.Dispatch(ctx, h, model.AgentRequest{TaskID: "T", OpID: id, Op: op, Process: p})
		require.NoError(t, err)
		require.NotNil(t, r.Status)
		return r
	}
	first := send(model.OpStart, "T1/0:10.0.0.1/x")
	require.Equal(t, model.CodeSuccess, first.Code)
	again := send(model.OpStart, "T1/0:10.0.0.1/x")
	require.Equal(t, model.CodeSuccess, again.Code, "a repeat answers the recorded outcome, not 828")
	require.Equal(t, first.Status.PID, again.Status.PID)
	require.Equal(t, model.CodeAlreadyRunning, send(model.OpStart, "T2/0:10.0.0.1/x").Code, "another op id is another op")
	restarted := send(model.OpRestart, "T3/0:10.0.0.1/x")
	require.Equal(t, model.CodeSuccess, restarted.Code)
	require.NotEqual(t, first.Status.PID, restarted.Status.PID)
	again = send(model.OpRestart, "T3/0:10.0.0.1/x")
	require.Equal(t, restarted.Status.PID, again.Status.PID, "a repeated restart restarts nothing")
	// Status is never recorded: it tells the state now.
	stopped := send(model.OpStop, "T4/0:10.0.0.1/x")
	require.Equal(t, model.CodeSuccess, stopped.Code)
	st := send(model.OpStatus, "T5/0:10.0.0.1/x")
	require.Equal(t, model.ProcStopped, st.Status.State)
	st = send(model.OpStatus, "T5/0:10.0.0.1/x")
	require.Equal(t, model.ProcStopped, st.Status.State)
}

// TestProcessGroupTaken: a simulated agent takes a process group as a real
// one does (model.ProcessGroup.Validate): a bad one refused with its
// fields named, a good one taken.
func TestProcessGroupTaken(t *testing.T) {
	f := New(quiet(10))
	h := model.Host{IP: "10.0.0.1"}
	ctx := context.Background()
	r, err := f.Dispatch(ctx, h, model.AgentRequest{Group: &model.ProcessGroup{Namespace: "web", Resource: model.GroupResource{CPUPoolLimit: -1}}})
	require.NoError(t, err)
	assert.Equal(t, model.CodeCommandFailed, r.Code)
	assert.Contains(t, r.Message, "process_group.resource.cpu_pool_limit")
	r, err = f.Dispatch(ctx, h, model.AgentRequest{Group: &model.ProcessGroup{Namespace: "web", Resource: model.GroupResource{CPUPoolLimit: 50}}})
	require.NoError(t, err)
	assert.Equal(t, model.CodeSuccess, r.Code, r.Message)
}

// TestHostCounts: the counts the status bar gets without a listing are
// those of the listing, with the profile's offline hosts and hosts taken
// offline by hand.
func TestHostCounts(t *testing.T) {
	cfg := quiet(2000)
	cfg.OfflineRate = 0.02
	f := New(cfg)
	defer f.Close()
	ctx := context.Background()
	hosts, _ := f.Hosts(ctx)
	for _, h := range hosts[:5] {
		f.SetOffline(h.Host, true)
	}
	hosts, err := f.Hosts(ctx)
	require.NoError(t, err)
	online := 0
	for _, h := range hosts {
		if h.State == model.AgentOnline {
			online++
		}
	}
	total, on, err := f.HostCounts(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(hosts), total)
	assert.Equal(t, online, on)
	assert.Less(t, on, total-5, "the profile's offline hosts and the five taken offline")
}

// TestHugeRetriesStayHuge: a start_retries past int32 (valid: only >= 0
// is asked) restarts as often as int32 allows; it used to wrap to 0
// retries (given up at the first crash, where the agent restarts it) or
// to a negative (the deployment's default).
func TestHugeRetriesStayHuge(t *testing.T) {
	cfg := quiet(6)
	cfg.Namespaces = []string{"web"}
	f := New(cfg)
	defer f.Close()
	h := model.Host{IP: "10.0.0.1"}
	for _, n := range []int{0, 3, math.MaxInt32 - 1, math.MaxInt32, 1 << 32, math.MaxInt} {
		p := inline("huge")
		p.Spec.Policy.StartRetries = n
		code := dispatch(t, f, h, model.OpStart, p).Code // the definition it carries wins, running already or not
		require.Contains(t, []int{model.CodeSuccess, model.CodeAlreadyRunning}, code)
		i, ok := f.lookup(h)
		require.True(t, ok)
		sh := &f.hosts[i]
		sh.mu.Lock()
		got := f.policy(sh.find(p.Key())).Retries
		sh.mu.Unlock()
		assert.Equal(t, min(n, math.MaxInt32-1), got, "start_retries %d", n)
	}
}

// TestHostsAtMostMaxProcs: a simulated host knows at most f.maxProcs
// process definitions (model.MaxHostProcs, lowered here), as an agent:
// an op on one more is refused naming the limit and stores nothing; the
// processes it knows keep working.
func TestHostsAtMostMaxProcs(t *testing.T) {
	f := New(quiet(10))
	h := model.Host{IP: "10.0.0.1", CloudID: 0}
	snap, ok := f.Host(h)
	require.True(t, ok)
	deployed := len(snap.Procs)
	require.Positive(t, deployed, "the host has deployments")
	f.maxProcs = deployed + 1

	wantCode := func(r model.AgentReply, code int, what string) {
		t.Helper()
		require.Equal(t, code, r.Code, "%s: %s", what, r.Message)
	}
	wantCode(dispatch(t, f, h, model.OpStart, inline("a")), model.CodeSuccess, "start a")
	for _, op := range []model.OpType{model.OpStart, model.OpRegister, model.OpStop} {
		r := dispatch(t, f, h, op, inline("b"))
		wantCode(r, model.CodeCommandFailed, op.String()+" b past the bound")
		assert.Contains(t, r.Message, "process(biz_2:/data/app/b)")
		assert.Contains(t, r.Message, fmt.Sprintf("(%d, model.MaxHostProcs)", deployed+1))
		assert.False(t, r.Status.Hosted)
		assert.Equal(t, int32(-1), int32(r.Status.PID))
	}
	snap, _ = f.Host(h)
	require.Len(t, snap.Procs, deployed+1, "the refused definition is not kept")
	for _, st := range snap.Procs {
		assert.NotEqual(t, "biz_2:/data/app/b", st.ProcKey)
	}
	// What the host knows keeps working: the inline process and a
	// deployment.
	wantCode(dispatch(t, f, h, model.OpStop, inline("a")), model.CodeSuccess, "stop a")
	wantCode(dispatch(t, f, h, model.OpStart, inline("a")), model.CodeSuccess, "start a again")
	d := f.defs[f.defKey[snap.Procs[0].ProcKey]].proc
	if snap.Procs[0].ProcKey == "biz_2:/data/app/a" {
		d = f.defs[f.defKey[snap.Procs[1].ProcKey]].proc
	}
	wantCode(dispatch(t, f, h, model.OpRestart, d), model.CodeSuccess, "restart a deployment")
}

// TestListStatusesAreStatusesSlim: what a host list reads of a host
// (AppendListStatuses) is, process by process, what Statuses reports of
// it cut to ProcKey, State, PID, Hosted and ReportTime: for untouched
// deployments, ones an op stopped or started, ones crashed into backoff or
// given up, a process an op created, a key the host does not have, and a
// host taken offline (nothing).
func TestListStatusesAreStatusesSlim(t *testing.T) {
	f := New(quiet(300))
	now := time.Unix(1_790_000_000, 0)
	f.now = func() time.Time { return now }
	ctx := context.Background()
	defs := f.Definitions()
	extra := inline("svc")
	keys := []string{extra.Key(), "nope:none"}
	for _, d := range defs {
		keys = append(keys, d.Process.Key())
	}
	for n, d := range defs {
		for j, h := range d.Hosts {
			if j%7 != n%7 {
				continue
			}
			op := []model.OpType{model.OpStop, model.OpStart, model.OpRestart, model.OpStatus}[(n+j)%4]
			if _, err := f.Dispatch(ctx, h, model.AgentRequest{Op: op, Process: d.Process}); err != nil {
				t.Fatal(err)
			}
			if j%3 == 0 {
				i, _ := f.lookup(h)
				f.crash(i, f.defKey[d.Process.Key()], d.Process.Key(), j%2 == 0)
			}
		}
	}
	inv, err := f.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, hi := range inv {
		if k%5 == 0 {
			if _, err := f.Dispatch(ctx, hi.Host, model.AgentRequest{Op: model.OpStart, Process: extra}); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.SetOffline(inv[1].Host, true)
	states := map[model.ProcState]int{}
	for _, hi := range inv {
		want := map[string]model.ProcStatus{}
		for _, st := range f.Statuses(hi.Host) {
			want[st.ProcKey] = model.ProcStatus{ProcKey: st.ProcKey, State: st.State, PID: st.PID, Hosted: st.Hosted, ReportTime: st.ReportTime}
		}
		got := map[string]model.ProcStatus{}
		for _, st := range f.AppendListStatuses(nil, hi.Host, keys) {
			if _, dup := got[st.ProcKey]; dup {
				t.Fatalf("%v: %s twice", hi.Host, st.ProcKey)
			}
			got[st.ProcKey] = st
			states[st.State]++
		}
		assert.Equal(t, want, got, "host %v", hi.Host)
	}
	assert.Empty(t, f.AppendListStatuses(nil, inv[1].Host, keys), "an offline host reports nothing")
	for _, s := range []model.ProcState{model.ProcRunning, model.ProcStopped, model.ProcBackoff} {
		assert.Positive(t, states[s], "some %s process among those compared (%v)", s, states)
	}
}
