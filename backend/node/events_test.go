package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/agent/agentcmd"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/transport"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

// flakyScript runs until the file "crash" appears beside it, then lives
// 3 s after each start and exits 1: with start_retries 3 its agent
// restarts it until it gives up. Every start is a line of starts.log, so
// the events the agent must report are counted by the process itself:
// one restart event (success or failure) per start after the first, and
// one give-up.
const flakyScript = `#!/bin/sh
echo start >> starts.log
echo $$ > "$GSEPROC_PID_FILE"
while [ ! -e crash ]; do sleep 0.05; done
sleep 3
exit 1
`

// flakyItem is flakyScript hosted on h, in dir.
func flakyItem(t *testing.T, h model.Host, dir string) model.ProcessDef {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "flaky.sh"), []byte(flakyScript), 0o755); err != nil {
		t.Fatal(err)
	}
	nodetest.KillAtEnd(t, filepath.Join(dir, "f.pid"))
	return model.ProcessDef{
		Process: model.Process{
			Meta: model.Meta{Namespace: "biz_1", Name: "flaky"},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: "flaky", SetupPath: dir, PidPath: filepath.Join(dir, "f.pid")},
				Control:  model.Control{StartCmd: "./flaky.sh >/dev/null 2>&1 &"},
				Policy: model.Policy{AutoType: model.AutoResident, OpTimeout: 30, StartCheckSecs: 1, StartCheckEndSecs: 10,
					StartRetries: 3, InstanceNum: 1},
			},
		},
		Hosts: []model.Host{h},
	}
}

// lines counts the lines of file (0 when it does not exist).
func lines(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// eventsAgentConfig is the config of a real agent h keeping its state in
// dir, with the credentials user/pass, a short heartbeat and quick
// restarts.
func eventsAgentConfig(url string, h model.Host, dir, user, pass string) config.Config {
	ac := nodetest.AgentConfig(url, h.CloudID, h.IP, dir)
	ac.NATS.User, ac.NATS.Password = user, pass
	ac.NATS.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	ac.Agent.BackoffBase, ac.Agent.BackoffMax = config.Duration(100*time.Millisecond), config.Duration(time.Second)
	return ac
}

// gseServer is a gseproc server (NATS dispatcher, JetStream store,
// engine) on the NATS at url; stop ends it (also at the test's end).
func gseServer(t *testing.T, url string, replicas int) (*engine.Engine, func()) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.NATS.URLs = []string{url}
	cfg.NATS.User, cfg.NATS.Password = "server", "spw"
	cfg.NATS.Replicas = replicas
	nb, err := node.StartNATS(ctx, cfg, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(cfg.Engine, nb.Dispatcher, nb.Inventory, nb.Store)
	if err := e.Start(ctx); err != nil {
		_ = nb.Close()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = e.Close()
			_ = nb.Close()
		}
	}
	t.Cleanup(stop)
	return e, stop
}

// startFlaky starts item through e and waits for its success.
func startFlaky(t *testing.T, e *engine.Engine, item model.ProcessDef) {
	t.Helper()
	ctx := context.Background()
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if err != nil {
		t.Fatal(err)
	}
	rs := nodetest.Results(t, e, task.ID, 90*time.Second)
	if len(rs) != 1 || rs[0].Code != model.CodeSuccess {
		t.Fatalf("start: %+v", rs)
	}
}

// streamState is the agents' event stream's messages and its shared
// consumer's deliveries not acknowledged yet, read through nc's NATS.
func streamState(t *testing.T, js jetstream.JetStream) (msgs uint64, unacked int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, transport.EventStream)
	if err != nil {
		return 1 << 62, 0 // not made yet
	}
	si, err := st.Info(ctx)
	if err != nil {
		return 1 << 62, 0
	}
	msgs = si.State.Msgs
	if c, err := st.Consumer(ctx, transport.EventConsumer); err == nil {
		if ci, err := c.Info(ctx); err == nil {
			unacked = ci.NumAckPending + int(ci.NumPending)
		}
	}
	return msgs, unacked
}

