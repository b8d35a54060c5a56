package transport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// poison makes the NATS server close nc for good: a control line over the
// server's 4 KB limit is answered with "maximum control line exceeded",
// an error nats.go does not reconnect from (what a 4,200-character host
// zone did in issue 9). It waits until nc is closed.
func poison(t *testing.T, nc *nats.Conn) {
	t.Helper()
	if err := nc.Publish(strings.Repeat("x", 5000), nil); err != nil {
		t.Fatalf("publish the long subject: %v", err)
	}
	_ = nc.Flush()
	eventually(t, "connection closed by the server", 15*time.Second, nc.IsClosed)
	if err := nc.LastError(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "maximum control line") {
		t.Fatalf("closed with %v, want maximum control line exceeded", err)
	}
}

// TestLinkRedialsClosedConnection: the server's and the agent's
// connections are each closed for good by the NATS server; each link
// dials a new one, the dispatcher, the JetStream store user and the agent
// move onto it, and ops, heartbeats and events flow again.
func TestLinkRedialsClosedConnection(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	srv, err := NewLink(func() (*nats.Conn, error) { return e.Connect("test-server") }, LinkOptions{Name: "test-server"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	d := newDispatcher(t, srv.Conn(), DispatcherOptions{})
	srv.Bind("dispatcher", d.Rebind)
	// A JetStream user: its context is made again on the new connection.
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "linktest", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	rebound := make(chan jetstream.KeyValue, 4)
	srv.Bind("kv", func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		kv, err := js.KeyValue(ctx, "linktest")
		if err != nil {
			return err
		}
		rebound <- kv
		return nil
	})

	a := echoAgent(h1)
	agent, err := NewLink(func() (*nats.Conn, error) {
		return Connect(ClientOptions{URLs: e.ClientURL(), Name: "test-agent", MaxReconnectDelay: 300 * time.Millisecond}, nil)
	}, LinkOptions{Name: "test-agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ServeAgentOn(sctx, agent, a, ServeOptions{HeartbeatInterval: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("ServeAgentOn: %v", err)
		}
	})
	eventually(t, "agent online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	dispatch := func() (model.AgentReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return d.Dispatch(ctx, h1, model.AgentRequest{TaskID: "GSETASK:20260101000000:1", Op: model.OpStatus,
			Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}})
	}
	if rep, err := dispatch(); err != nil || rep.Code != 0 {
		t.Fatalf("dispatch before: %+v %v", rep, err)
	}
	events := make(chan model.Event, 16)
	subscribeStored(ctx, d, func(ev model.Event) {
		if ev.Kind == model.EventRestartSuccess {
			events <- ev
		}
	})

	// The server's connection: closed for good, then a new one in use.
	old := srv.Conn()
	poison(t, old)
	if _, err := dispatch(); err == nil || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Logf("dispatch on the closed connection: %v", err) // may already be on the new one
	}
	eventually(t, "server link redialed", 30*time.Second, func() bool {
		st := srv.Status()
		return st.Redials == 1 && st.State == LinkConnected
	})
	if st := srv.Status(); !strings.Contains(strings.ToLower(st.LastClosed), "maximum control line") || st.LastClosedAt.IsZero() {
		t.Fatalf("status %+v: want the reason of the close", st)
	}
	if srv.Conn() == old || srv.Conn().IsClosed() {
		t.Fatal("the link still hands out the closed connection")
	}
	eventually(t, "dispatch on the new connection", 30*time.Second, func() bool {
		rep, err := dispatch()
		return err == nil && rep.Code == 0 && strings.HasPrefix(rep.Message, "did status")
	})
	var kv2 jetstream.KeyValue
	select {
	case kv2 = <-rebound:
	case <-time.After(30 * time.Second):
		t.Fatal("the JetStream user was not bound to the new connection")
	}
	if _, err := kv.Put(ctx, "k", []byte("old")); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("put through the old handle: %v, want connection closed", err)
	}
	if _, err := kv2.Put(ctx, "k", []byte("new")); err != nil {
		t.Fatalf("put through the rebound handle: %v", err)
	}
	// The agent's events reach the dispatcher's new subscription.
	a.emit(model.Event{Kind: model.EventRestartSuccess, ProcKey: "ns:p", Message: "after server redial"})
	select {
	case ev := <-events:
		if ev.Host != h1 || ev.Message != "after server redial" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no event after the server's redial")
	}

	// The agent's connection: closed for good; an event emitted before the
	// new one is up is buffered and delivered, and ops reach the agent.
	oldAgent := agent.Conn()
	poison(t, oldAgent)
	a.emit(model.Event{Kind: model.EventRestartSuccess, ProcKey: "ns:p", Message: "while redialing"})
	eventually(t, "agent link redialed", 30*time.Second, func() bool { return agent.Status().Redials == 1 })
	eventually(t, "dispatch to the agent on its new connection", 30*time.Second, func() bool {
		rep, err := dispatch()
		return err == nil && rep.Code == 0
	})
	select {
	case ev := <-events:
		if ev.Message != "while redialing" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the event emitted while the agent redialed was lost")
	}
	if hostState(d, h1) != model.AgentOnline {
		t.Fatalf("agent %s after its redial", hostState(d, h1))
	}
}

// TestFixedLink: a fixed link never dials; once its connection is closed,
// Next says so, and ServeAgent returns ErrClosed as before.
func TestFixedLink(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	nc := serverConn(t, e)
	l := FixedLink(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	beats, err := serverConn(t, e).SubscribeSync(HeartbeatSubject(mustID(t, h1)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- ServeAgent(ctx, nc, echoAgent(h1), ServeOptions{HeartbeatInterval: 100 * time.Millisecond})
	}()
	if _, err := beats.NextMsg(15 * time.Second); err != nil {
		t.Fatalf("no heartbeat: %v", err)
	}
	if st := l.Status(); st.State != LinkConnected || st.Redials != 0 {
		t.Fatalf("status %+v", st)
	}
	poison(t, nc)
	if _, err := l.Next(ctx, nc); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next: %v, want ErrClosed", err)
	}
	if st := l.Status(); st.State != LinkClosed {
		t.Fatalf("status %+v, want closed", st)
	}
	select {
	case err := <-served:
		if !errors.Is(err, ErrClosed) || !strings.Contains(strings.ToLower(err.Error()), "maximum control line") {
			t.Fatalf("ServeAgent: %v, want ErrClosed with the reason", err)
		}
	case <-ctx.Done():
		t.Fatal("ServeAgent did not return after its connection closed")
	}
}

// TestLinkCloseStopsRedialing: Close while the link cannot dial ends at
// once, and Next answers ErrClosed.
func TestLinkCloseStopsRedialing(t *testing.T) {
	e := startServer(t, testNATS(t), true)
	dials := make(chan struct{}, 100)
	l, err := NewLink(func() (*nats.Conn, error) {
		dials <- struct{}{}
		if len(dials) > 1 {
			return nil, errors.New("no server")
		}
		return e.Connect("test")
	}, LinkOptions{Name: "test", Backoff: model.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	nc := l.Conn()
	poison(t, nc)
	eventually(t, "redial attempts", 15*time.Second, func() bool { return len(dials) >= 3 })
	if st := l.Status(); st.State != LinkRedialing {
		t.Fatalf("status %+v, want redialing", st)
	}
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while redialing")
	}
	if _, err := l.Next(context.Background(), nc); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if st := l.Status(); st.State != LinkClosed {
		t.Fatalf("status %+v", st)
	}
}
