// Package nodetest holds what the tests of gseproc's wired parts share
// (backend/node's and backend/cli's): a real agent started in process,
// a NATS-backed config on 127.0.0.1, a hosted daemon whose starts and stops
// are counted, the API envelope, and waiting for a condition with a
// generous deadline (never a wall-clock window).
package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/agent/agentcmd"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// SyncBuf is a Writer safe for a command goroutine and the test.
type SyncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *SyncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// WaitFor waits until cond holds, failing the test after d.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NATSConfig is a config for a NATS-backed engine on 127.0.0.1 with its
// JetStream files in dir and a small simulated fleet.
func NATSConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.NATS.StoreDir = dir
	cfg.NATS.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	cfg.NATS.OfflineAfter = config.Duration(5 * time.Second) // wide: a loaded machine delays heartbeats
	cfg.Simulator.Hosts = 20
	cfg.Simulator.Seed = 3
	cfg.Simulator.Demo = true
	return cfg
}

// KillAtEnd SIGKILLs, when the test ends, the processes the pid files name
// then (whatever a failing test leaves running). Call it before starting
// the agents: cleanups run last-registered first, so the kill comes after
// the agents have stopped and cannot be undone by a restart.
func KillAtEnd(t testing.TB, pidFiles ...string) {
	t.Cleanup(func() {
		for _, f := range pidFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	})
}

// StartAgent runs a real agent (agentcmd.NewNode: cfg.Agent's identity and
// data dir, connected to cfg.NATS) until stop is called or the test ends;
// it must stop cleanly within 20 s. stop may be called more than once.
func StartAgent(t testing.TB, cfg config.Config) (stop func()) {
	t.Helper()
	return StartAgentLog(t, cfg, nil)
}

// StartAgentLog is StartAgent with the agent logging to log (nil:
// agentcmd.NewNode's default, as StartAgent).
func StartAgentLog(t testing.TB, cfg config.Config, log *slog.Logger) (stop func()) {
	t.Helper()
	n, err := agentcmd.NewNode(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent %s: %v", n.ID(), err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("agent %s did not stop", n.ID())
		}
	}
	t.Cleanup(stop)
	return stop
}

// AgentConfig is the config of an agent cloud:ip keeping its registry in
// dataDir and connecting to natsURL.
func AgentConfig(natsURL string, cloud int, ip, dataDir string) config.Config {
	cfg := config.Default()
	cfg.NATS.URLs = []string{natsURL}
	cfg.Agent.CloudID, cfg.Agent.IP, cfg.Agent.DataDir = cloud, ip, dataDir
	return cfg
}

// HostOnline says e sees h's agent online.
func HostOnline(e *engine.Engine, h model.Host) bool {
	hs, err := e.Hosts(context.Background(), backend.HostQuery{Hosts: []model.Host{h}})
	return err == nil && len(hs) == 1 && hs[0].State == model.AgentOnline
}

// Daemon is a hosted process's program that logs its stop.
const Daemon = `#!/bin/sh
trap 'echo stop >> stops.log; exit 0' TERM
echo $$ > "$GSEPROC_PID_FILE"
while :; do sleep 0.05; done
`

// DaemonItems are one definition of Daemon per real agent (cloud c on
// 127.0.0.1), each in its own directory under work (h<cloud>). start_cmd
// logs each start and takes 2 s, so a kill lands while it runs.
func DaemonItems(work, ns string, clouds []int) []model.ProcessDef {
	var items []model.ProcessDef
	for _, cloud := range clouds {
		dir := filepath.Join(work, "h"+strconv.Itoa(cloud))
		name := "d" + strconv.Itoa(cloud)
		items = append(items, model.ProcessDef{
			Process: model.Process{
				Meta: model.Meta{Namespace: ns, Name: name},
				Spec: model.Spec{
					Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, "d.pid")},
					Control:  model.Control{StartCmd: "echo start >> starts.log; sleep 2; ./daemon.sh >/dev/null 2>&1 &"},
					Policy: model.Policy{AutoType: model.AutoResident, StartCheckSecs: model.DefaultStartCheckSecs,
						StartRetries: model.DefaultStartRetries, StartInterval: model.DefaultStartInterval, OpTimeout: 30, StartCheckEndSecs: 10, InstanceNum: 1},
				},
			},
			Hosts: []model.Host{{IP: "127.0.0.1", CloudID: cloud}},
		})
	}
	return items
}

// Envelope is the API's reply envelope.
type Envelope struct {
	Result  bool            `json:"result"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// CallJSON sends body (JSON, or nothing) to url and decodes the envelope.
func CallJSON(t testing.TB, method, url string, body []byte) Envelope {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r Envelope
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: not an envelope: %.300s", method, url, raw)
	}
	return r
}

// Proc is the test binary run again as a helper process that runs one
// test (a server or an agent the test kills), its standard output read
// line by line; its standard error is the test's.
type Proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	lines  chan string
	killed bool
}

// StartProc runs the test named test (-test.run=^test$ -test.v) in a new
// process of this test binary, its environment with env added. It is
// killed and waited for when the test ends, unless Kill was called.
func StartProc(t testing.TB, test string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, cmd: cmd, lines: make(chan string, 64)}
	t.Cleanup(func() {
		if !p.killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

// Next is the rest of the next line of output that begins with prefix and
// a space, lines before it skipped. A line beginning "ERROR", the output
// ending, or 90 s without such a line fails the test.
func (p *Proc) Next(prefix string) string {
	p.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("helper process exited before %s", prefix)
			}
			if strings.HasPrefix(l, "ERROR") {
				p.t.Fatal(l)
			}
			if v, ok := strings.CutPrefix(l, prefix+" "); ok {
				return v
			}
		case <-timeout:
			p.t.Fatalf("no %s from the helper process", prefix)
		}
	}
}

// Drain reads (and drops) the rest of the output, so that the process
// never blocks writing it. Call it once Next is no longer needed.
func (p *Proc) Drain() {
	go func() {
		for range p.lines {
		}
	}()
}

// Kill kills the process with SIGKILL (it lets nothing go) and waits for
// it to end.
func (p *Proc) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	p.killed = true
	_ = p.cmd.Wait()
}

// Results watches task id on e to its end and is its results, in order;
// the task not ended within d fails the test.
func Results(t testing.TB, e *engine.Engine, id string, d time.Duration) []model.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ch, err := e.Watch(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rs []model.Result
	for r := range ch {
		rs = append(rs, r)
	}
	if ctx.Err() != nil {
		t.Fatalf("task %s not ended within %s: %d results so far: %+v", id, d, len(rs), rs)
	}
	return rs
}
