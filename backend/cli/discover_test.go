package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gseproc/backend/node"
	"gseproc/model"
)

// envAsGseproc makes the test binary gseproc itself, its arguments
// gseproc's, for a test of code that starts gseproc processes (bench
// agent starts os.Executable: this binary).
const envAsGseproc = "GSEPROC_TEST_AS_GSEPROC"

func TestMain(m *testing.M) {
	if os.Getenv(envAsGseproc) != "" {
		ExecAgent(os.Args[1:], os.Stderr) // as main does
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		stop()
		os.Exit(code)
	}
	// A server someone runs on this machine must not answer the tests'
	// commands: they act on their own simulated fleets unless a test says.
	os.Setenv(node.EnvServer, "none")
	os.Exit(m.Run())
}

// Every subcommand's --help goes to stdout and exits 0.
func TestHelpGoesToStdout(t *testing.T) {
	cases := [][]string{{"--help"}, {"help", "op"}, {"sim", "offline", "--help"}, {"op", "restart", "--help"}}
	for _, c := range commands {
		cases = append(cases, []string{c.name, "--help"}, []string{c.name, "-h"})
	}
	for _, args := range cases {
		code, out, errOut := run(t, args...)
		if code != 0 || !strings.Contains(out, "Usage") || errOut != "" {
			t.Errorf("gseproc %s: exit %d, stdout %.80q, stderr %.200q", strings.Join(args, " "), code, out, errOut)
		}
	}
	// A bad flag is still an error on stderr.
	code, out, errOut := run(t, "hosts", "--no-such-flag")
	if code != 2 || out != "" || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %.200q", code, out, errOut)
	}
}

// Without --server, op, hosts and procs talk to the local server when one
// answers on [server] listen, so a stop is seen by the next status; else
// they say they act on a throwaway simulated fleet. --hosts and --seed
// ask for a simulated fleet of that size.
func TestLocalServerDiscovery(t *testing.T) {
	t.Setenv(node.EnvServer, "")
	base, _ := startDemoServer(t)
	dir := t.TempDir()
	cfgFile := func(name, listen string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("[server]\nlisten = \""+listen+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := cfgFile("live.toml", strings.TrimPrefix(base, "http://"))

	code, out, errOut := run(t, "hosts", "--config", live, "--ns", "web", "--json", "--limit", "1")
	if code != 0 || !strings.Contains(errOut, "using the local server "+base) {
		t.Fatalf("hosts: exit %d, stderr %q", code, errOut)
	}
	var h struct {
		Host model.Host `json:"host"`
	}
	if err := json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &h); err != nil || h.Host.IP == "" {
		t.Fatalf("hosts --json: %v in %q", err, out)
	}
	host := h.Host.AgentID()
	if code, _, errOut := run(t, "op", "stop", "--config", live, "--ns", "web", "--host", host, "--json"); code != 0 {
		t.Fatalf("op stop: exit %d: %s", code, errOut)
	}
	code, out, errOut = run(t, "op", "status", "--config", live, "--ns", "web", "--host", host, "--json")
	if code != 0 {
		t.Fatalf("op status: exit %d: %s", code, errOut)
	}
	lines := jsonResults(t, out)
	if len(lines) == 0 {
		t.Fatal("no status result")
	}
	for _, l := range lines {
		if l.Status == nil || l.Status.State != model.ProcStopped {
			t.Fatalf("after a stop through the local server, status says %+v", l.Status)
		}
	}

	// Nothing listens: a plain word on stderr, and a simulated fleet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	dead := cfgFile("dead.toml", deadAddr)
	code, _, errOut = run(t, "procs", "--config", dead)
	if code != 0 || !strings.Contains(errOut, "no server answers at http://"+deadAddr) || !strings.Contains(errOut, "throwaway simulated fleet") {
		t.Fatalf("procs with no server: exit %d, stderr %q", code, errOut)
	}

	// --hosts: a simulated fleet of that size, even with a server here.
	code, out, errOut = run(t, "hosts", "--config", live, "--hosts", "7", "--seed", "3", "--json")
	if code != 0 || strings.Contains(errOut, "local server") {
		t.Fatalf("hosts --hosts 7: exit %d, stderr %q", code, errOut)
	}
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 7 {
		t.Fatalf("--hosts 7 listed %d hosts", n)
	}
	if code, _, errOut := run(t, "hosts", "--hosts", "0"); code != 2 || !strings.Contains(errOut, "1..1000000") {
		t.Fatalf("--hosts 0: exit %d, stderr %q", code, errOut)
	}
}

// --hosts and --seed size the simulated fleet of a server that has one
// (--demo, fleet = simulated or mixed), and are refused by one of real
// agents only, where they would change nothing.
func TestServerHostsFlag(t *testing.T) {
	// Refused before anything starts; under a cancelled context, so that
	// a server started by mistake stops at once (the test fails, not
	// waits), its state in the test's directory.
	dir := t.TempDir()
	refused := func(name, fleet string, args ...string) {
		t.Helper()
		cfg := filepath.Join(dir, name+".toml")
		text := fmt.Appendf(nil, "[server]\nlisten = \"127.0.0.1:0\"\n%s[nats]\nlisten = \"127.0.0.1:-1\"\nstore_dir = %q\n", fleet, dir)
		if err := os.WriteFile(cfg, text, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb syncBuf
		code := Main(ctx, append([]string{"server", "--config", cfg}, args...), Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
		if code != 2 || !strings.Contains(errb.String(), "--hosts and --seed size the simulated fleet") {
			t.Fatalf("server %s on %s: exit %d, stderr %q", args, text, code, errb.String())
		}
	}
	refused("nats", "", "--hosts", "7")
	refused("empty", "fleet = \"\"\n", "--seed", "3") // "" is the nats fleet too (config and server take it so)
	base, _ := startDemoServer(t, "--hosts", "7", "--seed", "3")
	code, out, errOut := run(t, "hosts", "--server", base, "--json")
	if code != 0 {
		t.Fatalf("hosts: exit %d: %s", code, errOut)
	}
	// The 7 simulated hosts and the few the API documents name.
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n < 7 || n > 12 {
		t.Fatalf("a demo server with --hosts 7 lists %d hosts", n)
	}
}
