package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/simulator"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// natsCluster starts n embedded NATS servers with JetStream clustered on
// 127.0.0.1 (random ports); each accepts the gseproc servers' user
// (role server), the simulator's agent user and the users extra.
func natsCluster(t *testing.T, n int, extra ...config.NATSUser) []*natsembed.Embedded {
	t.Helper()
	// JetStream clustering needs every route up front, so the route ports
	// are picked before the nodes listen on them; another process may take
	// one in between: then the cluster is built again on fresh ports.
	var err error
	said := &violationLog{}
	for attempt := 1; attempt <= 5; attempt++ {
		var nodes []*natsembed.Embedded
		if nodes, err = tryNATSCluster(t, n, extra, said); err == nil {
			t.Cleanup(func() { noProtocolViolations(t, nodes, said) })
			return nodes
		}
		t.Logf("cluster attempt %d: %v", attempt, err)
	}
	t.Fatal(err)
	return nil
}

// protocolViolations are the reasons a NATS server closes a client's
// connection for something the client sent wrong, for good (nats.go does
// not reconnect): a control line over 4 KB ("nats: maximum control line
// exceeded", seen once in TestEventsStoredOnceOnCluster's log, its sender
// not found), a line it cannot parse, a payload over the limit.
var protocolViolations = map[string]bool{
	natsserver.MaxControlLineExceeded.String(): true, natsserver.ParseError.String(): true,
	natsserver.ProtocolViolation.String(): true, natsserver.MaxPayloadExceeded.String(): true,
}

// noProtocolViolations fails the test for each connection a node still up
// closed for a protocol violation (run when the test's clients are gone,
// before the nodes stop), naming the client, so that the sender of a bad
// line is known the first time it happens.
func noProtocolViolations(t *testing.T, nodes []*natsembed.Embedded, said *violationLog) {
	t.Helper()
	defer func() {
		if t.Failed() {
			if l := said.String(); l != "" {
				t.Logf("what the nodes said of it (the line's beginning):\n%s", l)
			}
		}
	}()
	for _, n := range nodes {
		cz, err := n.Server().Connz(&natsserver.ConnzOptions{State: natsserver.ConnClosed, Limit: 10000, Username: true, Subscriptions: true})
		if err != nil {
			continue // shut down by the test
		}
		for _, c := range cz.Conns {
			if protocolViolations[c.Reason] {
				t.Errorf("NATS node %s closed connection %d (name %q, user %q, from %s:%d, %d subscriptions) for %s",
					n.Server().Name(), c.Cid, c.Name, c.AuthorizedUser, c.IP, c.Port, c.NumSubs, c.Reason)
			}
		}
	}
}

// violationLog keeps the nodes' log lines about a bad protocol line
// (nats-server logs the line's beginning), at most 64 KB.
type violationLog struct {
	mu sync.Mutex
	b  []byte
}

func (v *violationLog) Write(p []byte) (int, error) {
	s := string(p)
	if strings.Contains(s, "control line") || strings.Contains(s, "parser ERROR") || strings.Contains(s, "Protocol Violation") {
		v.mu.Lock()
		if len(v.b) < 64<<10 {
			v.b = append(v.b, p...)
		}
		v.mu.Unlock()
	}
	return len(p), nil
}

func (v *violationLog) String() string { v.mu.Lock(); defer v.mu.Unlock(); return string(v.b) }

