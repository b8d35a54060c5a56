package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/config"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
)

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// node starts one embedded NATS server of a 3-node cluster whose route
// ports are ports; listen is its client address.
func node(t *testing.T, i int, ports []int, listen, storeDir string) *natsembed.Embedded {
	t.Helper()
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	c := config.Default().NATS
	c.Listen, c.StoreDir, c.ServerName = listen, storeDir, fmt.Sprintf("n%d", i+1)
	c.Cluster = config.NATSClusterConfig{Name: "health", Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes, User: "r", Password: "rpw"}
	e, err := natsembed.StartEmbedded(c, natsembed.EmbeddedOptions{Demo: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

// TestQuorumLostAndBack: on a 3-node cluster the prober reports ready
// with 3 of 3 nodes; with one node gone it stays ready and counts the
// store's replicas on that node as behind; with two gone it reports
// no_quorum, saying how many nodes it waits for, and answers at once all
// along; when a node returns it is ready again by itself.
func TestQuorumLostAndBack(t *testing.T) {
	ports := transporttest.ReservePorts(t, 6)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var nodes []*natsembed.Embedded
	for i := range 3 {
		nodes = append(nodes, node(t, i, ports[:3], fmt.Sprintf("127.0.0.1:%d", ports[3+i]), dirs[i]))
	}
	nc, err := nodes[0].Connect("health-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, err := Start(Options{Link: transport.FixedLink(nc), Node: nodes[0].Server(), Every: 50 * time.Millisecond, Timeout: time.Second, FailAfter: 2,
		Leases: func() int { return 7 }, Agents: func() (int, int) { return 2, 3 }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t0 := time.Now()
	defer func() { t.Logf("phases done at %s", time.Since(t0)) }()
	eventually(t, "ready with 3 of 3 nodes", 60*time.Second, func() bool {
		s := p.Status()
		return s.Ready && s.JetStream.NodesUp == 3 && s.JetStream.NodesWant == 3
	})
	if s := p.Status(); s.LeasesHeld != 7 || s.AgentsOnline != 2 || s.AgentsKnown != 3 || s.NATS != "connected" {
		t.Fatalf("figures %+v", s)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "gseproc_lagtest", Subjects: []string{"lagtest"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "other_lagtest", Subjects: []string{"otherlag"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the store's replicas current", 60*time.Second, func() bool { return p.Status().StoreReplicasBehind == 0 })

	t.Logf("ready with 3 of 3 after %s", time.Since(t0))
	nodes[2].Shutdown()
	// Only the store's stream (gseproc_*) counts, not another one.
	eventually(t, "one replica behind, still ready", 60*time.Second, func() bool {
		s := p.Status()
		return s.Ready && s.StoreReplicasBehind == 1
	})
	nodes[1].Shutdown()
	// Each Status is timed less the stalls around it (a loaded machine
	// kept this process from running: a cached read seen taking 589 ms at
	// load 17-22): what is left is the time Status chose to wait.
	var slowest time.Duration
	eventually(t, "no_quorum", 60*time.Second, func() bool {
		m := transporttest.MeterStalls()
		start := time.Now()
		s := p.Status()
		took := time.Since(start)
		slowest = max(slowest, took-m.Stop())
		return s.State == StateNoQuorum
	})
	if s := p.Status(); s.Ready || !strings.Contains(s.Reason, "of 3 nodes") || s.JetStream.OK {
		t.Fatalf("without quorum: %+v", s)
	}
	// A Status that waited on NATS would take the probe's timeout (1s).
	if slowest > 500*time.Millisecond {
		t.Fatalf("Status took %s (less stalls) while the cluster was down", slowest)
	}

	t.Logf("no_quorum after %s", time.Since(t0))
	nodes[1] = node(t, 1, ports[:3], fmt.Sprintf("127.0.0.1:%d", ports[4]), dirs[1])
	eventually(t, "ready again once a peer is back", 90*time.Second, func() bool { return p.Status().Ready })
	t.Logf("status after recovery: %+v", p.Status())
}

// natsAndConn starts an embedded NATS with the server's user and the
// server's connection to it (reconnecting every 100 ms); restart starts
// NATS again, once e is shut down, on the same address and store.
func natsAndConn(t *testing.T, o natsembed.EmbeddedOptions) (e *natsembed.Embedded, nc *nats.Conn, restart func()) {
	t.Helper()
	c := config.Default().NATS
	c.Listen, c.StoreDir = "127.0.0.1:-1", t.TempDir()
	c.Users = []config.NATSUser{{User: "srv", Password: "srvpw", Role: config.NATSRoleServer}}
	e, err := natsembed.StartEmbedded(c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	addr := strings.TrimPrefix(e.ClientURL(), "nats://")
	nc, err = transport.ConnectNow(transport.ClientOptions{URLs: e.ClientURL(), User: "srv", Password: "srvpw", MaxReconnectDelay: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	restart = func() {
		t.Helper()
		c.Listen = addr
		e2, err := natsembed.StartEmbedded(c, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e2.Shutdown)
	}
	return e, nc, restart
}

// TestNATSDown: the server's NATS connection lost is reported, and
// recovered from by itself.
func TestNATSDown(t *testing.T) {
	e, nc, restart := natsAndConn(t, natsembed.EmbeddedOptions{Demo: true})
	p, err := Start(Options{Link: transport.FixedLink(nc), Every: 50 * time.Millisecond, FailAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	eventually(t, "ready", 30*time.Second, func() bool { return p.Status().Ready })
	e.Shutdown()
	eventually(t, "nats_disconnected", 30*time.Second, func() bool { return p.Status().State == StateNATSDown })
	restart()
	eventually(t, "ready again", 30*time.Second, func() bool { return p.Status().Ready })
}

// TestNATSDownAtOnce: a lost connection is reported by Status as soon as
// the connection knows it, not at the next probe (here an hour away), and
// no longer once it is back.
func TestNATSDownAtOnce(t *testing.T) {
	e, nc, restart := natsAndConn(t, natsembed.EmbeddedOptions{})
	p, err := Start(Options{Link: transport.FixedLink(nc), Every: time.Hour, FailAfter: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if s := p.Status(); !s.Ready {
		t.Fatalf("first probe: %+v", s)
	}
	e.Shutdown()
	eventually(t, "nats_disconnected without a probe", 10*time.Second, func() bool { return p.Status().State == StateNATSDown })
	s := p.Status()
	if s.Ready || !strings.Contains(s.Reason, "NATS connection is") || s.Since.IsZero() || s.NATS == "connected" {
		t.Fatalf("down: %+v", s)
	}
	if again := p.Status(); !again.Since.Equal(s.Since) {
		t.Fatalf("since moved: %s then %s", s.Since, again.Since)
	}
	restart()
	eventually(t, "ready once reconnected", 30*time.Second, func() bool { return p.Status().Ready })
}

// TestClusterForming: a new cluster's first start needs every node up
// together. Two fresh nodes of three say so ("forming", 2 up) instead of
// a quorum they would seem to have; the third makes them ready by itself.
// Once formed, a node restarted alone waits for a quorum (not forming),
// and one peer back is enough.
func TestClusterForming(t *testing.T) {
	ports := transporttest.ReservePorts(t, 6)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	listen := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[3+i]) }
	n1 := node(t, 0, ports[:3], listen(0), dirs[0])
	n2 := node(t, 1, ports[:3], listen(1), dirs[1])
	probe := func(n *natsembed.Embedded) *Prober {
		nc, err := n.Connect("health-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		p, err := Start(Options{Link: transport.FixedLink(nc), Node: n.Server(), Every: 50 * time.Millisecond, Timeout: time.Second, FailAfter: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	p := probe(n1)
	eventually(t, "forming with 2 of 3 up", 30*time.Second, func() bool {
		s := p.Status()
		return s.State == StateNoQuorum && s.JetStream.Forming && s.JetStream.NodesUp == 2
	})
	if s := p.Status(); !strings.Contains(s.Reason, "first start needs all 3 nodes") {
		t.Fatalf("forming: %+v", s)
	}
	n3 := node(t, 2, ports[:3], listen(2), dirs[2])
	eventually(t, "ready once the third node is up", 60*time.Second, func() bool { return p.Status().Ready })
	if s := p.Status(); s.JetStream.NodesUp != 3 || s.JetStream.Forming {
		t.Fatalf("formed: %+v", s.JetStream)
	}

	p.Close()
	for _, n := range []*natsembed.Embedded{n1, n2, n3} {
		n.Shutdown()
	}
	n1 = node(t, 0, ports[:3], listen(0), dirs[0])
	p = probe(n1)
	eventually(t, "alone after a restart: no quorum", 30*time.Second, func() bool { return p.Status().State == StateNoQuorum })
	if s := p.Status(); s.JetStream.Forming || s.JetStream.NodesUp != 1 || !strings.Contains(s.Reason, "waiting for 2 of 3 nodes (1 up)") {
		t.Fatalf("alone after a restart: %+v", s)
	}
	node(t, 1, ports[:3], listen(1), dirs[1])
	eventually(t, "ready with 2 of 3", 60*time.Second, func() bool { return p.Status().Ready })
}

// TestStoreOutageAtOnce: an outage the store found (Options.StoreOutage)
// is reported by Status at once over a ready verdict, with its reason and
// since when (NATS silent as nats_disconnected, else no_quorum), and no
// longer once the store finds none.
func TestStoreOutageAtOnce(t *testing.T) {
	_, nc, _ := natsAndConn(t, natsembed.EmbeddedOptions{})
	var (
		mu     sync.Mutex
		since  time.Time
		silent bool
		outage error
	)
	set := func(s time.Time, sil bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		since, silent, outage = s, sil, err
	}
	p, err := Start(Options{Link: transport.FixedLink(nc), Every: time.Hour, FailAfter: 3,
		StoreOutage: func() (time.Time, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return since, silent, outage
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if s := p.Status(); !s.Ready {
		t.Fatalf("first probe: %+v", s)
	}
	at := time.Now().Add(-time.Second)
	for _, c := range []struct {
		silent bool
		state  string
	}{{true, StateNATSDown}, {false, StateNoQuorum}} {
		set(at, c.silent, errors.New("NATS answers nothing"))
		s := p.Status()
		if s.Ready || s.State != c.state || !strings.Contains(s.Reason, "NATS answers nothing") || !s.Since.Equal(at) {
			t.Fatalf("store outage (silent %v): %+v", c.silent, s)
		}
	}
	set(time.Time{}, false, nil)
	if s := p.Status(); !s.Ready {
		t.Fatalf("store outage over: %+v", s)
	}
}

// TestStoreCheckVerdicts: with the store's probe (Options.CheckStore) each
// probe reports its findings: NATS answering nothing as nats_disconnected
// and JetStream silent as no_quorum, at once (the store has judged them);
// some streams without a leader keep the server ready, naming them
// (degraded); a probe left unanswered is one slow answer until FailAfter
// in a row; everything answering is ready again by itself, with the
// store's lag. Without a store yet, JetStream is asked as before.
func TestStoreCheckVerdicts(t *testing.T) {
	_, nc, _ := natsAndConn(t, natsembed.EmbeddedOptions{})
	var (
		mu    sync.Mutex
		check StoreCheck
		open  bool
	)
	set := func(c StoreCheck) {
		mu.Lock()
		defer mu.Unlock()
		check, open = c, true
	}
	p, err := Start(Options{Link: transport.FixedLink(nc), Every: time.Hour, FailAfter: 2,
		CheckStore: func(context.Context) (StoreCheck, bool) {
			mu.Lock()
			defer mu.Unlock()
			return check, open
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if s := p.Status(); !s.Ready || !s.JetStream.OK {
		t.Fatalf("no store yet, JetStream asked: %+v", s)
	}
	silent := fmt.Errorf("%w on the connection, not even a PING, for 1s", errors.New("NATS answers nothing"))
	for _, c := range []struct {
		name     string
		check    StoreCheck
		state    string
		reason   string // in Reason, or Degraded when ready
		streams  int
		probesTo int // probes before the state shows (1: at once)
	}{
		{"answering", StoreCheck{Lag: 4, Behind: 1}, StateReady, "", 0, 1},
		{"NATS silent", StoreCheck{Err: silent, NATSSilent: true}, StateNATSDown, "NATS answers nothing", 0, 1},
		{"answering again", StoreCheck{}, StateReady, "", 0, 1},
		{"JetStream silent", StoreCheck{Err: errors.New("NATS answers a PING but JetStream answers nothing for 1s")}, StateNoQuorum, "JetStream answers nothing", 0, 1},
		{"some streams without a leader", StoreCheck{Err: errors.New("stream unavailable: stream KV_gseproc_tasks: no leader"), Streams: []string{"KV_gseproc_tasks"}},
			StateReady, "KV_gseproc_tasks: no leader", 1, 1},
		{"unanswered", StoreCheck{Err: errors.New("a stream info was not answered either"), Unanswered: true}, StateNoQuorum, "does not answer the store's probe", 0, 2},
		{"answering at last", StoreCheck{}, StateReady, "", 0, 1},
	} {
		set(c.check)
		for i := 1; i <= c.probesTo; i++ {
			s := p.Probe()
			if i < c.probesTo {
				if s.State == c.state {
					t.Fatalf("%s: %s after %d probe(s), want %d", c.name, s.State, i, c.probesTo)
				}
				continue
			}
			text := s.Reason
			if s.Ready {
				text = s.Degraded
			}
			if s.State != c.state || s.Ready != (c.state == StateReady) || !strings.Contains(text, c.reason) || len(s.StreamsUnavailable) != c.streams {
				t.Fatalf("%s: %+v", c.name, s)
			}
			if c.name == "answering" && (s.StoreLag != 4 || s.StoreReplicasBehind != 1) {
				t.Fatalf("%s: lag %d, behind %d", c.name, s.StoreLag, s.StoreReplicasBehind)
			}
			if c.reason == "" && (s.Reason != "" || s.Degraded != "") {
				t.Fatalf("%s: reason %q, degraded %q", c.name, s.Reason, s.Degraded)
			}
		}
	}
}
