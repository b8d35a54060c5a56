//go:build linux

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/model"
	"gseproc/model/opsem"
)

// tlog sends slog output to t.Log.
type tlog struct{ t testing.TB }

func (w tlog) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func testConfig(dataDir string) config.AgentConfig {
	cfg := config.DefaultAgent()
	cfg.IP = "127.0.0.1"
	cfg.DataDir = dataDir
	cfg.SampleInterval = config.Duration(100 * time.Millisecond)
	cfg.BackoffBase = config.Duration(20 * time.Millisecond)
	cfg.BackoffMax = config.Duration(200 * time.Millisecond)
	cfg.MinStartWait = config.Duration(time.Second)
	cfg.MinStopWait = config.Duration(500 * time.Millisecond)
	cfg.PollInterval = config.Duration(20 * time.Millisecond)
	return cfg
}

// newAgent starts an agent on dataDir (a fresh one when "") and runs it
// until the test ends.
func newAgent(t testing.TB, dataDir string, tune ...func(*config.AgentConfig)) *Agent {
	t.Helper()
	return newAgentBounded(t, dataDir, model.MaxHostProcs, tune...)
}

// newAgentBounded is newAgent for an agent that hosts at most maxProcs
// process definitions.
func newAgentBounded(t testing.TB, dataDir string, maxProcs int, tune ...func(*config.AgentConfig)) *Agent {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	cfg := testConfig(dataDir)
	for _, f := range tune {
		f(&cfg)
	}
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tlog{t}, nil))
	}
	a, err := newBounded(cfg, log, maxProcs)
	if err != nil {
		t.Fatal(err)
	}
	checkViewsAlways(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		a.Close()
		// Hosted processes outlive their agent by design. Kill what it
		// still knew once it can no longer restart anything: a kill while
		// it supervised (the per-process cleanups run first) is repaired
		// by a restart, which would leak a process past the test.
		a.mu.Lock()
		var pids []int
		var ps []model.Process
		for _, e := range a.procs {
			ps = append(ps, e.p)
			for _, u := range e.units {
				pids = append(pids, u.pid)
			}
		}
		a.mu.Unlock()
		for _, p := range ps {
			killByPidFiles(p)
		}
		for _, pid := range pids {
			killPid(pid)
		}
		// A restart cut short by Close may have launched a daemon that
		// had not written its pid file yet: it runs in the setup path.
		for _, p := range ps {
			killIn(p.Spec.Identity.SetupPath)
		}
	})
	return a
}

// checkViewsAlways checks, at every release of a's lock until the test
// ends, that what a status op reads (the views published, view.go) is the
// state in memory: a change made without publishing it fails the test.
// Benchmarks go without (it reads every entry at each release).
func checkViewsAlways(t testing.TB, a *Agent) {
	if _, bench := t.(*testing.B); bench {
		return
	}
	var stale string // guarded by a.mu
	a.mu.beforeUnlock = func() {
		if stale == "" {
			stale = a.checkViews()
		}
	}
	t.Cleanup(func() {
		a.mu.Lock()
		msg := stale
		a.mu.Unlock()
		if msg != "" {
			t.Errorf("a status view was left stale after a change under the agent lock: %s", msg)
		}
	})
}

// daemonScript is a resident process that writes its own pid file, logs
// SIGHUP and exits on SIGTERM.
const daemonScript = `#!/bin/sh
trap 'echo hup >> hups.log' HUP
trap 'exit 0' TERM
echo $$ > "$GSEPROC_PID_FILE"
while :; do sleep 0.05; done
`

// setup writes files into a fresh directory and returns a resident
// process definition whose start_cmd launches ./daemon.sh in the background.
func setup(t testing.TB, name string, files map[string]string) (model.Process, string) {
	t.Helper()
	dir := t.TempDir()
	if files == nil {
		files = map[string]string{"daemon.sh": daemonScript}
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := model.Process{
		Meta: model.Meta{Namespace: "test", Name: name},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, name+".pid")},
			Control:  model.Control{StartCmd: "./daemon.sh >/dev/null 2>&1 &"},
			Policy: model.Policy{AutoType: model.AutoResident, StartRetries: 3, OpTimeout: 10,
				StartCheckSecs: 0, StartCheckEndSecs: 10, InstanceNum: 1},
		},
	}
	// The pid-file window is wide: a start that passes returns as soon as
	// the daemon writes its pid, and a loaded machine may take seconds to.
	// Cases that expect a post-check failure narrow it themselves.
	t.Cleanup(func() { killByPidFiles(p) })
	return p, dir
}

// killByPidFiles kills what the test left running.
func killByPidFiles(p model.Process) {
	for i := 1; i <= max(p.Spec.Policy.InstanceNum, 1); i++ {
		killPid(pidFromFile(pidPathOf(p, i)))
	}
}

// killIn SIGKILLs every process whose working directory is dir or below
// it (also once dir has been removed).
func killIn(dir string) {
	if dir == "" || dir == "/" {
		return
	}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", ent.Name(), "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			killPid(pid)
		}
	}
}

// killPid SIGKILLs pid and its process group (unless it is the test's).
func killPid(pid int) {
	if pid <= 1 || pid == os.Getpid() {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != syscall.Getpgrp() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func do(t testing.TB, a *Agent, op model.OpType, p model.Process) model.AgentReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := a.Handle(ctx, model.AgentRequest{TaskID: "t", Op: op, Process: p})
	if r.Status == nil {
		t.Fatalf("%s: reply without status: %+v", op, r)
	}
	return r
}

func wantCode(t testing.TB, r model.AgentReply, code int, op string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: code %d (%s), want %d; output %q", op, r.Code, r.Message, code, r.Output)
	}
}

// eventually polls cond every 10 ms until it holds or d passes. The
// bounds are generous (slowBox at least): a passing test never waits them
// out, and a loaded machine (load 20-70 on 2 cores) running the race
// detector is slow.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	waitSeeing(t, d, what, func() (bool, string) { return cond(), "" })
}

// waitSeeing is eventually for a condition that also says what it saw:
// the test fails with the last of it.
func waitSeeing(t testing.TB, d time.Duration, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if seen != "" {
				t.Fatalf("not within %s: %s; last seen: %s", d, what, seen)
			}
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowBox is how long a test waits for what takes a moment on an idle
// machine: a loaded CI machine missed 10-15 s windows; a pass returns at
// once.
const slowBox = 60 * time.Second

// kinds lists the kinds of evs, to say what was seen.
func kinds(evs []model.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(e.Kind))
	}
	return b.String()
}

func livePid(path string) int {
	pid := pidFromFile(path)
	if _, ok := alive(pid); ok {
		return pid
	}
	return 0
}

// events collects an agent's events.
type events struct {
	mu  sync.Mutex
	evs []model.Event
}

func collect(t testing.TB, a *Agent) *events {
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a.SubscribeEvents(ctx, func(e model.Event) {
		ev.mu.Lock()
		ev.evs = append(ev.evs, e)
		ev.mu.Unlock()
	})
	return ev
}

// all is every event so far.
func (e *events) all() []model.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.evs)
}

func (e *events) of(kind model.EventKind) []model.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []model.Event
	for _, x := range e.evs {
		if x.Kind == kind {
			out = append(out, x)
		}
	}
	return out
}