func tryNATSCluster(t *testing.T, n int, extra []config.NATSUser, said *violationLog) ([]*natsembed.Embedded, error) {
	var ports []int
	var routes []string
	ports = transporttest.ReservePorts(t, n)
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var nodes []*natsembed.Embedded
	for i := range n {
		c := config.Default().NATS
		c.Listen = "127.0.0.1:-1"
		c.StoreDir = t.TempDir()
		c.ServerName = fmt.Sprintf("n%d", i+1)
		c.Cluster = config.NATSClusterConfig{Name: "gseproc-test", Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes, User: "route", Password: "routepw"}
		c.Users = []config.NATSUser{{User: "server", Password: "spw", Role: config.NATSRoleServer}, {User: "sim", Password: "simpw", Role: config.NATSRoleSim, Hosts: []string{"0:*"}}}
		c.Users = append(c.Users, extra...)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(said, &slog.HandlerOptions{Level: slog.LevelError})).With("node", c.ServerName)
		e, err := natsembed.StartEmbedded(c, natsembed.EmbeddedOptions{}, log)
		if err != nil {
			for _, n := range nodes {
				n.Shutdown()
			}
			return nil, err
		}
		t.Cleanup(e.Shutdown)
		nodes = append(nodes, e)
	}
	return nodes, nil
}

