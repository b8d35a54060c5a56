package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// freePort is a port on 127.0.0.1 free a moment ago, for a server that
// must be found where an agent already looks (transporttest.ReservePorts).
func freePort(t *testing.T) int {
	t.Helper()
	return transporttest.ReservePorts(t, 1)[0]
}

// issueNKey runs `gseproc nkey args... --out FILE` and returns the
// [[nats.users]] entry it printed and the seed file.
func issueNKey(t *testing.T, dir, name string, args ...string) (entry, seed string) {
	t.Helper()
	seed = filepath.Join(dir, name+".nk")
	code, out, errOut := run(t, append(append([]string{"nkey"}, args...), "--out", seed)...)
	if code != 0 {
		t.Fatalf("gseproc nkey %v: exit %d %s", args, code, errOut)
	}
	i := strings.Index(out, "[[nats.users]]")
	if i < 0 {
		t.Fatalf("gseproc nkey printed no [[nats.users]] entry:\n%s", out)
	}
	if fi, err := os.Stat(seed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file %s: %v %v", seed, fi, err)
	}
	return out[i:], seed
}

// TestAgentChannelNKeys walks the README's per-host credentials: `gseproc
// nkey` issues one credential per agent and one for a simulated fleet, the
// server takes the printed entries, and each serves only what it is bound
// to: an agent with another host's credential, and a sim whose fleet
// leaves its declared hosts, say so and exit non-zero. A server with an
// unbound agent credential refuses to start, naming the entry.
func TestAgentChannelNKeys(t *testing.T) {
	dir := t.TempDir()
	agentEntry, agentSeed := issueNKey(t, dir, "agent", "--host", "5:127.0.0.1")
	simEntry, simSeed := issueNKey(t, dir, "sim", "--sim", "0:*")
	if code, _, errOut := run(t, "nkey", "--host", "5:127.0.0.1", "--out", agentSeed); code == 0 || !strings.Contains(errOut, "exists") {
		t.Fatalf("nkey over an existing seed: exit %d %s", code, errOut)
	}
	natsPort := freePort(t)
	base := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
fleet = "nats"
native_auth = false

[nats]
listen = "127.0.0.1:%d"
store_dir = %q
heartbeat_interval = "100ms"
offline_after = "1s"
`, natsPort, filepath.Join(dir, "js"))
	cfg := filepath.Join(dir, "server.toml")

	// An unbound agent credential: refused, by name.
	if err := os.WriteFile(cfg, []byte(base+agentEntry+simEntry+"\n[[nats.users]]\nuser = \"loose\"\npassword = \"pw\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "server", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "nats.users[2]") || !strings.Contains(errOut, "bound to one host") {
		t.Fatalf("server with an unbound agent credential: exit %d\n%s", code, errOut)
	}

	if err := os.WriteFile(cfg, []byte(base+agentEntry+simEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, _, _ := startServer(t, "--config", cfg)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)

	runCmd(t, "agent", "--nats", natsURL, "--nkey-seed", agentSeed, "--cloud", "5", "--ip", "127.0.0.1", "--data-dir", filepath.Join(dir, "a1"))
	simCfg := filepath.Join(dir, "sim.toml")
	if err := os.WriteFile(simCfg, []byte("[simulator]\nclouds = 1\noffline_rate = 0.0\nunreachable_rate = 0.0\n[nats]\nheartbeat_interval = \"100ms\"\noffline_after = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCmd(t, "sim", "--config", simCfg, "--nats", natsURL, "--nkey-seed", simSeed, "--hosts", "5")
	waitFor(t, "the agent and 5 simulated hosts online", 30*time.Second, func() bool {
		_, out, _ := run(t, "hosts", "--server", srv)
		return countOnline(out) == 6
	})

	// Readiness through the real server: ready, with the agents online
	// (computed in the background: /readyz answers at once).
	waitFor(t, "readyz says ready with 6 agents online", 30*time.Second, func() bool {
		resp, err := http.Get(srv + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(b), `"agents_online":6`) && strings.Contains(string(b), `"state":"ready"`)
	})
	resp, err := http.Get(srv + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), "gseproc_ready 1\n") || !strings.Contains(string(m), "gseproc_agents_online 6\n") {
		t.Fatalf("/metrics lacks the readiness figures")
	}

	// The agent's credential on another host, and as a fleet: refused.
	code, _, errOut = run(t, "agent", "--nats", natsURL, "--nkey-seed", agentSeed, "--cloud", "5", "--ip", "127.0.0.2", "--data-dir", filepath.Join(dir, "a2"))
	if code == 0 || !strings.Contains(errOut, "refused by NATS permissions") || !strings.Contains(errOut, "gseproc.agent.5.127_0_0_2.op") {
		t.Fatalf("agent with another host's credential: exit %d\n%s", code, errOut)
	}
	code, _, errOut = run(t, "sim", "--config", simCfg, "--nats", natsURL, "--nkey-seed", agentSeed, "--hosts", "5")
	if code == 0 || !strings.Contains(errOut, "refused by NATS permissions") {
		t.Fatalf("sim with an agent's credential: exit %d\n%s", code, errOut)
	}
}

// countOnline counts the "online" rows of `gseproc hosts`.
func countOnline(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " online ") {
			n++
		}
	}
	return n
}

// TestAgentSaysWhatIsWrong: an agent whose credentials are refused exits
// non-zero at once with the reason; one whose server is not there yet
// keeps trying, says why, and serves once it is; a TLS flag is applied.
func TestAgentSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	natsPort := freePort(t)
	cfg := natsTestConfig(filepath.Join(dir, "js"))
	cfg.NATS.Listen = fmt.Sprintf("127.0.0.1:%d", natsPort)
	cfg.NATS.Users = []config.NATSUser{{User: "a1", Password: "right", Host: "5:127.0.0.1"}}
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	agentArgs := func(extra ...string) []string {
		return append([]string{"agent", "--nats", natsURL, "--cloud", "5", "--ip", "127.0.0.1", "--data-dir", filepath.Join(dir, "a")}, extra...)
	}

	// Not there yet: the agent waits, saying why.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &syncBuf{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, agentArgs("--user", "a1", "--password", "right"), Stdio{In: strings.NewReader(""), Out: &syncBuf{}, Err: errb})
	}()
	waitFor(t, "the agent says no server answers", 20*time.Second, func() bool { return strings.Contains(errb.String(), "no NATS server") })
	nb, err := node.StartNATS(context.Background(), cfg, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	me := model.Host{IP: "127.0.0.1", CloudID: 5}
	waitFor(t, "the agent online once the server is up", 30*time.Second, func() bool { return nb.NATS.Online(me) })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, errb.String())
	}

	// Refused credentials: exit non-zero, at once, with the reason.
	start := time.Now()
	code, _, errOut := run(t, agentArgs("--user", "a1", "--password", "wrong")...)
	if code == 0 || !strings.Contains(errOut, "credentials refused") || !strings.Contains(errOut, "level=ERROR") {
		t.Fatalf("agent with a wrong password: exit %d\n%s", code, errOut)
	}
	t.Logf("a wrong password ends the agent in %s", time.Since(start).Round(time.Millisecond))

	// --tls-ca is the agent's CA: a missing file is named.
	missing := filepath.Join(dir, "no-such-ca.pem")
	code, _, errOut = run(t, agentArgs("--user", "a1", "--password", "right", "--tls-ca", missing)...)
	if code == 0 || !strings.Contains(errOut, missing) {
		t.Fatalf("agent with a missing --tls-ca: exit %d\n%s", code, errOut)
	}
}