func TestLifecycleOps(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	p, dir := setup(t, "svc", nil)

	r := do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start")
	if r.Message != "success" || r.Status.State != model.ProcRunning || !r.Status.Hosted || r.Status.PID <= 0 {
		t.Fatalf("start: %+v %+v", r, *r.Status)
	}
	pid := r.Status.PID
	if got := livePid(p.Spec.Identity.PidPath); got != pid {
		t.Fatalf("pid file %d, status %d", got, pid)
	}

	wantCode(t, do(t, a, model.OpStart, p), model.CodeAlreadyRunning, "start again")

	r = do(t, a, model.OpStatus, p)
	wantCode(t, r, model.CodeSuccess, "status")
	st := r.Status
	if st.PID != pid || !st.Hosted || st.State != model.ProcRunning || st.StartTime.IsZero() ||
		!strings.Contains(st.Cmdline, "daemon.sh") || st.Threads < 1 || st.MemRSS == 0 || st.Mem <= 0 {
		t.Fatalf("status: %+v", *st)
	}
	if d := time.Since(st.StartTime); d < 0 || d > slowBox {
		t.Fatalf("status start time %s is %s ago", st.StartTime, d)
	}

	pv := p
	pv.Spec.Control.VersionCmd = "echo 1.2.3; echo more"
	if v := do(t, a, model.OpStatus, pv).Status.Version; v != "1.2.3" {
		t.Fatalf("version %q", v)
	}
	// A status query of a process never operated on does not make it known.
	other, _ := setup(t, "other", nil)
	if r := do(t, a, model.OpStatus, other); r.Code != 0 || r.Status.PID != -1 || r.Status.State != model.ProcStopped || len(a.Statuses()) != 1 {
		t.Fatalf("status of an unknown process: %+v, known %d", *r.Status, len(a.Statuses()))
	}

	wantCode(t, do(t, a, model.OpRegister, p), model.CodeAlreadyRegistered, "register hosted")
	r = do(t, a, model.OpUnregister, p)
	wantCode(t, r, model.CodeSuccess, "unregister")
	if r.Status.Hosted || r.Status.PID != pid {
		t.Fatalf("unregister must only stop hosting: %+v", *r.Status)
	}
	r = do(t, a, model.OpRegister, p)
	wantCode(t, r, model.CodeSuccess, "register")
	if !r.Status.Hosted || r.Status.PID != pid {
		t.Fatalf("register: %+v", *r.Status)
	}

	// reload without reload_cmd: SIGHUP.
	wantCode(t, do(t, a, model.OpReload, p), model.CodeSuccess, "reload")
	eventually(t, slowBox, "daemon logs SIGHUP", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "hups.log"))
		return strings.Count(string(b), "hup") == 1
	})
	// reload with reload_cmd.
	pr := p
	pr.Spec.Control.ReloadCmd = "echo reloaded; kill -HUP $(cat svc.pid)"
	r = do(t, a, model.OpReload, pr)
	wantCode(t, r, model.CodeSuccess, "reload_cmd")
	if r.Output != "reloaded" {
		t.Fatalf("reload output %q", r.Output)
	}

	// restart without restart_cmd: stop then start, a new pid, still hosted.
	r = do(t, a, model.OpRestart, p)
	wantCode(t, r, model.CodeSuccess, "restart")
	if r.Status.PID == pid || r.Status.PID <= 0 || !r.Status.Hosted {
		t.Fatalf("restart: %+v", *r.Status)
	}
	if _, ok := alive(pid); ok {
		t.Fatalf("old pid %d alive after restart", pid)
	}
	pid = r.Status.PID

	// restart with restart_cmd.
	prc := p
	prc.Spec.Control.RestartCmd = "kill $(cat svc.pid); sleep 0.1; ./daemon.sh >/dev/null 2>&1 &"
	r = do(t, a, model.OpRestart, prc)
	wantCode(t, r, model.CodeSuccess, "restart_cmd")
	if r.Status.PID == pid || r.Status.PID <= 0 {
		t.Fatalf("restart_cmd: %+v", *r.Status)
	}
	pid = r.Status.PID

	r = do(t, a, model.OpStop, p)
	wantCode(t, r, model.CodeSuccess, "stop")
	if r.Status.Hosted || r.Status.PID != -1 || r.Status.State != model.ProcStopped {
		t.Fatalf("stop: %+v", *r.Status)
	}
	if _, ok := alive(pid); ok {
		t.Fatalf("pid %d alive after stop", pid)
	}
	r = do(t, a, model.OpStop, p)
	wantCode(t, r, model.CodeNotRunning, "stop again")
	if !strings.Contains(r.Message, "not running") {
		t.Fatalf("829 message %q", r.Message)
	}
	wantCode(t, do(t, a, model.OpReload, p), model.CodeNotRunning, "reload stopped")
	wantCode(t, do(t, a, model.OpKill, p), model.CodeNotRunning, "kill stopped")

	expired := a.Handle(context.Background(), model.AgentRequest{Op: model.OpStart, Process: p, Deadline: time.Now().Add(-time.Second)})
	if expired.Code != model.CodeTimeout || expired.Status == nil || livePid(p.Spec.Identity.PidPath) != 0 {
		t.Fatalf("past deadline: %+v", expired)
	}

	r = do(t, a, model.OpType(5), p)
	wantCode(t, r, model.CodeIllegalOp, "op 5")
	if r.Status.ProcKey != "test:svc" {
		t.Fatalf("832 status %+v", *r.Status)
	}

	// The registry on disk holds exactly the hosted processes.
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start for registry")
	recs, err := loadRegistry(filepath.Join(a.cfg.DataDir, RegistryFile))
	if err != nil || len(recs) != 1 || recs[0].ValueKey != "test:svc" || recs[0].ProcName != "svc" || recs[0].GSEProc == nil {
		t.Fatalf("registry: %v %+v", err, recs)
	}
	wantCode(t, do(t, a, model.OpKill, p), model.CodeSuccess, "kill")
	recs, _ = loadRegistry(filepath.Join(a.cfg.DataDir, RegistryFile))
	if len(recs) != 0 {
		t.Fatalf("registry after kill: %+v", recs)
	}
}

func TestKillAndStopReachTheProcessGroup(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	// The daemon has a child of its own; both are in the group the agent made.
	p, _ := setup(t, "tree", map[string]string{"tree.sh": `#!/bin/sh
sleep 300 &
echo $! > child.pid
echo $$ > "$GSEPROC_PID_FILE"
wait
`})
	p.Spec.Control.StartCmd = "./tree.sh >/dev/null 2>&1 &"
	for _, op := range []model.OpType{model.OpStop, model.OpKill} {
		wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
		childPid := 0
		eventually(t, slowBox, "child pid file", func() bool {
			childPid = livePid(filepath.Join(p.Spec.Identity.SetupPath, "child.pid"))
			return childPid > 0
		})
		wantCode(t, do(t, a, op, p), model.CodeSuccess, op.String())
		eventually(t, slowBox, op.String()+" reaches the daemon's child", func() bool {
			_, live := alive(childPid)
			return !live
		})
	}
}

