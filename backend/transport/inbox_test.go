package transport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"gseproc/backend/config"
	"gseproc/backend/simulator"
	"gseproc/backend/transport/subjects"
	"gseproc/model"
)

func TestInboxKind(t *testing.T) {
	pfx := "gseproc.agent.0.10_0_0_1."
	for _, c := range []struct {
		subj string
		want int
	}{
		{pfx + "op", inboxOp},
		{pfx + "cancel", inboxCancel},
		{pfx + "evack.abc", inboxAck},
		{pfx + "evack.a.b", inboxOther},
		{pfx + "evack", inboxOther},
		{pfx + "hb", inboxOther},
		{pfx + "event", inboxOther},
		{pfx + "reply.x", inboxOther},
		{pfx + "op.x", inboxOther},
		{"gseproc.agent.0.10_0_0_2.op", inboxOther}, // another host's
		{"gseproc.agent.0.10_0_0_11.op", inboxOther},
	} {
		if got := inboxKind(pfx, c.subj); got != c.want {
			t.Errorf("inboxKind(%q) = %d, want %d", c.subj, got, c.want)
		}
	}
	if got := InboxSubject(mustID(t, h1)); got != "gseproc.agent.0.10_0_0_1.>" {
		t.Fatalf("InboxSubject = %q", got)
	}
}

// oldServer runs a NATS server whose host credentials grant what a
// gseproc server from before the inbox granted: the op, cancel and
// evack subjects one by one. Users: "srv" (every permission), "a1"
// (host h1), "sim" (cloud 0).
func oldServer(t *testing.T) (ns *server.Server, srv *nats.Conn) {
	t.Helper()
	perms := func(tok string) *server.Permissions {
		p := subjects.Prefix + tok
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{p + ".hb", p + ".event", p + ".reply.*"}},
			Subscribe: &server.SubjectPermission{Allow: []string{p + ".op", p + ".cancel", p + ".evack.*", subjects.Hello}},
		}
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, Users: []*server.User{
			{Username: "srv", Password: "srvpw"},
			{Username: "a1", Password: "a1pw", Permissions: perms(HostToken(mustID(t, h1)))},
			{Username: "sim", Password: "simpw", Permissions: perms("0.*")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(15 * time.Second) {
		t.Fatal("old server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("srv", "srvpw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return ns, nc
}

// subsOf are the subjects the connection named name holds on ns.
func subsOf(t *testing.T, ns *server.Server, name string) []string {
	t.Helper()
	cz, err := ns.Connz(&server.ConnzOptions{Subscriptions: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.Name == name {
			s := slices.Clone(c.Subs)
			slices.Sort(s)
			return s
		}
	}
	return nil
}

// exerciseAgent checks what an agent serving h1 does for the server:
// it comes online, answers an op, stops an op on the server's cancel,
// and its event is stored and acknowledged (its spool in dir empties).
func exerciseAgent(t *testing.T, d *Dispatcher, a *fakeAgent, dir string) {
	t.Helper()
	eventually(t, "online", 15*time.Second, func() bool { return hostState(d, h1) == model.AgentOnline })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rep, err := d.Dispatch(ctx, h1, model.AgentRequest{Op: model.OpStatus, TaskID: "t0"})
	if err != nil || rep.Message != "did status for t0" {
		t.Fatalf("op: %+v %v", rep, err)
	}

	// The server's cancel stops a running op.
	cctx, stop := context.WithCancelCause(ctx)
	res := make(chan error, 1)
	go func() {
		rep, err := d.Dispatch(cctx, h1, model.AgentRequest{Op: model.OpStart, TaskID: "t1", OpID: model.OpID("t1", h1, "ns:p"),
			Process: model.Process{Meta: model.Meta{Namespace: "ns", Name: "p"}}})
		if err == nil && !rep.Cancelled {
			err = errors.New("answered without being cancelled: " + rep.Message)
		}
		res <- err
	}()
	select {
	case <-a.running:
	case <-time.After(15 * time.Second):
		t.Fatal("the op never reached the agent")
	}
	stop(model.ErrCancelled)
	// Dispatch itself fails when the agent does not answer the cancel
	// within CancelGrace: the deadline here only catches a hang, and is
	// generous (a loaded machine may hold the dispatch past 2*CancelGrace).
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop the cancelled op")
	}

	// An event: stored, and acknowledged to the agent.
	stored := make(chan struct{}, 1)
	ectx, ecancel := context.WithCancel(context.Background())
	defer ecancel()
	subscribeStored(ectx, d, func(e model.Event) {
		if e.ProcKey == "ns:ev" {
			select {
			case stored <- struct{}{}:
			default:
			}
		}
	})
	a.emit(model.Event{Time: time.Now(), Host: h1, ProcKey: "ns:ev", Kind: model.EventLimitExceeded})
	select {
	case <-stored:
	case <-time.After(15 * time.Second):
		t.Fatal("the event was not stored")
	}
	eventually(t, "the event acknowledged to the agent (its spool emptied)", 15*time.Second, func() bool {
		st, err := os.Stat(filepath.Join(dir, spoolFile))
		return err == nil && st.Size() == 0
	})
}

// cancellableAgent answers status ops at once and holds a start until
// its context ends (the server's cancel), telling running.
func cancellableAgent() *fakeAgent {
	a := echoAgent(h1)
	a.running = make(chan struct{}, 1)
	echo := a.handle
	a.handle = func(ctx context.Context, req model.AgentRequest) model.AgentReply {
		if req.Op != model.OpStart {
			return echo(ctx, req)
		}
		a.running <- struct{}{}
		<-ctx.Done()
		return model.AgentReply{Code: model.CodeCommandFailed, Message: "stopped", Cancelled: true}
	}
	return a
}

// A new agent subscribes once, to its host's inbox, and is served
// through it: ops, cancels, acknowledgements.
func TestInboxAgent(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{User: "a1", Password: "a1pw", Host: h1.AgentID()}}
	e := startServer(t, cfg, false)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	a, dir := cancellableAgent(), t.TempDir()
	runAgent(t, e.ClientURL(), ClientOptions{User: "a1", Password: "a1pw", Name: "agent"}, a,
		ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventDir: dir})
	exerciseAgent(t, d, a, dir)
	want := []string{InboxSubject(mustID(t, h1)), HelloSubject}
	slices.Sort(want)
	if got := subsOf(t, e.Server(), "agent"); !slices.Equal(got, want) {
		t.Fatalf("agent's subscriptions %q, want %q", got, want)
	}
}

// An agent from before the inbox (its three subjects) works against
// this server.
func TestOldAgentNewServer(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{User: "a1", Password: "a1pw", Host: h1.AgentID()}}
	e := startServer(t, cfg, false)
	d := newDispatcher(t, serverConn(t, e), DispatcherOptions{})
	a, dir := cancellableAgent(), t.TempDir()
	runAgent(t, e.ClientURL(), ClientOptions{User: "a1", Password: "a1pw", Name: "agent"}, a,
		ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventDir: dir, legacySubjects: true})
	exerciseAgent(t, d, a, dir)
	id := mustID(t, h1)
	want := []string{OpSubject(id), CancelSubject(id), eventAckPattern(id), HelloSubject}
	slices.Sort(want)
	if got := subsOf(t, e.Server(), "agent"); !slices.Equal(got, want) {
		t.Fatalf("old agent's subscriptions %q, want %q", got, want)
	}
}

