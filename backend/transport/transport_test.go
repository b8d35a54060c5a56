package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/simulator"
	"gseproc/backend/store"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

var (
	_ engine.Dispatcher        = (*Dispatcher)(nil)
	_ engine.Inventory         = (*Dispatcher)(nil)
	_ engine.EventSource       = (*Dispatcher)(nil)
	_ engine.LabelSetInventory = (*Dispatcher)(nil)
	_ engine.Dispatcher        = (*Merged)(nil)
	_ engine.Inventory         = (*Merged)(nil)
	_ Fleet                    = (*simulator.Fleet)(nil)
	_ Onliner                  = (*Dispatcher)(nil)
)

// testNATS is the [nats] section of a test server: 127.0.0.1, a free port,
// JetStream in a temporary directory.
func testNATS(t testing.TB) config.NATSConfig {
	c := config.Default().NATS
	c.Listen = "127.0.0.1:-1"
	c.StoreDir = t.TempDir()
	return c
}

func startServer(t testing.TB, cfg config.NATSConfig, demo bool) *natsembed.Embedded {
	t.Helper()
	e, err := natsembed.StartEmbedded(cfg, natsembed.EmbeddedOptions{Demo: demo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func serverConn(t testing.TB, e *natsembed.Embedded) *nats.Conn {
	t.Helper()
	nc, err := e.Connect("test-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newDispatcher is a dispatcher on nc with o, OfflineAfter the config's
// default (the one place it lives) when o leaves it zero.
func newDispatcher(t testing.TB, nc *nats.Conn, o DispatcherOptions) *Dispatcher {
	t.Helper()
	if o.OfflineAfter == 0 {
		o.OfflineAfter = config.Default().NATS.OfflineAfter.D()
	}
	d, err := NewDispatcher(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// fakeAgent is an AgentHandler whose replies and events the test controls.
type fakeAgent struct {
	info   model.HostInfo
	handle func(ctx context.Context, req model.AgentRequest) model.AgentReply

	mu  sync.Mutex
	fns []func(model.Event)
	// running, when set, is told by handlers that hold an op (tests of
	// cancels).
	running chan struct{}
}

func (a *fakeAgent) Identity() model.HostInfo { return a.info }
func (a *fakeAgent) Handle(ctx context.Context, req model.AgentRequest) model.AgentReply {
	return a.handle(ctx, req)
}
func (a *fakeAgent) Statuses() []model.ProcStatus {
	return []model.ProcStatus{{ProcKey: "ns:p", State: model.ProcRunning, PID: 42, Hosted: true}}
}
func (a *fakeAgent) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	a.mu.Lock()
	a.fns = append(a.fns, fn)
	a.mu.Unlock()
}
func (a *fakeAgent) emit(e model.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, fn := range a.fns {
		fn(e)
	}
}

func echoAgent(h model.Host) *fakeAgent {
	return &fakeAgent{
		info: model.HostInfo{Host: h, Labels: map[string]string{"role": "web"}, Version: "test"},
		handle: func(_ context.Context, req model.AgentRequest) model.AgentReply {
			return model.AgentReply{Code: model.CodeSuccess, Message: "did " + req.Op.String() + " for " + req.TaskID,
				Status: &model.ProcStatus{ProcKey: req.Process.Key(), State: model.ProcRunning, PID: 7}}
		},
	}
}

// runAgent connects an agent to url and serves a until the test ends.
func runAgent(t testing.TB, url string, co ClientOptions, a AgentHandler, so ServeOptions) (*nats.Conn, context.CancelFunc) {
	t.Helper()
	co.URLs = url
	if co.MaxReconnectDelay == 0 {
		co.MaxReconnectDelay = 300 * time.Millisecond
	}
	nc, err := Connect(co, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeAgent(ctx, nc, a, so) }()
	t.Cleanup(func() {
		closedByTest := nc.IsClosed() // ServeAgent then says the connection closed
		cancel()
		if err := <-done; err != nil && !closedByTest {
			t.Errorf("ServeAgent: %v", err)
		}
		nc.Close()
	})
	return nc, cancel
}

// serveFleet connects to url as co says and serves f on it (ServeFleet)
// until the test ends: then the fleet is stopped, said to have stopped
// without error, and its connection closed.
func serveFleet(t testing.TB, url string, co ClientOptions, f Fleet, so ServeOptions) *nats.Conn {
	t.Helper()
	co.URLs = url
	nc, err := Connect(co, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeFleet(ctx, nc, f, so) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeFleet: %v", err)
		}
		nc.Close()
	})
	return nc
}

func eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hostState(d *Dispatcher, h model.Host) model.AgentState {
	hs, _ := d.Hosts(context.Background())
	for _, hi := range hs {
		if hi.Host == h {
			return hi.State
		}
	}
	return ""
}

var h1 = model.Host{IP: "10.0.0.1", CloudID: 0}

// mustID is h's identity; the test's hosts are canonical.
func mustID(t testing.TB, h model.Host) model.HostID {
	t.Helper()
	id, err := h.ID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestSubjects(t *testing.T) {
	for _, h := range []model.Host{h1, {IP: "192.168.1.20", CloudID: 7}, {IP: "fe80::1", CloudID: 2}} {
		id := mustID(t, h)
		got, err := hostFromSubject(HeartbeatSubject(id))
		if err != nil || got != id {
			t.Errorf("%s: subject %s parses back to %v, %v", h, HeartbeatSubject(id), got, err)
		}
	}
	if got := OpSubject(mustID(t, h1)); got != "gseproc.agent.0.10_0_0_1.op" {
		t.Errorf("OpSubject = %q", got)
	}
	for _, bad := range []string{"gseproc.agent.x.10_0_0_1.hb", "gseproc.agent.0.hb", "other.agent.0.10_0_0_1.hb", "gseproc.agent.0.nope.hb",
		// not canonical: the same host spelled otherwise
		"gseproc.agent.0.FE80--1.hb", "gseproc.agent.0.--ffff-10_0_0_1.hb", "gseproc.agent.00.10_0_0_1.hb",
		"gseproc.agent.0.fe80--1%eth0.hb"} {
		if _, err := hostFromSubject(bad); err == nil {
			t.Errorf("hostFromSubject(%q): no error", bad)
		}
	}
	// The longest identity's subject is MaxSubject long, far below NATS'
	// 4096-byte control line.
	longest := mustID(t, model.Host{IP: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", CloudID: model.MaxCloudID})
	if n := len(EventSubject(longest)); n > MaxSubject || MaxSubject > 256 {
		t.Errorf("longest subject %d bytes, MaxSubject %d", n, MaxSubject)
	}
}

// TestDispatcherRefusesUnsetOfflineAfter: the offline delay is the
// config's ([nats] offline_after), not defaulted again here.
func TestDispatcherRefusesUnsetOfflineAfter(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	if d, err := NewDispatcher(serverConn(t, e), DispatcherOptions{}); err == nil || !strings.Contains(err.Error(), "offline_after") {
		if d != nil {
			_ = d.Close()
		}
		t.Fatalf("zero OfflineAfter: %v, want refused naming offline_after", err)
	}
}

// TestBadHostIsPermanent: a host without a canonical identity is refused by
// Dispatch before anything reaches NATS, with ErrBadHost, and the
// connection stays usable (a 4,200-character zone used to close it).
func TestBadHostIsPermanent(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	nc := serverConn(t, e)
	d := newDispatcher(t, nc, DispatcherOptions{})
	bad := model.Host{IP: "fe80::1%" + strings.Repeat("z", 4200)}
	_, err := d.Dispatch(context.Background(), bad, model.AgentRequest{TaskID: "t"})
	if !errors.Is(err, ErrBadHost) {
		t.Fatalf("Dispatch(zone host) = %v, want ErrBadHost", err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("error echoes the whole input: %d bytes", len(err.Error()))
	}
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, echoAgent(h1), ServeOptions{HeartbeatInterval: time.Minute})
	eventually(t, "agent online", 10*time.Second, func() bool { return d.Online(h1) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Dispatch(ctx, h1, model.AgentRequest{TaskID: "t", Op: model.OpStatus}); err != nil {
		t.Fatalf("dispatch after the refused host: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatal("connection lost")
	}
}

func TestDispatchRoundTrip(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	// The agent is up before the server side: the hello makes it report at
	// once although its heartbeat interval is long.
	// Its first heartbeat follows its hello subscription: once it is seen,
	// the server has the subscription (a fixed sleep could be too short).
	watch := serverConn(t, e)
	first, err := watch.SubscribeSync(HeartbeatSubject(mustID(t, h1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, echoAgent(h1), ServeOptions{HeartbeatInterval: time.Minute})
	if _, err := first.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("first heartbeat: %v", err)
	}
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{Labels: map[string]string{"bk_biz_id": "1", "role": "x"}})
	eventually(t, "agent online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}
	rep, err := d.Dispatch(ctx, h1, model.AgentRequest{TaskID: "GSETASK:20260101000000:1", Op: model.OpStart, Process: p})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Code != 0 || rep.Message != "did start for GSETASK:20260101000000:1" || rep.Status == nil || rep.Status.ProcKey != "ns:p" {
		t.Fatalf("reply %+v", rep)
	}
	hs, _ := d.Hosts(ctx)
	if len(hs) != 1 || hs[0].Labels["bk_biz_id"] != "1" || hs[0].Labels["role"] != "web" || hs[0].Version != "test" || hs[0].LastSeen == 0 {
		t.Fatalf("hosts %+v: want the agent's labels over the dispatcher's", hs)
	}
	if st := d.Statuses(h1); len(st) != 1 || st[0].PID != 42 {
		t.Fatalf("statuses from heartbeat: %+v", st)
	}
}

func TestDispatchErrors(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	release := make(chan struct{})
	defer close(release)
	mute := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, _ model.AgentRequest) model.AgentReply {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return model.AgentReply{Code: 0}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{}, mute, ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agent online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })

	tests := []struct {
		name    string
		host    model.Host
		timeout time.Duration
		want    error
		early   bool // must return before the deadline
	}{
		{"no agent listening", model.Host{IP: "10.9.9.9", CloudID: 3}, 10 * time.Second, model.ErrUnreachable, true},
		{"agent does not answer", h1, 300 * time.Millisecond, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			_, err := d.Dispatch(ctx, tt.host, model.AgentRequest{Op: model.OpStatus})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.early && ctx.Err() != nil {
				t.Fatalf("returned only after the deadline")
			}
			if !strings.Contains(err.Error(), tt.host.String()) {
				t.Errorf("error %q does not name the host", err)
			}
		})
	}
}

func TestOnlineOffline(t *testing.T) {
	tests := []struct {
		name   string
		leave  bool // clean stop (leaving heartbeat) or silent loss
		reason string
	}{
		{"clean stop", true, "agent stopped"},
		{"heartbeats stop", false, "no heartbeat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := startServer(t, testNATS(t), true)
			// Heartbeats every 50 ms; offline after 3 s without one, so a
			// loaded machine's scheduling delays do not look like a loss.
			d := newDispatcher(t, serverConn(t, e), DispatcherOptions{OfflineAfter: 3 * time.Second,
				StaticHosts: []model.HostInfo{{Host: model.Host{IP: "10.0.0.99"}}}})
			var mu sync.Mutex
			var evs []model.Event
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			subscribeStored(ctx, d, func(e model.Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
			kinds := func() []model.EventKind {
				mu.Lock()
				defer mu.Unlock()
				var k []model.EventKind
				for _, e := range evs {
					k = append(k, e.Kind)
				}
				return k
			}
			if s := hostState(d, model.Host{IP: "10.0.0.99"}); s != model.AgentUnknown {
				t.Fatalf("static host state %q, want unknown", s)
			}
			nc, stop := runAgent(t, e.ClientURL(), ClientOptions{}, echoAgent(h1), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
			eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
			// Stays online across many heartbeats, for longer than OfflineAfter.
			time.Sleep(3500 * time.Millisecond)
			if s := hostState(d, h1); s != model.AgentOnline {
				t.Fatalf("state %q while heartbeating", s)
			}
			if tt.leave {
				stop()
			} else {
				nc.Close()
			}
			eventually(t, "offline", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOffline })
			eventually(t, "events", 15*time.Second, func() bool { return len(kinds()) == 2 })
			if k := kinds(); k[0] != model.EventAgentOnline || k[1] != model.EventAgentOffline {
				t.Fatalf("events %v", k)
			}
			mu.Lock()
			msg := evs[1].Message
			mu.Unlock()
			if !strings.Contains(msg, tt.reason) {
				t.Errorf("offline event %q, want it to say %q", msg, tt.reason)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{
		{User: "a1", Password: "secret", Host: "0:10.0.0.1"},
		{User: "sim", Password: "simpw", Role: config.NATSRoleSim, Hosts: []string{"1:*"}},
	}
	e := startServer(t, cfg, false)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})

	t.Run("wrong password", func(t *testing.T) {
		_, err := ConnectNow(ClientOptions{URLs: e.ClientURL(), User: "a1", Password: "nope"}, nil)
		if err == nil {
			t.Fatal("connected with a wrong password")
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		if _, err := ConnectNow(ClientOptions{URLs: e.ClientURL()}, nil); err == nil {
			t.Fatal("connected without credentials outside demo")
		}
	})
	t.Run("bound to its host", func(t *testing.T) {
		runAgent(t, e.ClientURL(), ClientOptions{User: "a1", Password: "secret"}, echoAgent(h1), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
		eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := d.Dispatch(ctx, h1, model.AgentRequest{Op: model.OpStatus}); err != nil {
			t.Fatal(err)
		}
		// The same credential cannot serve another host: the agent is told
		// so and stops, and the host stays unreachable.
		other := model.Host{IP: "10.0.0.2"}
		nc, err := ConnectNow(ClientOptions{URLs: e.ClientURL(), User: "a1", Password: "secret"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		err = ServeAgent(ctx, nc, echoAgent(other), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), OpSubject(mustID(t, other))) {
			t.Fatalf("serving another host: %v, want ErrRefused naming %s", err, OpSubject(mustID(t, other)))
		}
		if _, err := d.Dispatch(ctx, other, model.AgentRequest{Op: model.OpStatus}); !errors.Is(err, model.ErrUnreachable) {
			t.Fatalf("impostor answered for %s: %v", other, err)
		}
		if s := hostState(d, other); s == model.AgentOnline {
			t.Fatalf("impostor's heartbeat accepted")
		}
	})
	t.Run("sim credential serves its cloud area", func(t *testing.T) {
		h := model.Host{IP: "10.0.0.3", CloudID: 1}
		runAgent(t, e.ClientURL(), ClientOptions{User: "sim", Password: "simpw"}, echoAgent(h), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
		eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h) == model.AgentOnline })
	})
}

func TestUnboundAgentCredential(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{User: "a1", Password: "x", Host: "0:10.0.0.1"}, {User: "loose", Password: "y"}}
	_, err := natsembed.StartEmbedded(cfg, natsembed.EmbeddedOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "nats.users[1]") || !strings.Contains(err.Error(), `user "loose"`) {
		t.Fatalf("err = %v, want a refusal naming nats.users[1] (user \"loose\")", err)
	}
	// Under --demo (loopback) it is accepted and may serve any host.
	e := startServer(t, cfg, true)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	h := model.Host{IP: "10.9.9.9", CloudID: 4}
	runAgent(t, e.ClientURL(), ClientOptions{User: "loose", Password: "y"}, echoAgent(h), ServeOptions{HeartbeatInterval: 50 * time.Millisecond})
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h) == model.AgentOnline })
}

func TestDemoRequiresLoopback(t *testing.T) {
	cfg := testNATS(t)
	cfg.Listen = "0.0.0.0:-1"
	if _, err := natsembed.StartEmbedded(cfg, natsembed.EmbeddedOptions{Demo: true}, nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err = %v, want a loopback error", err)
	}
}

// TestReconnect: the server goes away, the agent keeps its events, and on
// reconnect publishes them and says so in a full heartbeat.
func TestReconnect(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	// The agent reaches the servers through a relay, so it can reach the
	// second one only once the test has subscribed to its events (core
	// NATS keeps no message nobody is subscribed to).
	rl := transporttest.NewRelay(t, e.ClientURL())
	a := echoAgent(h1)
	nc, _ := runAgent(t, rl.URL(), ClientOptions{MaxReconnectDelay: 200 * time.Millisecond}, a, ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventBuffer: 3})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })

	rl.Point("")
	e.Shutdown()
	eventually(t, "agent sees the server gone", 15*time.Second, func() bool { return !nc.IsConnected() })
	for i := range 5 { // 2 of them overflow the buffer of 3
		a.emit(model.Event{Host: h1, ProcKey: "ns:p", Kind: model.EventRestartSuccess, Message: fmt.Sprint("restart ", i)})
	}

	e2 := startServer(t, testNATS(t), true)
	d2 := newDispatcher(t, serverConn(t, e2), DispatcherOptions{})
	var mu sync.Mutex
	var evs []model.Event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribeStored(ctx, d2, func(e model.Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
	rl.Point(e2.ClientURL())
	eventually(t, "late events", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(evs) >= 4 })
	mu.Lock()
	defer mu.Unlock()
	var restarts []string
	var online string
	for _, e := range evs {
		switch e.Kind {
		case model.EventRestartSuccess:
			restarts = append(restarts, e.Message)
		case model.EventAgentOnline:
			online = e.Message
		}
	}
	if strings.Join(restarts, ",") != "restart 2,restart 3,restart 4" {
		t.Errorf("late events %q, want the last 3 in order", restarts)
	}
	if !strings.Contains(online, "3 events reported late, 2 dropped") {
		t.Errorf("online event %q, want the late/dropped counts", online)
	}
}

func TestServeFleet(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	f := simulator.New(config.SimulatorConfig{Hosts: 200, Seed: 7, Clouds: 2, Namespaces: config.Default().Simulator.Namespaces, UnreachableRate: 0.05, OfflineRate: 0.05})
	t.Cleanup(func() { _ = f.Close() })
	serveFleet(t, e.ClientURL(), ClientOptions{Name: "sim"}, f, ServeOptions{HeartbeatInterval: 100 * time.Millisecond})
	ctx := context.Background()
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	simHosts, _ := f.Hosts(ctx)
	var online, unreachable []model.Host
	for _, hi := range simHosts {
		snap, _ := f.Host(hi.Host)
		switch {
		case hi.State == model.AgentOnline:
			online = append(online, hi.Host)
		case snap.Kind == "unreachable":
			unreachable = append(unreachable, hi.Host)
		}
	}
	if len(online) == 0 || len(unreachable) == 0 {
		t.Fatalf("fleet has %d online, %d unreachable hosts; want some of each", len(online), len(unreachable))
	}
	countOnline := func() int {
		hs, _ := d.Hosts(ctx)
		n := 0
		for _, h := range hs {
			if h.State == model.AgentOnline {
				n++
			}
		}
		return n
	}
	eventually(t, "fleet online", 15*time.Second, func() bool { return countOnline() == len(online) })

	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	def := f.Definitions()[0]
	rep, err := d.Dispatch(dctx, def.Hosts[0], model.AgentRequest{Op: model.OpStatus, Process: def.Process})
	if snap, _ := f.Host(def.Hosts[0]); snap.Kind == "normal" && (err != nil || rep.Status == nil || rep.Status.ProcKey != def.Process.Key()) {
		t.Fatalf("status over NATS: %+v, %v", rep, err)
	}
	if _, err := d.Dispatch(dctx, unreachable[0], model.AgentRequest{Op: model.OpStatus, Process: def.Process}); !errors.Is(err, model.ErrUnreachable) {
		t.Fatalf("unreachable sim host: %v", err)
	}
	if dctx.Err() != nil {
		t.Fatal("unreachable sim host answered only at the deadline")
	}
	// A change with an op id is run once per id (the fleet's Dispatch,
	// on a goroutine of its own): the same answer again.
	if snap, _ := f.Host(def.Hosts[0]); snap.Kind == "normal" {
		req := model.AgentRequest{Op: model.OpRestart, OpID: "op-restart-1", Process: def.Process}
		first, err := d.Dispatch(dctx, def.Hosts[0], req)
		if err != nil || first.Status == nil {
			t.Fatalf("restart over NATS: %+v, %v", first, err)
		}
		again, err := d.Dispatch(dctx, def.Hosts[0], req)
		if err != nil || again.Code != first.Code || again.Message != first.Message || again.Status == nil || again.Status.PID != first.Status.PID {
			t.Fatalf("restart repeated: %+v, %v; first %+v", again, err, first)
		}
	}
	// An offline host answers nothing.
	for _, hi := range simHosts {
		if snap, _ := f.Host(hi.Host); snap.Kind != "offline" {
			continue
		}
		octx, ocancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := d.Dispatch(octx, hi.Host, model.AgentRequest{Op: model.OpStatus, Process: def.Process})
		ocancel()
		if err == nil {
			t.Fatal("an offline sim host answered")
		}
		break
	}
}

type fakeRouter struct {
	name   string
	hosts  []model.Host
	online map[model.Host]bool // nil: not an Onliner's answer
	calls  atomic.Int32
}

func (r *fakeRouter) Online(h model.Host) bool { return r.online[h] }

func (r *fakeRouter) Dispatch(_ context.Context, h model.Host, _ model.AgentRequest) (model.AgentReply, error) {
	r.calls.Add(1)
	return model.AgentReply{Message: r.name}, nil
}

func (r *fakeRouter) Statuses(h model.Host) []model.ProcStatus {
	return []model.ProcStatus{{ProcKey: "ns:p", Message: r.name}}
}

func (r *fakeRouter) Hosts(context.Context) ([]model.HostInfo, error) {
	var out []model.HostInfo
	for _, h := range r.hosts {
		st := model.AgentOnline
		if r.online != nil && !r.online[h] {
			st = model.AgentOffline
		}
		out = append(out, model.HostInfo{Host: h, State: st, Labels: map[string]string{"from": r.name}})
	}
	return out, nil
}

func TestMerge(t *testing.T) {
	a, b, c, d := model.Host{IP: "10.0.0.1"}, model.Host{IP: "10.0.0.2"}, model.Host{IP: "127.0.0.1"}, model.Host{IP: "10.0.0.4"}
	sim := &fakeRouter{name: "sim", hosts: []model.Host{a, b, d}}
	// b's real agent went offline: the simulated b is operated; d's real
	// agent is online: it wins over the simulated d.
	real := &fakeRouter{name: "nats", hosts: []model.Host{b, c, d}, online: map[model.Host]bool{c: true, d: true}}
	m := Merge(sim, real)
	tests := []struct {
		host model.Host
		want string
	}{{a, "sim"}, {b, "sim"}, {c, "nats"}, {d, "nats"}, {model.Host{IP: "10.1.1.1"}, "nats"}}
	for _, tt := range tests {
		rep, err := m.Dispatch(context.Background(), tt.host, model.AgentRequest{})
		if err != nil || rep.Message != tt.want {
			t.Errorf("%s routed to %q (%v), want %q", tt.host, rep.Message, err, tt.want)
		}
		if sts := m.Statuses(tt.host); len(sts) != 1 || sts[0].Message != tt.want {
			t.Errorf("%s statuses from %+v, want %q", tt.host, sts, tt.want)
		}
	}
	hs, _ := m.Hosts(context.Background())
	if len(hs) != 4 || hs[1].Labels["from"] != "sim" || hs[2].Labels["from"] != "nats" || hs[2].Host != d || hs[3].Host != c {
		t.Fatalf("merged hosts %+v", hs)
	}

	// A host list's statuses (AppendListStatuses) come from the same side:
	// its own list form when it has one, else its statuses of the keys
	// asked cut down to what a list shows.
	lm := Merge(&listingRouter{sim}, real)
	for _, tt := range tests {
		want := []model.ProcStatus{{ProcKey: "kept"}, {ProcKey: "ns:p"}} // nats: Statuses cut down (its Message dropped)
		if tt.want == "sim" {
			want[1].State = "listed by sim"
		}
		if got := lm.AppendListStatuses([]model.ProcStatus{{ProcKey: "kept"}}, tt.host, []string{"ns:p"}); !slices.Equal(got, want) {
			t.Errorf("%s list statuses %+v, want %+v", tt.host, got, want)
		}
		if got := lm.AppendListStatuses(nil, tt.host, []string{"other:key"}); len(got) != 0 {
			t.Errorf("%s list statuses of a key it has not: %+v", tt.host, got)
		}
	}
}

// Merged serves the engine's host lists in their list form.
var _ engine.ListStatusAppender = (*Merged)(nil)

// listingRouter is a fakeRouter with a list form of its statuses, marked
// in the state.
type listingRouter struct{ *fakeRouter }

func (r *listingRouter) AppendListStatuses(dst []model.ProcStatus, h model.Host, keys []string) []model.ProcStatus {
	for _, s := range r.Statuses(h) {
		if slices.Contains(keys, s.ProcKey) {
			dst = append(dst, model.ProcStatus{ProcKey: s.ProcKey, State: model.ProcState("listed by " + r.name)})
		}
	}
	return dst
}

// TestPoisonTaskFailsOnResume: a task stored (by an older server) with a
// target no canonical identity names is resumed once and its target fails
// with the reason, instead of closing the connection and being resumed
// again after every restart; the next task is dispatched normally.
func TestPoisonTaskFailsOnResume(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	nc := serverConn(t, e)
	d := newDispatcher(t, nc, DispatcherOptions{})
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, echoAgent(h1), ServeOptions{HeartbeatInterval: time.Minute})
	eventually(t, "agent online", 10*time.Second, func() bool { return d.Online(h1) })

	ctx := context.Background()
	st := store.NewMemory()
	p := model.Process{Meta: model.Meta{Namespace: "ns", Name: "app"}, Spec: model.Spec{Identity: model.Identity{
		ProcName: "app", SetupPath: "/opt/app", PidPath: "/opt/app/app.pid"}, Policy: model.DefaultPolicy()}}
	poison := model.Host{IP: "fe80::1%" + strings.Repeat("z", 4200)}
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h1, poison}}); err != nil {
		t.Fatal(err)
	}
	id := model.FormatTaskID(time.Now(), 9)
	targets := []model.Target{{Host: poison, ProcKey: p.Key()}, {Host: h1, ProcKey: p.Key()}}
	if err := st.PutTask(ctx, model.Task{ID: id, Op: model.OpStatus, Targets: 2, Status: model.TaskRunning, Created: time.Now()}, targets); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(config.Default().Engine, d, d, st)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := eng.Watch(wctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var results []model.Result
	for r := range ch {
		results = append(results, r)
	}
	if len(results) != 2 {
		t.Fatalf("%d results: %+v", len(results), results)
	}
	for _, r := range results {
		switch r.Host {
		case poison:
			if r.State != model.StateFailed || !strings.Contains(r.Message, "not a valid host identity") || len(r.Message) > 1000 {
				t.Errorf("poison target: %s %.200q", r.State, r.Message)
			}
		default:
			if r.State != model.StateSuccess {
				t.Errorf("good target: %s %s", r.State, r.Message)
			}
		}
	}
	tv, err := eng.Task(ctx, id)
	if err != nil || tv.Task.Status != model.TaskFailed {
		t.Fatalf("task %+v, %v: want failed", tv.Task, err)
	}
	if !nc.IsConnected() {
		t.Fatal("the server's connection was lost")
	}
}

// subscribeStored subscribes fn to d's events as the engine does: each
// agent's event is acknowledged (as stored) once fn has it.
func subscribeStored(ctx context.Context, d *Dispatcher, fn func(model.Event)) {
	d.SubscribeAckedEvents(ctx, func(e model.Event, ack func(error)) {
		fn(e)
		if ack != nil {
			ack(nil)
		}
	})
}

// TestStatusNotBehindOps: with every op slot taken (MaxConcurrent 1: a
// start the agent holds) and another op waiting for one, a status op is
// answered at once, and the waiting op runs once the slot is free: ops
// wait in the agent's queue, not in NATS's delivery of the op subject.
func TestStatusNotBehindOps(t *testing.T) {
	t.Parallel()
	e := startServer(t, testNATS(t), true)
	release := make(chan struct{})
	var running, most atomic.Int32
	var order []string
	var mu sync.Mutex
	a := &fakeAgent{info: model.HostInfo{Host: h1}, handle: func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		if req.Op != model.OpStatus {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			order = append(order, req.TaskID)
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return model.AgentReply{Code: model.CodeSuccess, Message: req.Op.String() + " " + req.TaskID,
			Status: &model.ProcStatus{ProcKey: req.Process.Key(), State: model.ProcRunning, PID: 7}}
	}}
	runAgent(t, e.ClientURL(), ClientOptions{Name: "agent"}, a, ServeOptions{HeartbeatInterval: time.Minute, MaxConcurrent: 1})
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	eventually(t, "agent online", 30*time.Second, func() bool { return d.Online(h1) })

	// One connection sends everything: NATS delivers one publisher's
	// messages in the order they were published, so each status below
	// reaches the agent after both starts.
	nc := serverConn(t, e)
	subj := OpSubject(mustID(t, h1))
	// The agent may answer only on its own reply subjects.
	replyTo := strings.TrimSuffix(subj, ".op") + ".reply.behind-"
	replies, err := nc.SubscribeSync(strings.TrimSuffix(subj, ".op") + ".reply.*")
	if err != nil {
		t.Fatal(err)
	}
	send := func(id string, op model.OpType) {
		t.Helper()
		data, err := json.Marshal(model.AgentRequest{TaskID: id, Op: op, Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}})
		if err == nil {
			err = nc.PublishRequest(subj, replyTo+id, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	next := func(what string) model.AgentReply {
		t.Helper()
		m, err := replies.NextMsg(time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var rep model.AgentReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rep
	}
	send("first", model.OpStart)
	send("second", model.OpStart)
	for i := range 3 {
		send(fmt.Sprint("status", i), model.OpStatus)
		if rep := next("status while the op slot is taken"); rep.Message != fmt.Sprint("status status", i) || rep.Status == nil {
			t.Fatalf("status %d while the op slot is taken: %+v", i, rep)
		}
	}
	close(release)
	for _, want := range []string{"start first", "start second"} {
		if rep := next(want); rep.Message != want {
			t.Fatalf("after the release: %+v, want %q", rep, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most.Load() != 1 || len(order) != 2 || order[0] != "first" || order[1] != "second" {
		t.Fatalf("ops ran %v, %d at most at once; want first then second, one at a time", order, most.Load())
	}
}