func TestResultCodes(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	outside := func(t *testing.T, p model.Process) {
		// A process started outside the agent, named by the pid file.
		if err := os.WriteFile(p.Spec.Identity.PidPath, []byte(strconv.Itoa(startSleep(t))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		op     model.OpType
		edit   func(p *model.Process)
		before func(t *testing.T, p model.Process)
		code   int
		msg    string // substring of the message
		out    string // substring of the output
	}{
		{name: "start of a process running outside", op: model.OpStart, before: outside, code: model.CodeAlreadyRunning, msg: "already running"},
		{name: "start_cmd fails", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Control.StartCmd = "echo broken config >&2; exit 3" },
			code: model.CodeCommandFailed, msg: "exit status 3", out: "broken config"},
		{name: "start_cmd empty", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Control.StartCmd = "" }, code: model.CodeCommandFailed, msg: "start_cmd is empty"},
		{name: "no pid file after start", op: model.OpStart,
			edit: func(p *model.Process) { p.Spec.Control.StartCmd = "true"; p.Spec.Policy.StartCheckEndSecs = 1 },
			code: model.CodePostCheckFailed, msg: "not running"},
		{name: "pid file names a process older than the start", op: model.OpStart,
			edit: func(p *model.Process) {
				p.Spec.Control.StartCmd = "echo " + strconv.Itoa(os.Getpid()) + " > " + p.Spec.Identity.PidPath
				p.Spec.Policy.StartCheckEndSecs = 1
			},
			code: model.CodePostCheckFailed, msg: "started before"},
		{name: "process dies before start_check_secs", op: model.OpStart,
			edit: func(p *model.Process) {
				// It writes its pid and exits at once; it is checked 2 s after.
				p.Spec.Control.StartCmd = "sh -c 'echo $$ > " + p.Spec.Identity.PidPath + "' >/dev/null 2>&1 &"
				p.Spec.Policy.StartCheckSecs, p.Spec.Policy.StartCheckEndSecs = 2, 2
			},
			code: model.CodePostCheckFailed, msg: "not running"},
		{name: "start_cmd outlives op_timeout", op: model.OpStart,
			edit: func(p *model.Process) { p.Spec.Control.StartCmd = "sleep 30"; p.Spec.Policy.OpTimeout = 1 },
			code: model.CodeCommandFailed, msg: "op_timeout"},
		{name: "bat shell", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Control.ShellExt = "bat" },
			code: model.CodeCommandFailed, msg: "cmd_shell_ext bat is not supported on this OS"},
		{name: "ps1 shell on stop", op: model.OpStop, before: outside,
			edit: func(p *model.Process) { p.Spec.Control.ShellExt = "ps1"; p.Spec.Control.StopCmd = "stop.ps1" },
			code: model.CodeCommandFailed, msg: "cmd_shell_ext ps1 is not supported on this OS"},
		{name: "no such account", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Identity.User = "nosuchuser" },
			code: model.CodeCommandFailed, msg: `account "nosuchuser": no such user`},
		{name: "setup_path missing", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Identity.SetupPath = "/nonexistent/dir" },
			code: model.CodeCommandFailed, msg: "setup_path /nonexistent/dir"},
		{name: "stop not running", op: model.OpStop, code: model.CodeNotRunning, msg: "not running"},
		{name: "stop_cmd leaves it running", op: model.OpStop, before: outside,
			edit: func(p *model.Process) { p.Spec.Control.StopCmd = "echo pretending" },
			code: model.CodePostCheckFailed, msg: "stop process"},
		{name: "stop_cmd fails", op: model.OpStop, before: outside,
			edit: func(p *model.Process) { p.Spec.Control.StopCmd = "exit 9" },
			code: model.CodeCommandFailed, msg: "exit status 9"},
		{name: "kill_cmd", op: model.OpKill, before: outside,
			edit: func(p *model.Process) { p.Spec.Control.KillCmd = "kill -9 $(cat $GSEPROC_PID_FILE); echo killed" },
			code: model.CodeSuccess, out: "killed"},
		{name: "reload_cmd fails", op: model.OpReload, before: outside,
			edit: func(p *model.Process) { p.Spec.Control.ReloadCmd = "echo nope; exit 1" },
			code: model.CodeCommandFailed, out: "nope"},
		{name: "register", op: model.OpRegister, before: outside, code: model.CodeSuccess},
		{name: "unknown op", op: model.OpType(42), code: model.CodeIllegalOp, msg: "illegal op type"},
		{name: "invalid definition", op: model.OpStart, edit: func(p *model.Process) { p.Spec.Identity.PidPath = "" },
			code: model.CodeCommandFailed, msg: "process.spec.identity.pid_path"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, fmt.Sprintf("rc%d", i), nil)
			if tc.edit != nil {
				tc.edit(&p)
			}
			if tc.before != nil {
				tc.before(t, p)
			}
			r := do(t, a, tc.op, p)
			wantCode(t, r, tc.code, tc.name)
			if !strings.Contains(r.Message, tc.msg) || !strings.Contains(r.Output, tc.out) {
				t.Fatalf("message %q output %q, want %q and %q", r.Message, r.Output, tc.msg, tc.out)
			}
			if r.Message == "" || r.Status.ProcKey != p.Key() {
				t.Fatalf("reply %+v", r)
			}
			if tc.code == model.CodePostCheckFailed && tc.op == model.OpStop && !strings.HasPrefix(r.Message, "stop") {
				t.Fatalf("stop post-check message must start with stop: %q", r.Message)
			}
		})
	}
}

// startSleep starts `sleep 60` as a child of the test and returns its pid.
func startSleep(t testing.TB) int {
	t.Helper()
	var attr os.ProcAttr
	attr.Sys = &syscall.SysProcAttr{Setpgid: true}
	proc, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Kill(); proc.Wait() })
	return proc.Pid
}

// TestHostedRestartAfterSIGKILL kills a hosted process with SIGKILL and
// measures until its replacement runs; supervisord takes ~1 s.
func TestHostedRestartAfterSIGKILL(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "", func(c *config.AgentConfig) { c.StableAfter = config.Duration(100 * time.Millisecond) })
	ev := collect(t, a)
	p, _ := setup(t, "phoenix", nil)
	p.Spec.Policy.StartRetries = 1 // each restart stays up past stable_after: the count resets
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
	lat := restartLatencies(t, a, p, 5)
	t.Logf("restart after SIGKILL: %v (p50 %v)", lat, lat[len(lat)/2])
	waitSeeing(t, slowBox, "5 restart events", func() (bool, string) {
		return len(ev.of(model.EventRestartSuccess)) == 5, "events " + kinds(ev.all())
	})
	e := ev.of(model.EventRestartSuccess)[0]
	if e.ProcKey != p.Key() || e.Host.IP != "127.0.0.1" || !strings.Contains(e.Message, "restart it success") {
		t.Fatalf("event %+v", e)
	}
	st := do(t, a, model.OpStatus, p).Status
	if st.Restarts != 5 || st.State != model.ProcRunning {
		t.Fatalf("status after restarts: %+v", *st)
	}
}

// restartLatencies SIGKILLs p n times and returns the sorted times until
// the pid file names a new live process.
func restartLatencies(t testing.TB, a *Agent, p model.Process, n int) []time.Duration {
	var lat []time.Duration
	path := p.Spec.Identity.PidPath
	for i := 0; i < n; i++ {
		var pid int
		waitSeeing(t, slowBox, "running and watched", func() (bool, string) {
			pid = livePid(path)
			if pid == 0 {
				return false, "no live pid in the pid file"
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			u := a.procs[p.Key()].units[0]
			return u.pid == pid && u.state == model.ProcRunning && u.stopWatch != nil,
				fmt.Sprintf("pid file %d, unit pid %d %s, watched %v", pid, u.pid, u.state, u.stopWatch != nil)
		})
		time.Sleep(150 * time.Millisecond) // past stable_after: a fresh failure, restarted at once
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := t0.Add(slowBox)
		for {
			np := livePid(path)
			if np != 0 && np != pid {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d of pid %d: not restarted within %s; live pid in the pid file: %d", i, pid, slowBox, np)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat
}

func BenchmarkRestartAfterSIGKILL(b *testing.B) {
	a := newAgent(b, "", func(c *config.AgentConfig) { c.StableAfter = config.Duration(100 * time.Millisecond) })
	p, _ := setup(b, "bench", nil)
	p.Spec.Policy.StartRetries = 1
	wantCode(b, do(b, a, model.OpStart, p), model.CodeSuccess, "start")
	b.ResetTimer()
	lat := restartLatencies(b, a, p, b.N)
	b.StopTimer()
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(lat)), "mean-ms")
}

// BenchmarkRestartExecItself is BenchmarkRestartAfterSIGKILL for a
// start_cmd that writes its pid file and execs the process (no daemon,
// the agent's own child, as s6 or supervisord run one): kill -9 to the
// new process's pid in the pid file (exec'ed), and to the agent watching
// it as RUNNING (the start check passed).
func BenchmarkRestartExecItself(b *testing.B) {
	a := newAgent(b, "", func(c *config.AgentConfig) { c.StableAfter = config.Duration(100 * time.Millisecond) })
	p, _ := setup(b, "bench", nil)
	p.Spec.Control.StartCmd = `echo $$ > "$GSEPROC_PID_FILE" && exec sleep 1000`
	p.Spec.Policy.StartRetries = 1
	wantCode(b, do(b, a, model.OpStart, p), model.CodeSuccess, "start")
	path := p.Spec.Identity.PidPath
	watched := func(pid int) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		u := a.procs[p.Key()].units[0]
		return u.pid == pid && u.state == model.ProcRunning && u.stopWatch != nil
	}
	var execed, running []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var pid int
		eventually(b, slowBox, "running and watched", func() bool {
			pid = livePid(path)
			return pid != 0 && watched(pid)
		})
		time.Sleep(150 * time.Millisecond) // past stable_after: restarted at once
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		deadline := t0.Add(slowBox)
		np := 0
		for np == 0 || np == pid {
			if time.Now().After(deadline) {
				b.Fatalf("kill %d: not restarted within %s", i, slowBox)
			}
			time.Sleep(time.Millisecond)
			np = livePid(path)
		}
		execed = append(execed, time.Since(t0))
		for !watched(np) {
			if time.Now().After(deadline) {
				b.Fatalf("kill %d: restarted, not watched within %s", i, slowBox)
			}
			time.Sleep(time.Millisecond)
		}
		running = append(running, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(execed)
	slices.Sort(running)
	b.ReportMetric(float64(execed[len(execed)/2].Microseconds())/1000, "exec-p50-ms")
	b.ReportMetric(float64(running[len(running)/2].Microseconds())/1000, "running-p50-ms")
	b.ReportMetric(float64(running[len(running)*9/10].Microseconds())/1000, "running-p90-ms")
}

func TestCrashLoopBacksOffAndGivesUp(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "", func(c *config.AgentConfig) {
		c.BackoffBase, c.BackoffMax = config.Duration(100*time.Millisecond), config.Duration(time.Second)
	})
	ev := collect(t, a)
	// Comes up (passes the start check), then dies after 0.2 s.
	p, dir := setup(t, "flaky", map[string]string{"flaky.sh": `#!/bin/sh
date +%s.%N >> starts.log
echo $$ > "$GSEPROC_PID_FILE"
sleep 0.2
date +%s.%N >> deaths.log
exit 1
`})
	p.Spec.Control.StartCmd = "./flaky.sh >/dev/null 2>&1 &"
	p.Spec.Policy.StartRetries = 3
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
	waitSeeing(t, slowBox, "given up", func() (bool, string) {
		return len(ev.of(model.EventGiveUp)) == 1, "events " + kinds(ev.all())
	})
	st := do(t, a, model.OpStatus, p).Status
	if st.State != model.ProcFatal || !st.Hosted || st.PID != -1 || !strings.Contains(st.Message, "given up") {
		t.Fatalf("status after give-up: %+v", *st)
	}
	if n := len(ev.of(model.EventRestartSuccess)); n != 3 {
		t.Fatalf("%d restarts, want start_retries 3", n)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "starts.log"))
	starts := strings.Fields(string(b))
	if len(starts) != 4 {
		t.Fatalf("%d starts, want 1 + 3 retries: %q", len(starts), starts)
	}
	// The gaps between a death and the next start grow: backoff 0, then
	// ~100 ms, ~200 ms (+-20% jitter). Load can only lengthen them.
	b, _ = os.ReadFile(filepath.Join(dir, "deaths.log"))
	deaths := strings.Fields(string(b))
	var gaps []float64
	for i := 1; i < len(starts); i++ {
		x, _ := strconv.ParseFloat(deaths[i-1], 64)
		y, _ := strconv.ParseFloat(starts[i], 64)
		gaps = append(gaps, y-x)
	}
	t.Logf("gaps after each death: %.3f", gaps)
	if gaps[1] < 0.075 || gaps[2] < 0.155 {
		t.Fatalf("no exponential backoff: gaps %.3f", gaps)
	}
	// Nothing more happens; a manual start works again.
	time.Sleep(300 * time.Millisecond)
	if b2, _ := os.ReadFile(filepath.Join(dir, "starts.log")); len(strings.Fields(string(b2))) != 4 {
		t.Fatal("restarted after give-up")
	}
	r := do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "manual start after give-up")
	if r.Status.State == model.ProcFatal {
		t.Fatalf("state after manual start: %+v", *r.Status)
	}
	// The process lives 0.2 s: a loaded machine may answer the stop after
	// it died again, while it waits in backoff; then the stop is 829 (not
	// running: the opsem rule for a stop in backoff), nothing else.
	if stop := do(t, a, model.OpStop, p); stop.Code != model.CodeSuccess {
		wantCode(t, stop, model.CodeNotRunning, "stop of a flaky process that died again")
	}
}

