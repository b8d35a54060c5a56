package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gseproc/backend/client"
	"gseproc/model"
)

// AgentIdleOptions sets up `gseproc bench agent`: a real `gseproc agent`
// process hosting a few processes, measured once it has settled.
type AgentIdleOptions struct {
	// Bin is the gseproc binary to run (default: this executable).
	Bin string
	// Procs is how many hosted processes (default 5).
	Procs int
	// Settle is how long the agent idles after the start before it is
	// measured (default 20 s).
	Settle time.Duration
	// Out receives progress and the figures.
	Out io.Writer
}

// AgentIdle is what the agent process held, from /proc/<pid>/status, and
// the cpu it used while idle.
type AgentIdle struct {
	RSS, Anon, File, HWM int64 // bytes: VmRSS, RssAnon, RssFile (the binary's pages), VmHWM
	Threads              int
	CPU                  time.Duration // over Wall, idle
	Wall                 time.Duration
	Hosted               int
	// Exe is the executable the agent process runs: gseproc-agent when
	// `gseproc agent` exec'd it, else gseproc.
	Exe string
}

// agentIdleTarget is issue 13's figure for an idle agent with a few
// hosted processes.
const agentIdleTarget = 12 << 20

const (
	agentUser = "gseproc-bench-agent"
	agentPass = "bench-agent-password"
)

