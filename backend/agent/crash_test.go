//go:build linux

package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gseproc/model"
)

// crashChildEnv makes the test binary act as an agent process that starts
// two hosted processes and then waits to be killed.
const crashChildEnv = "GSEPROC_AGENT_CRASH_CHILD"

// oneShot gives a one-shot's start a short op_timeout: it answers (running)
// when that ends.
func oneShot(p model.Process) model.Process {
	p.Spec.Policy.OpTimeout = 1
	return p
}

func crashProcs(dir string) []model.Process {
	mk := func(name, start string, typ model.AutoType) model.Process {
		return model.Process{
			Meta: model.Meta{Namespace: "crash", Name: name},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, name+".pid")},
				Control:  model.Control{StartCmd: start},
				Policy:   model.Policy{AutoType: typ, StartRetries: 3, OpTimeout: 10, StartCheckEndSecs: 10, InstanceNum: 1},
			},
		}
	}
	return []model.Process{
		// A daemon, no longer the agent's child once sh exits.
		mk("daemon", "sleep 300 >/dev/null 2>&1 & echo $! > daemon.pid", model.AutoResident),
		// A foreground server: the agent's own child (sh execs sleep).
		mk("fg", "echo $$ > fg.pid; exec sleep 300", model.AutoResident),
		// A one-shot job still running: the agent's child too (its
		// start answers running when op_timeout ends, 1 s here).
		oneShot(mk("job", "sleep 300", model.AutoOneShot)),
	}
}

// TestAgentKill9KeepsAndReadopts SIGKILLs an agent process (no Close, no
// last write) and checks that a new agent on the same data_dir finds every
// hosted process alive, including the ones that were its children, and
// supervises them.
func TestAgentKill9KeepsAndReadopts(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	t.Parallel()
	dir, dataDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentKill9KeepsAndReadopts$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "GSEPROC_AGENT_CRASH_DATA="+dataDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan map[string]int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				pids := map[string]int{}
				for _, kv := range strings.Fields(rest) {
					k, v, _ := strings.Cut(kv, "=")
					pids[k], _ = strconv.Atoi(v)
				}
				ready <- pids
			}
		}
	}()
	var pids map[string]int
	select {
	case pids = <-ready:
	case <-time.After(slowBox):
		t.Fatal("crash child never got ready")
	}
	for _, p := range crashProcs(dir) {
		t.Cleanup(func() { _ = syscall.Kill(pids[p.Meta.Name], syscall.SIGKILL) })
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for name, pid := range pids {
		eventually(t, slowBox, name+" outlives the agent", func() bool { _, live := alive(pid); return live })
	}

	a := newAgent(t, dataDir)
	waitSeeing(t, slowBox, "re-adopted", func() (bool, string) {
		sts := a.Statuses()
		seen := fmt.Sprintf("%d statuses, want pids %v:", len(sts), pids)
		for _, st := range sts {
			seen += fmt.Sprintf(" %s %s pid %d;", st.ProcKey, st.State, st.PID)
		}
		for _, st := range sts {
			if st.State != model.ProcRunning || st.PID != pids[strings.TrimPrefix(st.ProcKey, "crash:")] {
				return false, seen
			}
		}
		return len(sts) == 3, seen
	})
	// Supervised again: the former child dies and comes back.
	_ = syscall.Kill(pids["fg"], syscall.SIGKILL)
	fg := crashProcs(dir)[1]
	waitSeeing(t, slowBox, "fg restarted by the new agent", func() (bool, string) {
		np := livePid(fg.Spec.Identity.PidPath)
		return np != 0 && np != pids["fg"], fmt.Sprintf("live pid %d (killed %d)", np, pids["fg"])
	})
	t.Cleanup(func() { killByPidFiles(fg) })
}

func crashChild(dir string) {
	cfg := testConfig(os.Getenv("GSEPROC_AGENT_CRASH_DATA"))
	a, err := New(cfg, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	go a.Run(context.Background())
	var line []string
	for _, p := range crashProcs(dir) {
		r := a.Handle(context.Background(), model.AgentRequest{Op: model.OpStart, Process: p})
		if r.Code != 0 {
			fmt.Println("ERR", p.Meta.Name, r.Code, r.Message)
			os.Exit(1)
		}
		line = append(line, fmt.Sprintf("%s=%d", p.Meta.Name, r.Status.PID))
	}
	fmt.Println("READY " + strings.Join(line, " "))
	time.Sleep(time.Hour) // until SIGKILL
}

// periodicCrashEnv makes the test binary act as the agent process of
// TestPeriodicRunSurvivesAgentKill9.
const periodicCrashEnv = "GSEPROC_AGENT_PERIODIC_CRASH_CHILD"

// periodicJob is a periodic job (every second) whose run lasts 5 s and
// logs an overlap should a run start while another is alive.
func periodicJob(dir string) model.Process {
	return model.Process{
		Meta: model.Meta{Namespace: "crash", Name: "cron"},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: "cron", SetupPath: dir, PidPath: filepath.Join(dir, "cron.pid")},
			Control:  model.Control{StartCmd: "./job.sh"},
			Policy:   model.Policy{AutoType: model.AutoPeriodic, CycleTime: 1, StartRetries: 3, OpTimeout: 10, InstanceNum: 1},
		},
	}
}