func TestRestartFailuresAreReportedThenGivenUp(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	p, dir := setup(t, "broken", nil)
	p.Spec.Control.StartCmd = "[ -e broken ] && { echo cannot start: broken; exit 1; }; ./daemon.sh >/dev/null 2>&1 &"
	p.Spec.Policy.StartRetries = 2
	r := do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start")
	if err := os.WriteFile(filepath.Join(dir, "broken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(r.Status.PID, syscall.SIGKILL)
	eventually(t, slowBox, "given up", func() bool { return len(ev.of(model.EventGiveUp)) == 1 })
	failed := ev.of(model.EventRestartFailed)
	if len(failed) != 2 || !strings.Contains(failed[0].Message, "cannot start: broken") {
		t.Fatalf("restart failed events: %+v", failed)
	}
	if st := do(t, a, model.OpStatus, p).Status; st.State != model.ProcFatal || !st.Hosted {
		t.Fatalf("status %+v", *st)
	}
	// Repaired, a manual start brings it back; stop then cancels hosting.
	os.Remove(filepath.Join(dir, "broken"))
	r = do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start after repair")
	if r.Status.State != model.ProcRunning {
		t.Fatalf("status %+v", *r.Status)
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	a := &Agent{cfg: testConfig(t.TempDir())}
	// backoff(k, interval) is the delay the restart policy gives restart
	// attempt k (0-based) of a hosted process that did not stay up.
	backoff := func(k, interval int) time.Duration {
		var p model.Process
		p.Spec.Policy.StartRetries, p.Spec.Policy.StartInterval = k+1, interval
		next, _ := a.policy(p).OnExit(opsem.Tracker{Attempts: k},
			opsem.Exit{Status: 1, Hosted: true, Type: model.AutoResident, Now: time.Now()}, rand.Float64())
		return next.Delay
	}
	a.cfg.BackoffBase = config.Duration(100 * time.Millisecond)
	a.cfg.BackoffMax = config.Duration(time.Second)
	if d := backoff(0, 0); d != 0 {
		t.Fatalf("first restart waits %s", d)
	}
	for k, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second} {
		for i := 0; i < 20; i++ {
			d := backoff(k, 0)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("backoff(%d) = %s, want %s +-20%%", k, d, want)
			}
		}
	}
	a.cfg.BackoffMax = config.Duration(time.Minute)
	if d := backoff(1, 3); d < 2400*time.Millisecond || d > 3600*time.Millisecond {
		t.Fatalf("start_interval 3: %s", d)
	}
}

func TestMemoryLimitStopsTheHog(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	a := newAgent(t, "")
	ev := collect(t, a)
	const hogBytes = 64 << 20
	limit := float64(hogBytes/2) * 100 / float64(a.m.memTotal) // half of what it takes
	p, _ := setup(t, "hog", map[string]string{"hog.py": `import os, sys, time
a = b'x' * ` + strconv.Itoa(hogBytes) + `
open(os.environ["GSEPROC_PID_FILE"], "w").write(str(os.getpid()))
time.sleep(60)
`})
	// The interpreter found, by its path: the one checked is the one run.
	p.Spec.Control.StartCmd = python + " hog.py >/dev/null 2>&1 &"
	p.Spec.Resource.Mem = limit
	p.Spec.Policy.StartCheckEndSecs = 60 // an interpreter filling 64 MB is slow on a loaded machine
	r := do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start")
	pid := r.Status.PID
	eventually(t, 30*time.Second, "limit event", func() bool { return len(ev.of(model.EventLimitExceeded)) == 1 })
	e := ev.of(model.EventLimitExceeded)[0]
	if e.Value <= limit || e.Value > 100 || !strings.Contains(e.Message, "mem") {
		t.Fatalf("event %+v (limit %.3f%%)", e, limit)
	}
	t.Logf("limit %.3f%%, measured %.3f%%: %s", limit, e.Value, e.Message)
	eventually(t, slowBox, "hog stopped", func() bool { _, live := alive(pid); return !live })
	eventually(t, slowBox, "state stopped", func() bool {
		st := do(t, a, model.OpStatus, p).Status
		return st.State == model.ProcStopped && st.PID == -1
	})
	// Held: not restarted.
	time.Sleep(300 * time.Millisecond)
	if livePid(p.Spec.Identity.PidPath) != 0 {
		t.Fatal("hog restarted after a limit stop")
	}
}

func TestCPUIsMeasuredAsDelta(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	p, _ := setup(t, "spin", map[string]string{"spin.sh": `#!/bin/sh
echo $$ > "$GSEPROC_PID_FILE"
while :; do :; done
`})
	p.Spec.Control.StartCmd = "./spin.sh >/dev/null 2>&1 &"
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
	// One core of a.m.ncpu busy: about 100/ncpu percent of the machine, far
	// less when other processes compete for the cores (the test suite runs
	// on loaded machines), never more.
	want := 100 / float64(a.m.ncpu)
	eventually(t, 30*time.Second, "cpu sampled, at most one core", func() bool {
		st := do(t, a, model.OpStatus, p).Status
		return st.CPU > 0.5 && st.CPU <= want*1.3
	})
	wantCode(t, do(t, a, model.OpKill, p), model.CodeSuccess, "kill")
}

func TestCPULimitStopsTheSpinner(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	p, _ := setup(t, "spin2", map[string]string{"spin.sh": `#!/bin/sh
echo $$ > "$GSEPROC_PID_FILE"
while :; do :; done
`})
	p.Spec.Control.StartCmd = "./spin.sh >/dev/null 2>&1 &"
	// 1% of the machine: a spinner gets more even when a loaded machine
	// gives it a small share of a core.
	p.Spec.Resource.CPU = 1
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
	// Over the limit for breach_count samples of 100 ms in a row: the
	// spinner must be charged a 10 ms clock tick in each, about one sample
	// in three when a loaded machine (load 58) leaves it ~3% of a core.
	// Waited for generously (a pass returns as soon as it is seen).
	eventually(t, 90*time.Second, "cpu limit event", func() bool { return len(ev.of(model.EventLimitExceeded)) == 1 })
	if e := ev.of(model.EventLimitExceeded)[0]; e.Value <= 1 || !strings.Contains(e.Message, "cpu") {
		t.Fatalf("event %+v", e)
	}
	eventually(t, 60*time.Second, "spinner stopped", func() bool { return livePid(p.Spec.Identity.PidPath) == 0 })
}

func TestPeriodicRunsOnTimeWithoutOverlap(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	job := `#!/bin/sh
[ -e running ] && echo overlap >> overlaps.log
touch running
date +%s.%N >> runs.log
sleep "$1"
rm -f running
`
	short, sdir := setup(t, "tick", map[string]string{"job.sh": job})
	short.Spec.Control.StartCmd = "./job.sh 0.1"
	short.Spec.Policy.AutoType, short.Spec.Policy.CycleTime = model.AutoPeriodic, 1
	long, ldir := setup(t, "slow", map[string]string{"job.sh": job})
	long.Spec.Control.StartCmd = "./job.sh 1.5"
	long.Spec.Policy.AutoType, long.Spec.Policy.CycleTime = model.AutoPeriodic, 1

	// The schedule's grid begins once each start op is asked for: a run
	// is never before its own tick, and a late one does not make the
	// later ones come sooner to catch up.
	shortFrom := float64(time.Now().UnixNano()) / 1e9
	wantCode(t, do(t, a, model.OpStart, short), model.CodeSuccess, "start short")
	longFrom := float64(time.Now().UnixNano()) / 1e9
	wantCode(t, do(t, a, model.OpStart, long), model.CodeSuccess, "start long")
	wantCode(t, do(t, a, model.OpStart, short), model.CodeAlreadyRunning, "start scheduled")

	runs := func(dir string) []float64 {
		b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
		var out []float64
		for _, f := range strings.Fields(string(b)) {
			x, _ := strconv.ParseFloat(f, 64)
			out = append(out, x)
		}
		sort.Float64s(out)
		return out
	}
	// Wait for runs rather than a fixed time: a loaded machine may start
	// the shells late, and the schedule must still hold. About 3 s
	// unloaded; the deadline is generous (a pass returns at once).
	eventually(t, 90*time.Second, "4 short and 2 long runs", func() bool { return len(runs(sdir)) >= 4 && len(runs(ldir)) >= 2 })
	wantCode(t, do(t, a, model.OpStop, short), model.CodeSuccess, "stop short")
	wantCode(t, do(t, a, model.OpStop, long), model.CodeSuccess, "stop long")

	// What the schedule guarantees, as lower bounds a loaded machine
	// cannot break (it only makes a run, or its shell's date, late): the
	// first run is the start op's, then one run at most per tick of the
	// 1 s grid from the start, so run i (from 0) is never before i cycles
	// after the start was asked for. Two runs' gap is not bounded
	// below: a run late on its tick may be followed by one on time (seen:
	// 0.596 s apart at load 58).
	onGrid := func(name string, from float64, rs []float64) {
		t.Helper()
		for i, x := range rs {
			if x < from+float64(i)-0.01 {
				t.Fatalf("%s job: run %d at %.3f s after its start, before its tick (%d s): %v", name, i, x-from, i, rs)
			}
		}
	}
	s := runs(sdir)
	onGrid("short", shortFrom, s)
	// A 1.5 s run skips the ticks while it is alive: the next run comes
	// after it ended, at least its length after its date (a lower bound).
	l := runs(ldir)
	onGrid("long", longFrom, l)
	for i := 1; i < len(l); i++ {
		if gap := l[i] - l[i-1]; gap < 1.45 {
			t.Fatalf("long job (1.5 s, cycle 1 s) runs %.3f s apart: ticks not skipped while alive: %v", gap, l)
		}
	}
	for _, dir := range []string{sdir, ldir} {
		if b, err := os.ReadFile(filepath.Join(dir, "overlaps.log")); err == nil {
			t.Fatalf("runs overlapped in %s: %s", dir, b)
		}
	}
	// Stopped: no further run, though more than a cycle passes.
	n := len(runs(sdir))
	time.Sleep(1200 * time.Millisecond)
	if got := len(runs(sdir)); got != n {
		t.Fatalf("ran after stop: %d runs, %d at stop", got, n)
	}
}

func TestOneShot(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	clean, cdir := setup(t, "once", nil)
	clean.Spec.Control.StartCmd = "echo run >> runs.log"
	clean.Spec.Policy.AutoType = model.AutoOneShot
	r := do(t, a, model.OpStart, clean)
	wantCode(t, r, model.CodeSuccess, "one-shot start")
	if r.Status.State != model.ProcExited || r.Status.PID != -1 {
		t.Fatalf("one-shot status: %+v", *r.Status)
	}

	// A one-shot's result is its exit status, however long after
	// min_start_wait (1 s here) and start_check_secs (0) it exits: no
	// timing window decides it. It failed: not hosted, not retried.
	count := func(dir string) int {
		b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
		return strings.Count(string(b), "run")
	}
	late, ldir := setup(t, "oncelate", nil)
	late.Spec.Control.StartCmd = "echo run >> runs.log; sleep 1.5; exit 5"
	late.Spec.Policy.AutoType = model.AutoOneShot
	late.Spec.Policy.StartRetries = 2
	r = do(t, a, model.OpStart, late)
	wantCode(t, r, model.CodeCommandFailed, "one-shot exiting 5 after the start check")
	if !strings.Contains(r.Message, "exit status 5") || r.Status.ExitStatus != 5 || r.Status.State.Up() || r.Status.Hosted {
		t.Fatalf("one-shot exiting 5 late: %q, status %+v", r.Message, *r.Status)
	}

	// A one-shot still running when its op_timeout (1 s) ends is answered
	// running and hosted; when it fails it is retried by its policy, then
	// given up. It exits when the test says so (a file), not on a clock.
	failing, fdir := setup(t, "oncefail", nil)
	failing.Spec.Control.StartCmd = "echo run >> runs.log; while [ ! -e go ]; do sleep 0.05; done; exit 4"
	failing.Spec.Policy.AutoType = model.AutoOneShot
	failing.Spec.Policy.StartRetries = 2
	failing.Spec.Policy.OpTimeout = 1
	r = do(t, a, model.OpStart, failing)
	wantCode(t, r, model.CodeSuccess, "failing one-shot start")
	if r.Status.State != model.ProcRunning || !strings.Contains(r.Status.Message, "still running after op_timeout") {
		t.Fatalf("one-shot running past op_timeout: %+v", *r.Status)
	}
	if err := os.WriteFile(filepath.Join(fdir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "failing one-shot given up", func() bool { return len(ev.of(model.EventGiveUp)) == 1 })
	if n := count(fdir); n != 3 {
		t.Fatalf("failing one-shot ran %d times, want 1 + 2 retries", n)
	}
	if st := do(t, a, model.OpStatus, failing).Status; st.ExitStatus != 4 || st.State != model.ProcFatal {
		t.Fatalf("failing one-shot status %+v", *st)
	}
	if n := count(cdir); n != 1 {
		t.Fatalf("clean one-shot ran %d times", n)
	}
	if n := count(ldir); n != 1 {
		t.Fatalf("one-shot that failed its start ran %d times", n)
	}
	// A one-shot failing at once is a command failure too, also with
	// start_check_secs 0, on an agent whose min_start_wait is short or
	// wide.
	fast, _ := setup(t, "oncefast", nil)
	fast.Spec.Control.StartCmd = "exit 5"
	fast.Spec.Policy.AutoType = model.AutoOneShot
	short := newAgent(t, "", func(c *config.AgentConfig) { c.MinStartWait = config.Duration(time.Millisecond) })
	wide := newAgent(t, "", func(c *config.AgentConfig) { c.MinStartWait = config.Duration(30 * time.Second) })
	for _, ag := range []*Agent{short, wide} {
		r = do(t, ag, model.OpStart, fast)
		wantCode(t, r, model.CodeCommandFailed, "one-shot failing at once")
		if !strings.Contains(r.Message, "exit status 5") {
			t.Fatalf("one-shot failing at once: %q", r.Message)
		}
	}
}

func TestInstances(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	p, _ := setup(t, "multi", nil)
	p.Spec.Policy.InstanceNum = 3
	r := do(t, a, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start")
	if !strings.HasPrefix(r.Status.Message, "3/3 instances running") {
		t.Fatalf("status message %q", r.Status.Message)
	}
	var pids []int
	for i := 1; i <= 3; i++ {
		pid := livePid(pidPathOf(p, i))
		if pid == 0 || slices.Contains(pids, pid) {
			t.Fatalf("instance %d: pid %d (others %v)", i, pid, pids)
		}
		pids = append(pids, pid)
	}
	wantCode(t, do(t, a, model.OpStart, p), model.CodeAlreadyRunning, "start all running")
	// One instance dies: it alone is restarted.
	_ = syscall.Kill(pids[1], syscall.SIGKILL)
	eventually(t, slowBox, "instance 2 restarted", func() bool {
		np := livePid(pidPathOf(p, 2))
		return np != 0 && np != pids[1]
	})
	if livePid(pidPathOf(p, 1)) != pids[0] || livePid(pidPathOf(p, 3)) != pids[2] {
		t.Fatal("other instances disturbed")
	}
	wantCode(t, do(t, a, model.OpStop, p), model.CodeSuccess, "stop")
	for i := 1; i <= 3; i++ {
		if livePid(pidPathOf(p, i)) != 0 {
			t.Fatalf("instance %d alive after stop", i)
		}
	}
}

func TestAgentRestartReadoptsProcesses(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg := testConfig(dataDir)
	a1, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1) }()
	keep, _ := setup(t, "keep", nil)
	gone, _ := setup(t, "gone", nil)
	reused, _ := setup(t, "reused", nil)
	pids := map[string]int{}
	for _, p := range []model.Process{keep, gone, reused} {
		r := do(t, a1, model.OpStart, p)
		wantCode(t, r, model.CodeSuccess, "start "+p.Meta.Name)
		pids[p.Meta.Name] = r.Status.PID
	}
	// A process given up (start_retries 0) stays given up across the restart.
	fatal, _ := setup(t, "fatal", nil)
	fatal.Spec.Policy.StartRetries = 0
	r := do(t, a1, model.OpStart, fatal)
	wantCode(t, r, model.CodeSuccess, "start fatal")
	_ = syscall.Kill(r.Status.PID, syscall.SIGKILL)
	eventually(t, slowBox, "fatal", func() bool { return do(t, a1, model.OpStatus, fatal).Status.State == model.ProcFatal })
	cancel1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	// The agent is gone; its processes are not.
	for name, pid := range pids {
		if _, live := alive(pid); !live {
			t.Fatalf("%s (pid %d) died with the agent", name, pid)
		}
	}
	// While it was away: one process died, another died and its pid file
	// now names an unrelated process (as if the pid were reused).
	for _, name := range []string{"gone", "reused"} {
		_ = syscall.Kill(pids[name], syscall.SIGKILL)
		waitSeeing(t, slowBox, name+" dead", func() (bool, string) {
			st, live := alive(pids[name])
			return !live, fmt.Sprintf("pid %d alive, state %q", pids[name], st.State)
		})
	}
	stranger := startSleep(t)
	if err := os.WriteFile(reused.Spec.Identity.PidPath, []byte(strconv.Itoa(stranger)), 0o644); err != nil {
		t.Fatal(err)
	}

	a2 := newAgent(t, dataDir)
	eventually(t, slowBox, "all three running under the new agent", func() bool {
		sts := a2.Statuses()
		for _, st := range sts {
			if st.ProcKey != "test:fatal" && (st.State != model.ProcRunning || !st.Hosted) {
				return false
			}
		}
		return len(sts) == 4
	})
	if st := do(t, a2, model.OpStatus, fatal).Status; st.State != model.ProcFatal || !st.Hosted || st.PID != -1 {
		t.Fatalf("given-up process after agent restart: %+v", *st)
	}
	if st := do(t, a2, model.OpStatus, keep).Status; st.PID != pids["keep"] {
		t.Fatalf("keep: pid %d, want the original %d re-adopted", st.PID, pids["keep"])
	}
	if np := livePid(gone.Spec.Identity.PidPath); np == 0 || np == pids["gone"] {
		t.Fatalf("gone: not restarted (pid %d)", np)
	}
	np := livePid(reused.Spec.Identity.PidPath)
	if np == 0 || np == stranger {
		t.Fatalf("reused: pid %d: the stranger %d was adopted", np, stranger)
	}
	if _, live := alive(stranger); !live {
		t.Fatal("the stranger was killed")
	}
	// The re-adopted process is supervised: SIGKILL brings it back.
	_ = syscall.Kill(pids["keep"], syscall.SIGKILL)
	eventually(t, slowBox, "re-adopted process restarted", func() bool {
		np := livePid(keep.Spec.Identity.PidPath)
		return np != 0 && np != pids["keep"]
	})
}

func TestUserSwitching(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch accounts")
	}
	a := newAgent(t, "")
	p, dir := setup(t, "asnobody", nil)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	p.Spec.Identity.User = "nobody"
	p.Spec.Control.StartCmd = "id -un > whoami.txt; echo $USER >> whoami.txt; ./daemon.sh >/dev/null 2>&1 &"
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start as nobody")
	b, _ := os.ReadFile(filepath.Join(dir, "whoami.txt"))
	if strings.Join(strings.Fields(string(b)), " ") != "nobody nobody" {
		t.Fatalf("ran as %q", b)
	}
	wantCode(t, do(t, a, model.OpStop, p), model.CodeSuccess, "stop")
}