// serveSimFleet serves a simulated fleet (cfg) over the NATS at url, as
// natsCluster's simulator user, with heartbeats every 200 ms, until the
// test ends.
func serveSimFleet(t *testing.T, url string, cfg config.SimulatorConfig) *simulator.Fleet {
	t.Helper()
	fleet := simulator.New(cfg)
	t.Cleanup(func() { fleet.Close() })
	snc, err := transport.ConnectNow(transport.ClientOptions{URLs: url, User: "sim", Password: "simpw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- transport.ServeFleet(ctx, snc, fleet, transport.ServeOptions{HeartbeatInterval: 200 * time.Millisecond})
	}()
	t.Cleanup(func() { stop(); <-done })
	return fleet
}

// TestNATSClusterFailover: a 3-node NATS cluster, JetStream state with 3
// replicas, two gseproc servers (engines) on different nodes and a
// simulated fleet serving over NATS. Server A runs a task; B, watching it
// live, sees A's results as they are stored. A's node and A die mid-task
// (A lets go of nothing); B, still running, takes the task over once A's
// lease expires and completes it without redoing what A had finished, and
// B's watcher sees every result exactly once, in Seq order.
func TestNATSClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster")
	}
	nodes := natsCluster(t, 3)
	ctx := context.Background()

	// The simulated fleet serves over NATS from node 3. Its latency keeps
	// the task running for about 15 s at concurrency 4 (about 133 targets;
	// at 150 ms it finished before the kill on an idle machine),
	// so the kill below lands mid-task even on a loaded machine.
	simCfg := config.SimulatorConfig{Hosts: 150, Seed: 11, Clouds: 1, Namespaces: []string{"web"},
		LatencyMedian: config.Duration(500 * time.Millisecond), LatencyP99: config.Duration(800 * time.Millisecond)}
	fleet := serveSimFleet(t, nodes[2].ClientURL(), simCfg)

	const leaseTTL = 2 * time.Second
	serverCfg := func(i int) config.Config {
		c := config.Default()
		c.NATS.URLs = []string{nodes[i].ClientURL()}
		c.NATS.User, c.NATS.Password = "server", "spw"
		c.NATS.Replicas = 3
		c.Engine.Concurrency = 4
		c.Engine.LeaseTTL = config.Duration(leaseTTL)
		return c
	}
	type server struct {
		e  *engine.Engine
		nb *node.NATS
	}
	openServer := func(i int) server {
		t.Helper()
		nb, err := node.StartNATS(ctx, serverCfg(i), false, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(serverCfg(i).Engine, nb.Dispatcher, nb.Inventory, nb.Store)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s := server{e, nb}
		t.Cleanup(func() { _ = s.e.Close(); _ = s.nb.Close() })
		return s
	}
	srvA := openServer(0)
	srvB := openServer(1)
	a, b := srvA.e, srvB.e

	// A's registry is B's.
	def := fleet.Definitions()[0]
	if err := a.SaveProcess(ctx, def); err != nil {
		t.Fatal(err)
	}
	if ps, err := b.Processes(ctx, backend.ProcQuery{}); err != nil || len(ps) != 1 {
		t.Fatalf("B's registry: %v %v", ps, err)
	}
	nodetest.WaitFor(t, "fleet online at B", 10*time.Second, func() bool {
		hs, _ := b.Hosts(ctx, backend.HostQuery{Hosts: def.Hosts[:1]})
		return len(hs) == 1 && hs[0].State == model.AgentOnline
	})

	task, err := a.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: def.Process.Meta.Namespace, Name: def.Process.Meta.Name}})
	if err != nil {
		t.Fatal(err)
	}
	total := task.Targets
	if total < 40 {
		t.Fatalf("task has %d targets; want enough to kill mid-task", total)
	}
	// B follows A's task live, through the shared store.
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	ch, err := b.Watch(wctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		r  model.Result
		at time.Time
	}
	var mu sync.Mutex
	var seen []got
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for r := range ch {
			mu.Lock()
			seen = append(seen, got{r, time.Now()})
			mu.Unlock()
		}
	}()
	nodetest.WaitFor(t, "some results live at B", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 10
	})
	if v, err := b.Task(ctx, task.ID); err != nil || v.Task.Counts.Final() < 10 || v.Task.Status != model.TaskRunning {
		t.Fatalf("B's view of A's task: %+v %v", v.Task, err)
	}

	// A's node dies, and A with it, as in a crash: its store and
	// connection go first, so it lets go of nothing.
	killed := time.Now()
	nodes[0].Shutdown()
	_ = srvA.nb.Close()
	_ = a.Close()
	before, err := b.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	done := countFinal(before.Results)
	if done >= total {
		t.Fatalf("task finished before the kill (%d/%d); make it slower", done, total)
	}

	// B, never restarted, takes the task over and completes it.
	select {
	case <-watchDone:
	case <-wctx.Done():
	}
	if wctx.Err() != nil {
		// The watcher may still be appending: read seen under mu.
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		t.Fatalf("task not completed after failover: %d/%d results", n, total)
	}
	// From here the watcher has returned (watchDone is closed): seen is
	// read without mu.
	v, err := b.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if (v.Task.Status != model.TaskDone && v.Task.Status != model.TaskFailed) || countFinal(v.Results) != total {
		t.Fatalf("after failover: %s with %d/%d final", v.Task.Status, countFinal(v.Results), total)
	}
	// What A finished is kept as A recorded it.
	byTarget := map[model.Target]model.Result{}
	for _, r := range v.Results {
		byTarget[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = r
	}
	for _, r := range before.Results {
		a := byTarget[model.Target{Host: r.Host, ProcKey: r.ProcKey}]
		if r.State.Final() && (!a.Finished.Equal(r.Finished) || a.Seq != r.Seq) {
			t.Fatalf("%s %s: result finished by A was redone: %+v -> %+v", r.Host, r.ProcKey, r, a)
		}
	}
	// B's watcher saw every target once, the stored result, in Seq order.
	if len(seen) != total {
		t.Fatalf("watcher on B got %d results for %d targets", len(seen), total)
	}
	var firstByB time.Duration
	for i, g := range seen {
		tg := model.Target{Host: g.r.Host, ProcKey: g.r.ProcKey}
		want, ok := byTarget[tg]
		if !ok || want.Seq != g.r.Seq || !want.Finished.Equal(g.r.Finished) {
			t.Fatalf("watcher on B: %s %s seq %d is not the stored result %+v", g.r.Host, g.r.ProcKey, g.r.Seq, want)
		}
		delete(byTarget, tg)
		if i > 0 && g.r.Seq <= seen[i-1].r.Seq {
			t.Fatalf("watcher on B: seq %d after %d", g.r.Seq, seen[i-1].r.Seq)
		}
		if firstByB == 0 && g.r.Started.After(killed) {
			firstByB = g.at.Sub(killed)
		}
	}
	t.Logf("%d targets: %d finished by A before its node died, the rest by B (first result of B %s after the kill, lease TTL %s)",
		total, done, firstByB.Round(time.Millisecond), leaseTTL)
}

func countFinal(rs []model.Result) int {
	n := 0
	for _, r := range rs {
		if r.State.Final() {
			n++
		}
	}
	return n
}