const periodicJobScript = `#!/bin/sh
[ -e running ] && echo overlap >> overlaps.log
touch running
echo run >> runs.log
sleep 5
rm -f running
`

// TestPeriodicRunSurvivesAgentKill9: an agent process is SIGKILLed (no
// Close, no last write) during a run its schedule launched; the next agent
// on the same data_dir finds that run's pid in the registry, re-adopts it
// (its status names that pid at once) and skips the ticks while it is
// alive: the runs never overlap. (TestPeriodicRunSurvivesAgentRestart
// stops its agent gracefully, which writes the registry at close.)
func TestPeriodicRunSurvivesAgentKill9(t *testing.T) {
	if dir := os.Getenv(periodicCrashEnv); dir != "" {
		periodicCrashChild(dir)
		return
	}
	t.Parallel()
	dir, dataDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(periodicJobScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeriodicRunSurvivesAgentKill9$")
	cmd.Env = append(os.Environ(), periodicCrashEnv+"="+dir, "GSEPROC_AGENT_CRASH_DATA="+dataDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan int, 1)
	go func() {
		for sc := bufio.NewScanner(out); sc.Scan(); {
			if rest, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				pid, _ := strconv.Atoi(rest)
				ready <- pid
			} else if strings.HasPrefix(sc.Text(), "ERR") {
				t.Errorf("child: %s", sc.Text())
			}
		}
	}()
	var run int
	select {
	case run = <-ready:
	case <-time.After(slowBox):
		t.Fatal("the agent process never had a scheduled run recorded")
	}
	t.Cleanup(func() { _ = syscall.Kill(run, syscall.SIGKILL) })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, live := alive(run); !live {
		t.Skipf("the scheduled run (pid %d) ended before the agent was killed: a machine too slow for its 5 s", run)
	}

	a := newAgent(t, dataDir)
	p := periodicJob(dir)
	waitSeeing(t, slowBox, "the run re-adopted", func() (bool, string) {
		st := do(t, a, model.OpStatus, p).Status
		return st.PID == run, fmt.Sprintf("%s pid %d (the run: %d): %s", st.State, st.PID, run, st.Message)
	})
	runs := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
		return strings.Count(string(b), "run")
	}
	eventually(t, slowBox, "a run after the re-adopted one", func() bool { return runs() >= 3 })
	wantCode(t, do(t, a, model.OpStop, p), model.CodeSuccess, "stop")
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps.log")); err == nil {
		t.Fatalf("runs overlapped across the agent's kill -9: %s", b)
	}
}

// periodicCrashChild starts the periodic job, waits for a run its schedule
// launched to be recorded on disk, names its pid and waits to be killed.
func periodicCrashChild(dir string) {
	a, err := New(testConfig(os.Getenv("GSEPROC_AGENT_CRASH_DATA")), nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	go a.Run(context.Background())
	p := periodicJob(dir)
	if r := a.Handle(context.Background(), model.AgentRequest{Op: model.OpStart, Process: p}); r.Code != 0 {
		fmt.Println("ERR start", r.Code, r.Message)
		os.Exit(1)
	}
	first := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		u := a.procs[p.Key()].units[0]
		pid, running := u.pid, u.state == model.ProcRunning
		a.mu.Unlock()
		switch {
		case !running || pid <= 0:
		case first == 0:
			first = pid // the start's run
		case pid != first:
			// The schedule's run, set with its persist under one lock:
			// what is pending now includes it.
			if err := a.waitPersisted(context.Background()); err != nil {
				fmt.Println("ERR persist", err)
				os.Exit(1)
			}
			fmt.Printf("READY %d\n", pid)
			time.Sleep(time.Hour) // until SIGKILL
		}
	}
	fmt.Println("ERR no scheduled run within a minute")
	os.Exit(1)
}