func TestCredentialErrors(t *testing.T) {
	p := model.Process{}
	p.Spec.Identity.User = "nosuchuser"
	if _, err := credential(p); err == nil || !strings.Contains(err.Error(), `account "nosuchuser": no such user`) {
		t.Fatalf("nosuchuser: %v", err)
	}
	p.Spec.Identity.User = ""
	if c, err := credential(p); c != nil || err != nil {
		t.Fatalf("own account: %v %v", c, err)
	}
}

// TestCannotSwitchAccountAsNonRoot runs the check as nobody (re-running
// the test binary under that account when the tests run as root).
func TestCannotSwitchAccountAsNonRoot(t *testing.T) {
	check := func() error {
		p := model.Process{}
		p.Spec.Identity.User = "root"
		_, err := credential(p)
		if err == nil || !strings.Contains(err.Error(), `account "root": cannot switch to uid 0: the agent runs as uid`) {
			return fmt.Errorf("want a clear error, got %v", err)
		}
		return nil
	}
	if os.Getenv("GSEPROC_AGENT_NONROOT_CHECK") == "1" || os.Geteuid() != 0 {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		return
	}
	nobody, err := credential(model.Process{Spec: model.Spec{Identity: model.Identity{User: "nobody"}}})
	if err != nil {
		t.Skip("no nobody account:", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var attr os.ProcAttr
	attr.Env = append(os.Environ(), "GSEPROC_AGENT_NONROOT_CHECK=1")
	attr.Dir = dir
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	attr.Files = []*os.File{nil, out, out}
	attr.Sys = &syscall.SysProcAttr{Credential: nobody}
	proc, err := os.StartProcess(bin, []string{bin, "-test.run=^TestCannotSwitchAccountAsNonRoot$"}, &attr)
	if err != nil {
		t.Fatal(err)
	}
	st, err := proc.Wait()
	text, _ := os.ReadFile(out.Name())
	if err != nil || !st.Success() {
		t.Fatalf("as nobody: %v %v\n%s", st, err, text)
	}
}

func TestLocalDispatch(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	l := NewLocal(a)
	p, _ := setup(t, "local", nil)
	ctx := context.Background()
	r, err := l.Dispatch(ctx, model.Host{IP: "127.0.0.1"}, model.AgentRequest{Op: model.OpStatus, Process: p})
	if err != nil || r.Code != 0 || r.Status == nil || r.Status.PID != -1 {
		t.Fatalf("dispatch: %v %+v", err, r)
	}
	_, err = l.Dispatch(ctx, model.Host{IP: "10.9.9.9"}, model.AgentRequest{Op: model.OpStatus, Process: p})
	if !errors.Is(err, model.ErrUnreachable) || !strings.Contains(err.Error(), "0:10.9.9.9") {
		t.Fatalf("unknown host: %v", err)
	}
	hosts, _ := l.Hosts(ctx)
	if len(hosts) != 1 || hosts[0].Host.AgentID() != "0:127.0.0.1" {
		t.Fatalf("hosts %+v", hosts)
	}
}

func TestConfigValidation(t *testing.T) {
	cfg := config.DefaultAgent()
	cfg.IP = "not-an-ip"
	cfg.CloudID = -1
	cfg.BreachCount = 0
	cfg.SampleInterval = 0
	cfg.DataDir = ""
	_, err := New(cfg, nil)
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"agent.ip", "agent.cloud_id", "agent.breach_count", "agent.sample_interval", "agent.data_dir"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	cfg = config.DefaultAgent()
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "agent.ip: required") {
		t.Fatalf("missing ip: %v", err)
	}
}

func TestRegistryFileIsAtomicAndGSEShaped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RegistryFile)
	p, _ := setup(t, "reg", nil)
	// Written as the registry writer does (flush): encoded, then written.
	var enc regEncoder
	b, err := enc.encode([]hostedView{{key: p.Key(), p: &p, pGen: procGen.Add(1), lastOp: model.OpStart,
		instances: []instanceRecord{{PID: 7, StartTick: 9}}}}, 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRegistry(path, b); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	for _, want := range []string{`"proc":[`, `"valuekey":"test:reg"`, `"procName":"reg"`, `"startCmd"`, `"opTimeOut":10`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("registry lacks %s:\n%s", want, b)
		}
	}
	got, err := loadRegistry(path)
	if err != nil || len(got) != 1 || got[0].GSEProc.Instances[0].StartTick != 9 || got[0].GSEProc.Process.Key() != "test:reg" {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(testConfig(dir), nil); err == nil || !strings.Contains(err.Error(), "hosting registry") {
		t.Fatalf("corrupt registry: %v", err)
	}
}

