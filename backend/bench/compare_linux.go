//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gseproc/backend"
	"gseproc/backend/agent"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// supervisor is a process supervisor compared: how to start it on a
// sleep (named by m) and what it needs installed.
type supervisor struct {
	tool    string // the row's name
	bin     string // looked up on PATH; "" for gseproc itself
	install string // how to install bin
	how     string // what it runs, for the table
	// start brings the supervisor up in dir with m's sleep under it; stop
	// ends it (the sleep is killed by the caller after).
	start func(ctx context.Context, dir string, m argvMatch) (stop func(), err error)
}

func supervisors() []supervisor {
	return []supervisor{
		{tool: "gseproc", how: `agent (in process): sh -c 'echo $$ > pid_path && exec sleep'`, start: startAgent},
		{tool: "s6", bin: "s6-svscan", install: "apt-get install -y s6", how: "s6-supervise: ./run = #!/bin/sh exec sleep", start: startS6},
		{tool: "supervisord", bin: "supervisord", install: "apt-get install -y supervisor", how: "[program] command=sleep, autorestart", start: startSupervisord},
		{tool: "pm2", bin: "pm2", install: "npm install -g pm2", how: "pm2 start sleep --interpreter none (fork mode)", start: startPM2},
	}
}

// Compare measures gseproc against the tools installed here and prints
// one table. A missing tool is named with how to install it, and a tool
// that fails is reported in its row; only gseproc's own failure is an
// error.
func Compare(ctx context.Context, o CompareOptions) (Report, error) {
	o.defaults()
	rep := Report{Hosts: o.Hosts, Runs: o.Runs, Samples: o.Samples, Settle: o.Settle, LoadBefore: loadavg()}
	dir, err := os.MkdirTemp("", "gseproc-compare-*")
	if err != nil {
		return rep, fmt.Errorf("compare: work dir: %w", err)
	}
	defer os.RemoveAll(dir)
	clock := newRestartClock()
	defer clock.close()
	rep.Method = clock.method()
	fmt.Fprintf(o.Out, "kill -9 to running: %s; load average %s\n", rep.Method, rep.LoadBefore)
	for _, s := range supervisors() {
		if !o.wants(s.tool) {
			continue
		}
		row := Row{Measure: MeasureRestart, Tool: s.tool, How: s.how}
		if s.bin != "" {
			if _, err := exec.LookPath(s.bin); err != nil {
				row.Skipped = fmt.Sprintf("%s not installed (%s)", s.bin, s.install)
				fmt.Fprintf(o.Out, "%s: %s\n", s.tool, row.Skipped)
				rep.Rows = append(rep.Rows, row)
				continue
			}
		}
		fmt.Fprintf(o.Out, "%s: %d kills, one every %s ...\n", s.tool, o.Samples, o.Settle)
		row.Samples, err = restartRun(ctx, clock, s, filepath.Join(dir, s.tool), o.Samples, o.Settle)
		if err != nil {
			if s.tool == "gseproc" {
				return rep, fmt.Errorf("compare gseproc: %w", err)
			}
			row.Skipped = "failed: " + err.Error()
			fmt.Fprintf(o.Out, "%s: %s\n", s.tool, row.Skipped)
		}
		rep.Rows = append(rep.Rows, row)
	}

	fmt.Fprintf(o.Out, "gseproc fan-out: %d runs over %d agents ...\n", o.Runs, o.Hosts)
	fan, err := agentFanout(ctx, filepath.Join(dir, "fanout"), o.Hosts, o.Runs)
	if err != nil {
		return rep, fmt.Errorf("compare gseproc fan-out: %w", err)
	}
	rep.Rows = append(rep.Rows, Row{Measure: MeasureFanout, Tool: "gseproc",
		How: fmt.Sprintf("engine + %d agents (in process), op start of a one-shot start_cmd `true`", o.Hosts), Samples: fan})
	if o.wants("ansible") {
		row := Row{Measure: MeasureFanout, Tool: "ansible",
			How: fmt.Sprintf("ansible -m shell -a true, %d hosts ansible_connection=local, -f %d", o.Hosts, o.Hosts)}
		if _, err := exec.LookPath("ansible"); err != nil {
			row.Skipped = "ansible not installed (apt-get install -y ansible)"
			fmt.Fprintf(o.Out, "ansible: %s\n", row.Skipped)
		} else {
			fmt.Fprintf(o.Out, "ansible fan-out: %d runs over %d local hosts ...\n", o.Runs, o.Hosts)
			row.Samples, err = ansibleFanout(ctx, filepath.Join(dir, "ansible"), o.Hosts, o.Runs)
			if err != nil {
				row.Skipped = "failed: " + err.Error()
				fmt.Fprintf(o.Out, "ansible: %s\n", row.Skipped)
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.LoadAfter = loadavg()
	fmt.Fprintln(o.Out)
	return rep, WriteTable(o.Out, rep)
}

// sleepMatch is a sleep of about a day whose argument no other process
// carries: 86400.NNNNNN seconds.
func sleepMatch() argvMatch {
	return argvMatch{prog: "sleep", args: []string{fmt.Sprintf("86400.%06d", rand.IntN(1000000))}}
}

// restartRun starts s on a fresh sleep and times n kills of it.
func restartRun(ctx context.Context, clock restartClock, s supervisor, dir string, n int, settle time.Duration) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := sleepMatch()
	stop, err := s.start(ctx, dir, m)
	if err != nil {
		killProcs(m)
		return nil, err
	}
	defer func() {
		stop()
		killProcs(m)
	}()
	return measureRestarts(ctx, clock, m, n, settle)
}

// measureRestarts waits for m's process, then n times: lets it run for
// settle, kills it and times its replacement.
func measureRestarts(ctx context.Context, clock restartClock, m argvMatch, n int, settle time.Duration) ([]time.Duration, error) {
	pid, err := waitProc(ctx, m, 60*time.Second)
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for lost := 0; len(lat) < n; {
		select {
		case <-ctx.Done():
			return lat, ctx.Err()
		case <-time.After(settle):
		}
		if pid, err = waitProc(ctx, m, 30*time.Second); err != nil {
			return lat, err
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		d, np, err := clock.killToExec(sctx, pid, m)
		cancel()
		if errors.Is(err, errLost) && lost < 5 {
			lost++ // the box exec'ed more than the queue holds: again
			continue
		}
		if err != nil {
			return lat, fmt.Errorf("kill %d of %d: %w", len(lat)+1, n, err)
		}
		lat, pid = append(lat, d), np
	}
	return lat, nil
}

// waitProc waits until exactly one live process is m's and returns it.
func waitProc(ctx context.Context, m argvMatch, within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for {
		pids := findProcs(m)
		if len(pids) == 1 {
			return pids[0], nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("want one process %q running, found %d within %s", m, len(pids), within)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killProcs SIGKILLs every process that is m's.
func killProcs(m argvMatch) {
	for _, pid := range findProcs(m) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// startAgent runs gseproc's agent in this process, as deployed (default
// config: log capture on, pidfd exit watch) except stable_after 1 s, the
// same rule as the others' (s6's 1 s between spawns, supervisord's
// startsecs, pm2's min_uptime): a process up that long is restarted at
// once when it dies.
func startAgent(ctx context.Context, dir string, m argvMatch) (func(), error) {
	cfg := config.DefaultAgent()
	cfg.IP = "127.0.0.1"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.StableAfter = config.Duration(time.Second)
	a, err := agent.New(cfg, nil)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	stop := func() {
		cancel()
		<-done
		a.Close()
	}
	p := sleepProcess(dir, m)
	octx, ocancel := context.WithTimeout(ctx, 60*time.Second)
	defer ocancel()
	if r := a.Handle(octx, model.AgentRequest{TaskID: "compare", Op: model.OpStart, Process: p}); r.Code != model.CodeSuccess {
		stop()
		return nil, fmt.Errorf("start: code %d: %s", r.Code, r.Message)
	}
	return stop, nil
}

// sleepProcess is the resident definition of m's sleep for the agent:
// its start_cmd writes the pid file and execs sleep, so the sleep is the
// agent's own child (no daemon, as the other supervisors run it).
func sleepProcess(dir string, m argvMatch) model.Process {
	return model.Process{
		Meta: model.Meta{Namespace: "compare", Name: "sleep"},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: "sleep", SetupPath: dir, PidPath: filepath.Join(dir, "sleep.pid")},
			Control:  model.Control{StartCmd: `echo $$ > "$GSEPROC_PID_FILE" && exec ` + m.String()},
			Policy: model.Policy{AutoType: model.AutoResident, StartRetries: 3, OpTimeout: 60,
				StartCheckEndSecs: 10, InstanceNum: 1},
		},
	}
}

// startS6 runs s6-svscan on a scan directory with one service whose run
// script execs the sleep.
func startS6(ctx context.Context, dir string, m argvMatch) (func(), error) {
	svc := filepath.Join(dir, "scan", "sleep")
	if err := os.MkdirAll(svc, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(svc, "run"), []byte("#!/bin/sh\nexec "+m.String()+"\n"), 0o755); err != nil {
		return nil, err
	}
	c, err := startChild("s6-svscan", nil, "s6-svscan", filepath.Join(dir, "scan"))
	if err != nil {
		return nil, err
	}
	return c.stop, nil
}

// startSupervisord runs supervisord in the foreground with one program.
func startSupervisord(ctx context.Context, dir string, m argvMatch) (func(), error) {
	conf := filepath.Join(dir, "supervisord.conf")
	text := fmt.Sprintf(`[supervisord]
nodaemon=true
user=root
logfile=%[1]s/supervisord.log
pidfile=%[1]s/supervisord.pid
childlogdir=%[1]s

[program:sleep]
command=%[2]s
autostart=true
autorestart=true
startsecs=1
stdout_logfile=%[1]s/sleep.out
stderr_logfile=%[1]s/sleep.err
`, dir, m.String())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, err
	}
	c, err := startChild("supervisord", nil, "supervisord", "-n", "-c", conf)
	if err != nil {
		return nil, err
	}
	return c.stop, nil
}

// startPM2 starts a pm2 daemon of its own (PM2_HOME in dir) running the
// sleep; stop kills that daemon.
func startPM2(ctx context.Context, dir string, m argvMatch) (func(), error) {
	sleep, err := exec.LookPath(m.prog)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "PM2_HOME="+filepath.Join(dir, "pm2"))
	pm2 := func(args ...string) error {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, "pm2", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pm2 %s: %w: %s", strings.Join(args, " "), err, tail(out))
		}
		return nil
	}
	stop := func() { _ = pm2("kill") }
	args := append([]string{"start", sleep, "--name", "gseproc-compare", "--interpreter", "none", "--"}, m.args...)
	if err := pm2(args...); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// tail is the end of a command's output, for an error.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// agentFanout runs hosts real agents in this process behind the engine
// and times runs ops, each starting a one-shot whose start_cmd is `true`
// on every host, from the request to the last result.
func agentFanout(ctx context.Context, dir string, hosts, runs int) ([]time.Duration, error) {
	if hosts > MaxFanoutHosts {
		return nil, fmt.Errorf("at most %d hosts", MaxFanoutHosts)
	}
	l := agent.NewLocal()
	var all []model.Host
	actx, cancel := context.WithCancel(context.Background())
	var dones []chan error
	var agents []*agent.Agent
	defer func() {
		cancel()
		for _, d := range dones {
			<-d
		}
		for _, a := range agents {
			a.Close()
		}
	}()
	for i := range hosts {
		cfg := config.DefaultAgent()
		cfg.IP = fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250)
		cfg.DataDir = filepath.Join(dir, "agent"+strconv.Itoa(i))
		a, err := agent.New(cfg, nil)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
		done := make(chan error, 1)
		dones = append(dones, done)
		go func() { done <- a.Run(actx) }()
		l.Add(a)
		all = append(all, model.Host{IP: cfg.IP})
	}
	st := store.NewMemory()
	defer st.Close()
	eng := engine.New(config.Default().Engine, l, l, st)
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	defer eng.Close()
	var lat []time.Duration
	for run := range runs {
		name := "fan" + strconv.Itoa(run)
		p := model.Process{
			Meta: model.Meta{Namespace: "compare", Name: name},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, name+".pid")},
				Control:  model.Control{StartCmd: "true"},
				Policy: model.Policy{AutoType: model.AutoOneShot, StartRetries: 3, OpTimeout: 60,
					StartCheckEndSecs: 10, InstanceNum: 1},
			},
		}
		if err := eng.SaveProcess(ctx, model.ProcessDef{Process: p, Hosts: all}); err != nil {
			return nil, fmt.Errorf("save %s: %w", name, err)
		}
		t0 := time.Now()
		task, err := eng.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "compare", Name: name}})
		if err != nil {
			return nil, fmt.Errorf("operate: %w", err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 120*time.Second)
		ch, err := eng.Watch(wctx, task.ID, 0)
		if err != nil {
			wcancel()
			return nil, fmt.Errorf("watch: %w", err)
		}
		ok := 0
		var bad []string
		for r := range ch {
			if r.Code == model.CodeSuccess {
				ok++
			} else if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s: %d %s", r.Host, r.Code, r.Message))
			}
		}
		wcancel()
		d := time.Since(t0)
		if ok != hosts {
			return nil, fmt.Errorf("run %d: %d of %d hosts succeeded: %s", run+1, ok, hosts, strings.Join(bad, "; "))
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// ansibleFanout times runs of `ansible -m shell -a true` over hosts
// inventory hosts, all this machine through the local connection.
func ansibleFanout(ctx context.Context, dir string, hosts, runs int) ([]time.Duration, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	var inv strings.Builder
	inv.WriteString("[compare]\n")
	for i := range hosts {
		fmt.Fprintf(&inv, "h%d ansible_host=127.0.0.1\n", i+1)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		py = "/usr/bin/python3"
	}
	fmt.Fprintf(&inv, "\n[compare:vars]\nansible_connection=local\nansible_python_interpreter=%s\n", py)
	invPath := filepath.Join(dir, "inventory.ini")
	if err := os.WriteFile(invPath, []byte(inv.String()), 0o644); err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"ANSIBLE_CONFIG="+filepath.Join(dir, "ansible.cfg"), // absent: defaults
		"ANSIBLE_HOME="+dir, "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_REMOTE_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_NOCOLOR=1",
		"ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_DEPRECATION_WARNINGS=False", "ANSIBLE_LOAD_CALLBACK_PLUGINS=False")
	var lat []time.Duration
	for run := range runs {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Second)
		cmd := exec.CommandContext(cctx, "ansible", "compare", "-i", invPath, "-m", "shell", "-a", "true",
			"-f", strconv.Itoa(hosts), "-o")
		cmd.Env, cmd.Dir = env, dir
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("run %d: %w: %s", run+1, err, tail(out))
		}
		ok := 0
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, " | CHANGED") || strings.Contains(line, " | SUCCESS") {
				ok++
			}
		}
		if ok != hosts {
			return nil, fmt.Errorf("run %d: %d of %d hosts succeeded: %s", run+1, ok, hosts, tail(out))
		}
		lat = append(lat, d)
	}
	return lat, nil
}
