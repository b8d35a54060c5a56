//go:build linux

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeWalkthrough runs the README's "real agents" steps as a user
// would: `gseproc server --demo`, two `gseproc agent`s on one machine,
// `gseproc apply testdata/demo-procs.json`, then `gseproc op` start,
// status and stop through the server, with a hosted process killed by
// SIGKILL coming back in between.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, two agents and real processes")
	}
	base, natsURL := startDemoServer(t)

	work := t.TempDir()
	agentCfg := filepath.Join(work, "agent.toml")
	if err := os.WriteFile(agentCfg, []byte("[nats]\nheartbeat_interval = \"200ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ips := []string{"127.0.0.12", "127.0.0.13"}
	pids := filepath.Join(work, "pids")
	// Whatever the test leaves running; registered before the agents start
	// so that it runs after they stopped (a kill while an agent hosts the
	// ticker would be repaired by a restart).
	killAtEnd(t, filepath.Join(pids, ips[0], "ticker.pid"), filepath.Join(pids, ips[1], "ticker.pid"))
	for i, ip := range ips {
		runCmd(t, "agent", "--config", agentCfg, "--nats", natsURL, "--ip", ip, "--data-dir", filepath.Join(work, "agent"+strconv.Itoa(i)))
	}
	waitFor(t, "both agents online", 20*time.Second, func() bool {
		code, out, _ := run(t, "hosts", "--server", base, "--json")
		if code != 0 {
			return false
		}
		online := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var h struct {
				Host struct {
					IP string `json:"ip"`
				} `json:"host"`
				State string `json:"agent_state"`
			}
			if json.Unmarshal([]byte(l), &h) == nil && (h.Host.IP == ips[0] || h.Host.IP == ips[1]) && h.State == "online" {
				online++
			}
		}
		return online == 2
	})

	// The README's definitions, moved to this test's hosts and directory.
	raw, err := os.ReadFile("../../testdata/demo-procs.json")
	if err != nil {
		t.Fatal(err)
	}
	defs := strings.NewReplacer("/tmp/gseproc-demo", pids, `"127.0.0.2"`, `"`+ips[0]+`"`, `"127.0.0.3"`, `"`+ips[1]+`"`).Replace(string(raw))
	defsFile := filepath.Join(work, "demo-procs.json")
	if err := os.WriteFile(defsFile, []byte(defs), 0o644); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := run(t, "apply", defsFile, "--server", base); code != 0 || strings.Count(out, "saved demo:") != 2 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := run(t, "op", "start", "--ns", "demo", "--server", base, "--json")
	if code != 0 {
		t.Fatalf("op start: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(jsonResults(t, out)); n != 3 {
		t.Fatalf("op start: %d results, want 3 (ticker on two hosts, the job on one)\n%s", n, out)
	}
	code, out, _ = run(t, "op", "start", "--ns", "demo", "--name", "ticker", "--server", base, "--json")
	for _, l := range jsonResults(t, out) {
		if code != 0 || l.Code != 828 {
			t.Fatalf("second start: exit %d, %s code %d, want 828", code, l.AgentID, l.Code)
		}
	}

	// A hosted process killed with SIGKILL is brought back by its agent.
	pidFile := filepath.Join(pids, ips[0], "ticker.pid")
	readPID := func() int {
		b, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	old := readPID()
	if old <= 1 {
		t.Fatalf("ticker pid file %s: %d", pidFile, old)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ticker restarted by its agent", 15*time.Second, func() bool {
		pid := readPID()
		return pid > 1 && pid != old && syscall.Kill(pid, 0) == nil
	})

	code, out, _ = run(t, "op", "status", "--ns", "demo", "--name", "ticker", "--server", base, "--json")
	for _, l := range jsonResults(t, out) {
		if code != 0 || l.Code != 0 || !strings.Contains(l.Content, `"isAuto":true`) {
			t.Fatalf("status: exit %d, %s code %d content %s", code, l.AgentID, l.Code, l.Content)
		}
	}
	code, out, errOut = run(t, "op", "stop", "--ns", "demo", "--name", "ticker", "--server", base, "--json")
	if code != 0 || len(jsonResults(t, out)) != 2 {
		t.Fatalf("op stop: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "ticker gone after stop", 30*time.Second, func() bool { return syscall.Kill(old, 0) != nil && syscall.Kill(readPID(), 0) != nil })

	// Bad definitions are refused naming the fields; delete removes one.
	bad := filepath.Join(work, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"process":{"meta":{"namespace":"demo"},"spec":{"identity":{"setup_path":"tmp"},"resource":{"cpu":150}}},"hosts":[]}`), 0o644)
	code, _, errOut = run(t, "apply", bad, "--server", base)
	for _, f := range []string{"process.meta.name", "process.spec.identity.setup_path", "process.spec.resource.cpu", "hosts"} {
		if code != 2 || !strings.Contains(errOut, f) {
			t.Errorf("bad definition: exit %d, want 2 naming %s:\n%s", code, f, errOut)
		}
	}
	if code, _, errOut := run(t, "op", "stop", "--ns", "demo", "--name", "heartbeat-job", "--server", base); code != 0 {
		t.Fatalf("stop heartbeat-job: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, "delete", "demo:heartbeat-job", "--server", base); code != 0 {
		t.Fatalf("delete: exit %d %s", code, errOut)
	}
	_, out, _ = run(t, "procs", "--server", base, "--ns", "demo")
	if strings.Contains(out, "heartbeat-job") || !strings.Contains(out, "ticker") {
		t.Fatalf("procs after delete:\n%s", out)
	}
}