// TestOpIDRunsOnce: an op id runs once; a repeat (a task resumed by another
// server) is answered with the recorded outcome and runs nothing, also
// after the agent restarts. Counted by the commands' own side effects.
func TestOpIDRunsOnce(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg := testConfig(dataDir)
	a1, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1) }()
	p, dir := setup(t, "once", nil)
	p.Spec.Control.StartCmd = "echo start >> starts.log; ./daemon.sh >/dev/null 2>&1 &"
	send := func(a *Agent, op model.OpType, id string) model.AgentReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return a.Handle(ctx, model.AgentRequest{TaskID: "T1", OpID: id, Op: op, Process: p})
	}
	starts := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "starts.log"))
		return strings.Count(string(b), "start")
	}
	r := send(a1, model.OpStart, "T1/0:127.0.0.1/test:once")
	wantCode(t, r, model.CodeSuccess, "start")
	pid := r.Status.PID
	r = send(a1, model.OpStart, "T1/0:127.0.0.1/test:once")
	wantCode(t, r, model.CodeSuccess, "repeated start (recorded, not 828)")
	if r.Status.PID != pid || starts() != 1 {
		t.Fatalf("repeat: pid %d (was %d), %d starts", r.Status.PID, pid, starts())
	}
	// Another op id is another op.
	wantCode(t, send(a1, model.OpStart, "T2/0:127.0.0.1/test:once"), model.CodeAlreadyRunning, "start of another task")
	r = send(a1, model.OpRestart, "T3/0:127.0.0.1/test:once")
	wantCode(t, r, model.CodeSuccess, "restart")
	restarted := r.Status.PID
	if restarted == pid || starts() != 2 {
		t.Fatalf("restart: pid %d (was %d), %d starts", restarted, pid, starts())
	}
	// The agent restarts: its ledger is on disk.
	cancel1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	a2 := newAgent(t, dataDir)
	r = send(a2, model.OpRestart, "T3/0:127.0.0.1/test:once")
	wantCode(t, r, model.CodeSuccess, "restart repeated after an agent restart")
	if starts() != 2 {
		t.Fatalf("%d starts after the repeat, want 2", starts())
	}
	eventually(t, slowBox, "re-adopted, same pid", func() bool {
		st := do(t, a2, model.OpStatus, p).Status
		return st.State == model.ProcRunning && st.PID == restarted
	})
	// A status op is never recorded: it answers the state now.
	if n := a2.ops.Len(); n != 3 {
		t.Fatalf("%d op ids recorded, want 3", n)
	}
}