// serverJS is JetStream on url with the servers' credentials.
func serverJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := transport.ConnectNow(transport.ClientOptions{URLs: url, User: "server", Password: "spw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// flakyEvents are the stored events of item's process on h, by kind, and
// fails the test when an id is stored twice.
func flakyEvents(t *testing.T, e *engine.Engine, h model.Host, key string) map[model.EventKind]int {
	t.Helper()
	var evs []model.Event
	var err error
	// A cluster just started may have no stream leader for a moment.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if evs, err = e.RecentEvents(context.Background(), 0); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	out := map[model.EventKind]int{}
	ids := map[string]bool{}
	for _, ev := range evs {
		if ev.Host != h || (key != "" && ev.ProcKey != key) {
			continue
		}
		if ev.ID == "" || ids[ev.ID] {
			t.Fatalf("event %+v: id empty or stored twice", ev)
		}
		ids[ev.ID] = true
		out[ev.Kind]++
	}
	return out
}

// checkFlaky checks the stored events of the flaky process against its own
// starts: one restart event per start after the first, one give-up, none
// twice.
func checkFlaky(t *testing.T, got map[model.EventKind]int, starts int) {
	t.Helper()
	restarts := got[model.EventRestartSuccess] + got[model.EventRestartFailed]
	if got[model.EventGiveUp] != 1 || restarts != starts-1 || restarts < 3 {
		t.Fatalf("stored %v for %d starts: want one give-up and %d restart events, each once", got, starts, starts-1)
	}
}

// extNATS is a NATS server with JetStream that is no gseproc server's (an
// external cluster of one), with the servers' credentials and the agent
// credential of h, keeping its files in dir.
func extNATS(t *testing.T, dir string, h model.Host) *natsembed.Embedded {
	t.Helper()
	c := config.Default().NATS
	c.Listen = "127.0.0.1:-1"
	c.StoreDir = dir
	c.Users = []config.NATSUser{{User: "server", Password: "spw", Role: config.NATSRoleServer},
		{User: "agent", Password: "apw", Host: h.String()}}
	e, err := natsembed.StartEmbedded(c, natsembed.EmbeddedOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

// TestEventsSurviveServerOutage: an external NATS, a gseproc server and a
// real agent; the server stops, then the agent's hosted process crashes
// until the agent gives up. The events wait in JetStream (the agent has
// them acknowledged while no server runs); a server started afterwards
// stores every one of them, once.
func TestEventsSurviveServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs NATS, servers and a real agent")
	}
	me := model.Host{IP: "127.0.0.1", CloudID: 31}
	ext := extNATS(t, t.TempDir(), me)
	js := serverJS(t, ext.ClientURL())
	work := t.TempDir()
	item := flakyItem(t, me, work)
	key := item.Process.Key()

	eA, stopA := gseServer(t, ext.ClientURL(), 1)
	agentDir := filepath.Join(work, "agent")
	nodetest.StartAgent(t, eventsAgentConfig(ext.ClientURL(), me, agentDir, "agent", "apw"))
	nodetest.WaitFor(t, "the agent online", 30*time.Second, func() bool { return nodetest.HostOnline(eA, me) })
	startFlaky(t, eA, item)
	stopA()

	// No server runs now: the process crashes and is restarted until the
	// agent gives up (one event per start, the give-up included).
	if err := os.WriteFile(filepath.Join(work, "crash"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(work, "starts.log")
	spool := filepath.Join(agentDir, "events", "events.pending")
	nodetest.WaitFor(t, "every event in JetStream, acknowledged to the agent", 90*time.Second, func() bool {
		n := lines(starts)
		msgs, _ := streamState(t, js)
		st, err := os.Stat(spool)
		return n >= 4 && msgs == uint64(n) && err == nil && st.Size() == 0
	})

	eB, _ := gseServer(t, ext.ClientURL(), 1)
	nodetest.WaitFor(t, "the stream read and acknowledged", 60*time.Second, func() bool {
		msgs, unacked := streamState(t, js)
		return msgs == 0 && unacked == 0 && flakyEvents(t, eB, me, key)[model.EventGiveUp] > 0
	})
	checkFlaky(t, flakyEvents(t, eB, me, key), lines(starts))
}

// TestEventsStoredOnceOnCluster: three gseproc servers on a three-node
// NATS cluster and one real agent. Each event the agent reports is stored
// once (one shared consumer), and so is each agent_online and
// agent_offline that every server derives from the agent's heartbeats.
func TestEventsStoredOnceOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster, three servers and a real agent")
	}
	me := model.Host{IP: "127.0.0.1", CloudID: 32}
	nodes := natsCluster(t, 3, config.NATSUser{User: "agent", Password: "apw", Host: me.String()})
	var es []*engine.Engine
	for i := range nodes {
		e, _ := gseServer(t, nodes[i].ClientURL(), 3)
		es = append(es, e)
	}
	// Each server's live events: a server fans an event out once it has
	// stored it (or found it stored), so once all three have seen a
	// derived event, the store's count of it is final.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make([]chan model.Event, len(es))
	for i, e := range es {
		ch, err := e.Events(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[i] = make(chan model.Event, 1024)
		go func() {
			for ev := range ch {
				if ev.Host == me {
					seen[i] <- ev
				}
			}
		}()
	}
	waitAll := func(kind model.EventKind) {
		for i := range seen {
			deadline := time.After(60 * time.Second)
			for found := false; !found; {
				select {
				case ev := <-seen[i]:
					found = ev.Kind == kind
				case <-deadline:
					t.Fatalf("server %d: no %s event", i, kind)
				}
			}
		}
	}
	work := t.TempDir()
	item := flakyItem(t, me, work)
	stopAgent := nodetest.StartAgent(t, eventsAgentConfig(nodes[0].ClientURL(), me, filepath.Join(work, "agent"), "agent", "apw"))
	waitAll(model.EventAgentOnline)
	if got := flakyEvents(t, es[1], me, ""); got[model.EventAgentOnline] != 1 {
		t.Fatalf("stored %v: want one agent_online", got)
	}

	startFlaky(t, es[0], item)
	if err := os.WriteFile(filepath.Join(work, "crash"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	js := serverJS(t, nodes[2].ClientURL())
	nodetest.WaitFor(t, "the give-up stored and the stream read", 120*time.Second, func() bool {
		msgs, unacked := streamState(t, js)
		return msgs == 0 && unacked == 0 && flakyEvents(t, es[2], me, item.Process.Key())[model.EventGiveUp] > 0
	})
	checkFlaky(t, flakyEvents(t, es[2], me, item.Process.Key()), lines(filepath.Join(work, "starts.log")))

	stopAgent()
	waitAll(model.EventAgentOffline)
	if got := flakyEvents(t, es[0], me, ""); got[model.EventAgentOnline] != 1 || got[model.EventAgentOffline] != 1 {
		t.Fatalf("stored %v: want one agent_online and one agent_offline", got)
	}
}

// eventsAgentEnv carries the config of TestEventsHelperAgent's agent.
const eventsAgentEnv = "GSEPROC_EVENTS_AGENT"

// TestEventsHelperAgent is the agent process of
// TestAgentReplaysUnackedEvents: it runs until it is killed.
func TestEventsHelperAgent(t *testing.T) {
	raw := os.Getenv(eventsAgentEnv)
	if raw == "" {
		t.Skip("the agent process of TestAgentReplaysUnackedEvents")
	}
	var cfg config.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	n, err := agentcmd.NewNode(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	_ = n.Run(context.Background())
}

// TestAgentReplaysUnackedEvents: the NATS server goes away while a real
// agent's process crashes until it gives up: the agent keeps the events
// on disk, and is killed (SIGKILL) with none of them acknowledged. NATS
// comes back (the same JetStream files), a server and the agent start
// again: the agent publishes what it kept, and each event is stored once.
func TestAgentReplaysUnackedEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("runs NATS, servers and a real agent process")
	}
	me := model.Host{IP: "127.0.0.1", CloudID: 33}
	natsDir := t.TempDir()
	ext := extNATS(t, natsDir, me)
	work := t.TempDir()
	item := flakyItem(t, me, work)
	key := item.Process.Key()
	agentDir := filepath.Join(work, "agent")

	eA, stopA := gseServer(t, ext.ClientURL(), 1)
	cfg := eventsAgentConfig(ext.ClientURL(), me, agentDir, "agent", "apw")
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proc := nodetest.StartProc(t, "TestEventsHelperAgent", eventsAgentEnv+"="+string(raw))
	proc.Drain()
	nodetest.WaitFor(t, "the agent online", 60*time.Second, func() bool { return nodetest.HostOnline(eA, me) })
	startFlaky(t, eA, item)

	// NATS goes away; the process crashes until the agent gives up.
	ext.Shutdown()
	stopA()
	if err := os.WriteFile(filepath.Join(work, "crash"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(work, "starts.log")
	spool := filepath.Join(agentDir, "events", "events.pending")
	nodetest.WaitFor(t, "every event kept on the agent's disk", 90*time.Second, func() bool {
		n := lines(starts)
		b, _ := os.ReadFile(spool)
		return n >= 4 && strings.Count(string(b), "\nE ")+boolInt(strings.HasPrefix(string(b), "E ")) == n
	})
	// The give-up on record (registry writes are coalesced): the agent
	// started again does not start the process again.
	nodetest.WaitFor(t, "the give-up in the agent's registry", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(agentDir, "procinfo.json"))
		return strings.Contains(string(b), `"held"`)
	})
	proc.Kill()

	// NATS back on the same files, a server, the agent again (in process).
	ext2 := extNATS(t, natsDir, me)
	eB, _ := gseServer(t, ext2.ClientURL(), 1)
	js := serverJS(t, ext2.ClientURL())
	nodetest.StartAgent(t, eventsAgentConfig(ext2.ClientURL(), me, agentDir, "agent", "apw"))
	nodetest.WaitFor(t, "the kept events stored and the stream read", 60*time.Second, func() bool {
		msgs, unacked := streamState(t, js)
		st, err := os.Stat(spool)
		return msgs == 0 && unacked == 0 && err == nil && st.Size() == 0 && flakyEvents(t, eB, me, key)[model.EventGiveUp] > 0
	})
	checkFlaky(t, flakyEvents(t, eB, me, key), lines(starts))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