// A new agent against a server from before the inbox (which refuses
// it) serves on the three subjects that server grants.
func TestNewAgentOldServer(t *testing.T) {
	ns, srv := oldServer(t)
	d := newDispatcher(t, srv, DispatcherOptions{})
	a, dir := cancellableAgent(), t.TempDir()
	runAgent(t, ns.ClientURL(), ClientOptions{User: "a1", Password: "a1pw", Name: "agent"}, a,
		ServeOptions{HeartbeatInterval: 50 * time.Millisecond, EventDir: dir})
	exerciseAgent(t, d, a, dir)
	id := mustID(t, h1)
	want := []string{OpSubject(id), CancelSubject(id), eventAckPattern(id), HelloSubject}
	slices.Sort(want)
	if got := subsOf(t, ns, "agent"); !slices.Equal(got, want) {
		t.Fatalf("agent's subscriptions on the old server %q, want %q", got, want)
	}
}

// A simulated fleet subscribes once a host (its inbox; the op subject
// against a server from before the inbox) and is served either way.
func TestFleetInbox(t *testing.T) {
	cfg := testNATS(t)
	cfg.Users = []config.NATSUser{{User: "sim", Password: "simpw", Role: config.NATSRoleSim, Hosts: []string{"0:*"}}}
	e := startServer(t, cfg, false)
	old, oldSrv := oldServer(t)
	for _, c := range []struct {
		name   string
		ns     *server.Server
		srv    *nats.Conn
		legacy bool
		kind   string // the subscriptions' last token
	}{
		{"new server", e.Server(), serverConn(t, e), false, ">"},
		{"old server", old, oldSrv, false, "op"},
		{"old fleet, new server", e.Server(), serverConn(t, e), true, "op"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := simulator.New(config.SimulatorConfig{Hosts: 20, Seed: 3, Clouds: 1, Namespaces: config.Default().Simulator.Namespaces})
			t.Cleanup(func() { _ = f.Close() })
			serveFleet(t, c.ns.ClientURL(), ClientOptions{Name: "sim-" + c.name, User: "sim", Password: "simpw"}, f,
				ServeOptions{HeartbeatInterval: 100 * time.Millisecond, legacySubjects: c.legacy})
			ctx := context.Background()
			d := newDispatcher(t, c.srv, DispatcherOptions{})
			hosts, _ := f.Hosts(ctx)
			var online []model.Host
			for _, hi := range hosts {
				if hi.State == model.AgentOnline {
					online = append(online, hi.Host)
				}
			}
			if len(online) == 0 {
				t.Fatal("no simulated host online")
			}
			for _, h := range online {
				eventually(t, h.String()+" online", 15*time.Second, func() bool { return hostState(d, h) == model.AgentOnline })
				dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := d.Dispatch(dctx, h, model.AgentRequest{Op: model.OpStatus, Process: model.Process{Meta: model.Meta{Namespace: "x", Name: "y"}}})
				dcancel()
				if err != nil && !errors.Is(err, model.ErrUnreachable) {
					t.Fatalf("op on %s: %v", h, err)
				}
			}
			// One subscription a host (and the hello, and the fleet's
			// acknowledgements on its first host's subjects).
			subs := subsOf(t, c.ns, "sim-"+c.name)
			n := 0
			for _, s := range subs {
				if s == HelloSubject || filepath.Ext(s) == ".*" {
					continue
				}
				if filepath.Ext(s) != "."+c.kind {
					t.Fatalf("subscription %q, want each host's %q", s, c.kind)
				}
				n++
			}
			if n != len(hosts) {
				t.Fatalf("%d host subscriptions for %d hosts", n, len(hosts))
			}
		})
	}
}
