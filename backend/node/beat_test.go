package node_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/transport"
	"gseproc/model"
)

// loggedLine reports whether one line of logs (slog's text) says msg and
// has every one of attrs (key=value) as a field of its own.
func loggedLine(logs, msg string, attrs ...string) bool {
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, msg) {
			continue
		}
		fields := strings.Fields(line)
		if !slices.ContainsFunc(attrs, func(a string) bool { return !slices.Contains(fields, a) }) {
			return true
		}
	}
	return false
}

// TestRealAgentTakesFleetInterval: a server whose [nats]
// max_heartbeats_per_second bounds a fleet of one host to a beat a second
// tells a real agent (`gseproc agent`, configured to beat every 100 ms)
// the fleet's interval, and the agent beats at it and stays online
// (offline_after 300 ms: three beats of the agent's own interval are its
// grace, not offline_after).
func TestRealAgentTakesFleetInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and an agent")
	}
	cfg := nodetest.NATSConfig(t.TempDir())
	cfg.NATS.MaxHeartbeatsPerSecond = 1
	cfg.NATS.OfflineAfter = cfg.NATS.HeartbeatInterval * 3
	const ip = "127.0.0.41"
	cfg.NATS.Users = []config.NATSUser{{User: "agent", Password: "apw", Host: "0:" + ip}}
	want := transport.FleetBeatInterval(1, cfg.NATS.HeartbeatInterval.D(), 1)
	logs := &nodetest.SyncBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	e, nb, closeEngine, err := node.OpenNATSEngine(context.Background(), cfg, false, false, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeEngine() }()

	me := model.Host{IP: ip}
	ac := nodetest.AgentConfig(nb.ClientURL, 0, ip, filepath.Join(t.TempDir(), "agent"))
	ac.NATS.User, ac.NATS.Password = "agent", "apw"
	ac.NATS.HeartbeatInterval = cfg.NATS.HeartbeatInterval
	agentLogs := &nodetest.SyncBuf{}
	stopAgent := nodetest.StartAgentLog(t, ac, slog.New(slog.NewTextHandler(agentLogs, nil)))
	defer stopAgent() // before the engine closes (a cleanup would run after)
	nodetest.WaitFor(t, "agent online", 30*time.Second, func() bool { return nodetest.HostOnline(e, me) })
	nodetest.WaitFor(t, "the agent takes the fleet's interval", 30*time.Second, func() bool {
		return loggedLine(agentLogs.String(), "heartbeat interval set by the server", "interval="+want.String())
	})
	// The server says the fleet's interval; the host stays online at it
	// for four of its beats, each more than offline_after apart.
	nodetest.WaitFor(t, "the fleet's interval logged", 30*time.Second, func() bool {
		return loggedLine(logs.String(), "heartbeat interval of the fleet", "interval="+want.String())
	})
	deadline := time.Now().Add(4 * want)
	for time.Now().Before(deadline) {
		if !nodetest.HostOnline(e, me) {
			t.Fatalf("the agent went offline at an interval of %s (offline_after %s)", want, cfg.NATS.OfflineAfter.D())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