// TestNoHostedProcessLeftDead: a start of 30 instances that each die a
// second after coming up: every one is supervised (restarted, then given
// up with an event), none left dead while listed as hosted. Whether the
// first ones die before the op has started the last and recorded the
// hosting depends on the machine's pace (here they mostly do not: this
// passes without superviseExitedLocked);
// TestExitBeforeHostingRecordedIsSupervised makes that happen by
// conditions.
func TestNoHostedProcessLeftDead(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	const n = 30
	p, _ := setup(t, "brief", map[string]string{"brief.sh": `#!/bin/sh
echo $$ > "$GSEPROC_PID_FILE"
sleep 1
exit 3
`})
	p.Spec.Control.StartCmd = "./brief.sh >/dev/null 2>&1 &"
	p.Spec.Policy.InstanceNum = n
	p.Spec.Policy.StartRetries = 1
	wantCode(t, do(t, a, model.OpStart, p), model.CodeSuccess, "start")
	eventually(t, 60*time.Second, "every instance restarted and given up", func() bool {
		return len(ev.of(model.EventGiveUp)) == n
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.procs[p.Key()]
	for _, u := range e.units {
		if u.state != model.ProcFatal {
			t.Errorf("instance %d: %s (%s), want fatal after its restart", u.idx, u.state, u.msg)
		}
	}
}

// TestExitBeforeHostingRecordedIsSupervised: a start of two instances
// whose first passes its check and dies while the second's check still
// waits (its pid file comes when the test says), so before the start's
// hosting is recorded: once the start succeeds and hosts the process, the
// dead instance goes to the restart policy and is restarted (its second
// run lives), not left exited while hosted. Each step waits for the state
// before it: no timing decides it.
func TestExitBeforeHostingRecordedIsSupervised(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	ev := collect(t, a)
	p, dir := setup(t, "gap", map[string]string{"start.sh": `#!/bin/sh
if [ "$GSEPROC_INSTANCE" = 2 ]; then
	sh -c 'while [ ! -e go ]; do sleep 0.02; done; echo $$ > "$GSEPROC_PID_FILE"; exec sleep 300' >/dev/null 2>&1 &
elif [ -e ran1 ]; then
	sleep 300 >/dev/null 2>&1 &
	echo $! > "$GSEPROC_PID_FILE"
else
	touch ran1
	sh -c 'while [ ! -e die ]; do sleep 0.02; done; exit 3' >/dev/null 2>&1 &
	echo $! > "$GSEPROC_PID_FILE"
fi
`})
	p.Spec.Control.StartCmd = "./start.sh"
	p.Spec.Policy.InstanceNum = 2
	p.Spec.Policy.StartCheckSecs, p.Spec.Policy.StartCheckEndSecs = 0, 120
	p.Spec.Policy.OpTimeout = 120
	t.Cleanup(func() { killByPidFiles(p) })
	units := func() (hosted bool, st [2]model.ProcState, seen string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		e := a.procs[p.Key()]
		if e == nil || len(e.units) < 2 {
			return false, st, "not known yet"
		}
		for i := range st {
			st[i] = e.units[i].state
			seen += fmt.Sprintf("instance %d %s (%s); ", i+1, e.units[i].state, e.units[i].msg)
		}
		return e.hosted, st, fmt.Sprintf("hosted %v; %s", e.hosted, seen)
	}
	unitState := func(i int) model.ProcState { _, st, _ := units(); return st[i] }
	replied := make(chan model.AgentReply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		replied <- a.Handle(ctx, model.AgentRequest{TaskID: "t", OpID: "t/gap", Op: model.OpStart, Process: p})
	}()
	eventually(t, slowBox, "instance 1 past its check", func() bool { return unitState(0) == model.ProcRunning })
	if err := os.WriteFile(filepath.Join(dir, "die"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, slowBox, "instance 1 seen dead", func() bool { return unitState(0) == model.ProcExited })
	select {
	case r := <-replied:
		t.Fatalf("the start answered before instance 2 was up: %d %s", r.Code, r.Message)
	default:
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var r model.AgentReply
	select {
	case r = <-replied:
	case <-time.After(2 * time.Minute):
		t.Fatal("the start did not end once instance 2 was up")
	}
	wantCode(t, r, model.CodeSuccess, "start")
	waitSeeing(t, slowBox, "instance 1 restarted and both running, hosted", func() (bool, string) {
		hosted, st, seen := units()
		return hosted && st[0] == model.ProcRunning && st[1] == model.ProcRunning && len(ev.of(model.EventRestartSuccess)) == 1, seen
	})
}

// TestPeriodicRunSurvivesAgentRestart: an agent that goes away during a
// periodic run (one its schedule launched) re-adopts the run at its start
// and skips the ticks while it is alive: the runs never overlap.
func TestPeriodicRunSurvivesAgentRestart(t *testing.T) {
	t.Parallel()
	// The schedule's run (the second) is held by a file until the test
	// lets it go: the agent is gone and back while it runs, whatever the
	// machine's load (a run of a fixed length could end before).
	dir, hold := heldPeriodicDir(t)
	dataDir := t.TempDir()
	a1, err := New(testConfig(dataDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1) }()
	p := periodicJob(dir)
	wantCode(t, do(t, a1, model.OpStart, p), model.CodeSuccess, "start")
	var run int
	waitSeeing(t, slowBox, "the schedule's run, held, the unit's", func() (bool, string) {
		runs := periodicRuns(dir)
		st := do(t, a1, model.OpStatus, p).Status
		if len(runs) >= 2 {
			run = runs[1]
		}
		return run != 0 && st.PID == run, fmt.Sprintf("runs %v, status pid %d", runs, st.PID)
	})
	cancel1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if _, live := alive(run); !live {
		t.Fatalf("the scheduled run (pid %d), held, ended with its agent", run)
	}
	a2 := newAgent(t, dataDir)
	waitSeeing(t, slowBox, "the run re-adopted", func() (bool, string) {
		st := do(t, a2, model.OpStatus, p).Status
		return st.PID == run, fmt.Sprintf("%s pid %d (the run: %d): %s", st.State, st.PID, run, st.Message)
	})
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	eventually(t, slowBox, "a run after the re-adopted one", func() bool { return len(periodicRuns(dir)) >= 3 })
	wantCode(t, do(t, a2, model.OpStop, p), model.CodeSuccess, "stop")
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps.log")); err == nil {
		t.Fatalf("runs overlapped across the agent restart: %s", b)
	}
}

// TestStartFindsAPidFileRewrittenLate: the start command exits leaving a
// pid file that names a dead process, and the real process rewrites it
// seconds later (a daemon that writes its pid file once it is up). The
// start check, backing off its looks at the unchanged file
// (pidFileIdleMax), still finds the new pid within its window: success,
// the daemon's pid, well before the window ends.
func TestStartFindsAPidFileRewrittenLate(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "")
	p, _ := setup(t, "late", nil)
	// The dead pid is written at once, the daemon (which writes its own)
	// starts 2.5 s later, after the command exited.
	p.Spec.Control.StartCmd = `sh -c 'exit 0' & dead=$!; wait $dead; echo $dead > "$GSEPROC_PID_FILE"; (sleep 2.5; exec ./daemon.sh) >/dev/null 2>&1 &`
	p.Spec.Policy.StartCheckSecs, p.Spec.Policy.StartCheckEndSecs = 0, 60
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := a.Handle(ctx, model.AgentRequest{TaskID: "t", Op: model.OpStart, Process: p})
	took := time.Since(t0)
	wantCode(t, r, model.CodeSuccess, "start")
	if pid := livePid(p.Spec.Identity.PidPath); pid <= 0 || r.Status.PID != pid {
		t.Fatalf("start answered pid %d, the pid file names %d", r.Status.PID, pid)
	}
	if took < 2500*time.Millisecond {
		t.Fatalf("answered in %s, before the daemon wrote its pid file", took)
	}
	t.Logf("found the late pid file in %s", took.Round(time.Millisecond))
}

// TestCheckQuiet: how long a start check waits for the command's exit
// alone before it looks at the pid file: a resident process's begin, a
// job's up, never past op_timeout, and no wait when begin is 0.
func TestCheckQuiet(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name               string
		job                bool
		begin, up, timeout time.Duration
		want               time.Duration
	}{
		{"resident: its begin", false, 1 * s, 1 * s, 60 * s, 1 * s},
		{"resident, begin 0: at once", false, 0, 1 * s, 60 * s, 0},
		{"resident: begin past op_timeout", false, 90 * s, 90 * s, 60 * s, 60 * s},
		{"periodic: up (min_start_wait)", true, 0, 1 * s, 60 * s, 1 * s},
		{"one-shot: the whole op_timeout", true, 1 * s, 60 * s, 60 * s, 60 * s},
		{"job: up past op_timeout", true, 5 * s, 5 * s, 2 * s, 2 * s},
		{"no timeout left", false, 1 * s, 1 * s, 0, 0},
	} {
		if got := checkQuiet(c.job, c.begin, c.up, c.timeout); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// lockedBuf is a log sink the agent's goroutines write while the test
// reads it.
type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestHostsAtMostMaxProcs: an agent knows at most its bound of process
// definitions (model.MaxHostProcs, lowered here): an op on one more is
// refused naming the limit, stores nothing and runs nothing, while the
// processes it knows keep working; a registry an older agent left with
// more is loaded whole (nothing dropped unsupervised) and reported.
func TestHostsAtMostMaxProcs(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg := testConfig(dataDir)
	var ps []model.Process
	for _, name := range []string{"b1", "b2", "b3", "b4"} {
		p, _ := setup(t, name, nil)
		ps = append(ps, p)
	}
	// An older agent hosted three.
	a1, err := newBounded(cfg, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1) }()
	var err1 error
	stop1 := sync.OnceFunc(func() { cancel1(); err1 = <-done1; a1.Close() })
	t.Cleanup(stop1)
	for _, p := range ps[:3] {
		wantCode(t, do(t, a1, model.OpStart, p), model.CodeSuccess, "start "+p.Meta.Name)
	}
	r := do(t, a1, model.OpStart, ps[3])
	wantCode(t, r, model.CodeCommandFailed, "start past the bound")
	for _, want := range []string{"process(test:b4)", "3 process definitions", "(3, model.MaxHostProcs)"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("refusal %q does not say %q", r.Message, want)
		}
	}
	if r.Status.ProcKey != "test:b4" || r.Status.State != model.ProcUnknown {
		t.Errorf("refusal's status: %+v", *r.Status)
	}
	for _, op := range []model.OpType{model.OpRegister, model.OpStop, model.OpRestart} {
		wantCode(t, do(t, a1, op, ps[3]), model.CodeCommandFailed, op.String()+" past the bound")
	}
	if n := len(a1.Statuses()); n != 3 {
		t.Fatalf("%d statuses after the refusals, want 3", n)
	}
	if st := do(t, a1, model.OpStatus, ps[3]).Status; st.Hosted || st.PID != -1 {
		t.Fatalf("refused process: %+v", *st)
	}
	// Existing definitions keep working.
	wantCode(t, do(t, a1, model.OpStop, ps[0]), model.CodeSuccess, "stop b1")
	wantCode(t, do(t, a1, model.OpStart, ps[0]), model.CodeSuccess, "start b1")
	stop1()
	if err1 != nil {
		t.Fatal(err1)
	}
	if pid := livePid(pidPathOf(ps[3], 1)); pid != 0 {
		t.Fatalf("the refused process runs: pid %d", pid)
	}

	// Its registry holds more than this agent's bound: all three are
	// supervised again, the excess is logged, no new definition is taken.
	var logs lockedBuf
	a2, err := newBounded(cfg, slog.New(slog.NewTextHandler(&logs, nil)), 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- a2.Run(ctx2) }()
	t.Cleanup(func() { // before the processes are killed (cleanups run last first)
		cancel2()
		<-done2
		a2.Close()
	})
	if s := logs.String(); !strings.Contains(s, "more process definitions than an agent hosts") || !strings.Contains(s, "definitions=3 max=2") {
		t.Fatalf("the registry's excess is not reported; log:\n%s", s)
	}
	eventually(t, slowBox, "the three hosted processes supervised by the new agent", func() bool {
		sts := a2.Statuses()
		for _, st := range sts {
			if st.State != model.ProcRunning || !st.Hosted {
				return false
			}
		}
		return len(sts) == 3
	})
	wantCode(t, do(t, a2, model.OpStart, ps[3]), model.CodeCommandFailed, "start past an old registry's count")
	wantCode(t, do(t, a2, model.OpRestart, ps[1]), model.CodeSuccess, "restart b2")
	if pid := livePid(pidPathOf(ps[3], 1)); pid != 0 {
		t.Fatalf("the refused process runs: pid %d", pid)
	}
}