// AgentIdleRSS starts the real server (its embedded NATS) and a real
// agent process on 127.0.0.1, saves o.Procs resident definitions on the
// agent's host and starts them with `gseproc op start`, lets the agent
// idle for o.Settle and reads its resident set from /proc. Everything it
// started is stopped before it returns, the hosted processes included.
func AgentIdleRSS(ctx context.Context, o AgentIdleOptions) (AgentIdle, error) {
	var r AgentIdle
	if o.Bin == "" {
		bin, err := os.Executable()
		if err != nil {
			return r, fmt.Errorf("bench agent: find the gseproc binary: %w", err)
		}
		o.Bin = bin
	}
	if o.Procs <= 0 {
		o.Procs = 5
	}
	if o.Settle <= 0 {
		o.Settle = 20 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	dir, err := os.MkdirTemp("", "gseproc-bench-agent-*")
	if err != nil {
		return r, fmt.Errorf("bench agent: work dir: %w", err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return r, fmt.Errorf("bench agent: %w", err)
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(agentIdleConfig(dir)), 0o600); err != nil {
		return r, fmt.Errorf("bench agent: write config: %w", err)
	}
	server, err := startChild("server", nil, o.Bin, "server", "--config", cfg)
	if err != nil {
		return r, err
	}
	defer server.stop()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	natsURL, err := server.waitLine(wctx, "agents connect to ")
	if err != nil {
		return r, err
	}
	url, err := server.waitLine(wctx, "gseproc server listening on ")
	if err != nil {
		return r, err
	}
	ag, err := startChild("agent", nil, o.Bin, "agent", "--nats", natsURL, "--user", agentUser, "--password", agentPass,
		"--ip", "127.0.0.1", "--data-dir", filepath.Join(dir, "agent"))
	if err != nil {
		return r, err
	}
	// Hosted processes outlive their agent by design: once it is stopped
	// (it would restart them), kill them by their pid files.
	defer func() {
		ag.stop()
		killPidFiles(work, o.Procs)
	}()
	if _, err := ag.waitLine(wctx, "gseproc agent "); err != nil {
		return r, err
	}

	cl := client.New(url, client.WithCredentials(appCode, appSecret, "bench"), client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	defer cl.Close()
	for i := range o.Procs {
		name := "idle" + strconv.Itoa(i)
		// From the documented defaults: a Go value sent through the client
		// means what it says, and a zero instance count is refused.
		p := model.NewProcess()
		p.Meta = model.Meta{Namespace: "benchidle", Name: name}
		p.Spec.Identity = model.Identity{ProcName: name, SetupPath: work, PidPath: filepath.Join(work, name+".pid")}
		p.Spec.Control = model.Control{StartCmd: `sleep 3600 >/dev/null 2>&1 & echo $! > "$GSEPROC_PID_FILE"`}
		p.Spec.Policy.AutoType, p.Spec.Policy.StartCheckSecs, p.Spec.Policy.OpTimeout = model.AutoResident, 1, 60
		if err := cl.SaveProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{{IP: "127.0.0.1"}}}); err != nil {
			return r, fmt.Errorf("bench agent: save %s: %w", p.Key(), err)
		}
	}
	// The agent may not be online in the registry yet: try the start
	// until every process started (bounded).
	var out []byte
	for attempt := 0; ; attempt++ {
		cmd := exec.CommandContext(ctx, o.Bin, "op", "start", "--server", url, "--config", cfg, "--ns", "benchidle")
		cmd.SysProcAttr = ownGroup()
		out, err = cmd.CombinedOutput()
		if err == nil && strings.Contains(string(out), fmt.Sprintf("%d success", o.Procs)) {
			break
		}
		if attempt == 10 || ctx.Err() != nil {
			return r, fmt.Errorf("bench agent: op start of %d processes: %v: %.2000s", o.Procs, err, out)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	r.Hosted = o.Procs
	pid := ag.cmd.Process.Pid
	if r.Exe, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil {
		return r, fmt.Errorf("bench agent: %w", err)
	}
	fmt.Fprintf(o.Out, "agent: pid %d runs %s\n", pid, r.Exe)
	fmt.Fprintf(o.Out, "agent: %d hosted processes started; idling %s (load %s)\n", o.Procs, o.Settle, loadavg())
	u0, err := readUsage(pid)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(o.Settle):
	}
	u1, err := readUsage(pid)
	if err != nil {
		return r, err
	}
	r.CPU, r.Wall = u1.CPU-u0.CPU, time.Since(t0)
	if err := readAgentMemory(pid, &r); err != nil {
		return r, err
	}
	verdict := "under"
	if r.RSS >= agentIdleTarget {
		verdict = "OVER"
	}
	fmt.Fprintf(o.Out, "agent idle, %d hosted: RSS %.1f MB (%s the 12 MB target): anon %.1f MB, file %.1f MB (the binary's pages); peak %.1f MB; %d threads; cpu %s over %s (%.2f%% of a core; load %s)\n",
		r.Hosted, mib(r.RSS), verdict, mib(r.Anon), mib(r.File), mib(r.HWM), r.Threads, r.CPU, r.Wall.Round(time.Second),
		100*r.CPU.Seconds()/r.Wall.Seconds(), loadavg())
	return r, nil
}

// mib is bytes in MB, to one decimal.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// readAgentMemory fills r's memory figures from /proc/pid/status.
func readAgentMemory(pid int, r *AgentIdle) error {
	st, err := procStatus(pid)
	if err != nil {
		return fmt.Errorf("bench agent: %w", err)
	}
	r.RSS, r.Anon, r.File, r.HWM = st["VmRSS"]<<10, st["RssAnon"]<<10, st["RssFile"]<<10, st["VmHWM"]<<10
	r.Threads = int(st["Threads"])
	if r.RSS == 0 {
		return errors.New("bench agent: no VmRSS in /proc status")
	}
	return nil
}

// killPidFiles kills the hosted processes named by the pid files in dir.
func killPidFiles(dir string, n int) {
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, "idle"+strconv.Itoa(i)+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

// agentIdleConfig is the server's config: its embedded NATS with the
// agent's credential, and the bench app for the API and the op client.
func agentIdleConfig(dir string) string {
	return fmt.Sprintf(`[log]
level = "warn"

[server]
listen = "127.0.0.1:0"
fleet = "nats"
native_auth = false

%s
[[nats.users]]
user = %q
password = %q
host = "0:127.0.0.1"
`, benchAppAndNATS(dir), agentUser, agentPass)
}
