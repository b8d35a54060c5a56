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
	cmd, ready := startCrashChild(t, crashChildEnv, dir, dataDir)
	pids := map[string]int{}
	for _, kv := range strings.Fields(ready) {
		k, v, _ := strings.Cut(kv, "=")
		pids[k], _ = strconv.Atoi(v)
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

// startCrashChild runs this test binary as the agent process of the test
// running (env, set to dir, names its part; dataDir is its data_dir) and
// returns the rest of the READY line it prints once it has set up what
// the test kills it in the middle of; an ERR line, or no READY within
// slowBox, fails the test. The child is killed at cleanup if still alive.
func startCrashChild(t *testing.T, env, dir, dataDir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), env+"="+dir, "GSEPROC_AGENT_CRASH_DATA="+dataDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		for sc := bufio.NewScanner(out); sc.Scan(); {
			if s := sc.Text(); strings.HasPrefix(s, "READY ") || strings.HasPrefix(s, "ERR") {
				line <- s
				return
			}
		}
	}()
	select {
	case s := <-line:
		if rest, ok := strings.CutPrefix(s, "READY "); ok {
			return cmd, rest
		}
		t.Fatalf("crash child: %s", s)
	case <-time.After(slowBox):
		t.Fatal("crash child never got ready")
	}
	return nil, ""
}

// periodicCrashEnv makes the test binary act as the agent process of
// TestPeriodicRunSurvivesAgentKill9.
const periodicCrashEnv = "GSEPROC_AGENT_PERIODIC_CRASH_CHILD"

// periodicJob is a periodic job (every second) whose runs log their pids
// and an overlap should a run start while another is alive. Every run but
// the first lasts while the file hold exists: the test says when the run
// the agent is killed in ends, no machine's pace.
func periodicJob(dir string) model.Process {
	return model.Process{
		Meta: model.Meta{Namespace: "crash", Name: "cron"},
		Spec: model.Spec{
			Identity: model.Identity{ProcName: "cron", SetupPath: dir, PidPath: filepath.Join(dir, "cron.pid")},
			Control:  model.Control{StartCmd: "exec ./job.sh"}, // $$ is the run's pid
			Policy:   model.Policy{AutoType: model.AutoPeriodic, CycleTime: 1, StartRetries: 3, OpTimeout: 10, InstanceNum: 1},
		},
	}
}

const periodicJobScript = `#!/bin/sh
[ -e running ] && echo overlap >> overlaps.log
touch running
echo $$ >> runs.log
if [ "$(wc -l < runs.log)" -ge 2 ]; then
	while [ -e hold ]; do sleep 0.05; done
fi
rm -f running
`

// heldPeriodicDir is a periodic job's directory (periodicJob): its
// job.sh (periodicJobScript) and the hold file that keeps its second run
// alive until the test removes it (at the latest when the test ends).
func heldPeriodicDir(t *testing.T) (dir, hold string) {
	t.Helper()
	dir = t.TempDir()
	hold = filepath.Join(dir, "hold")
	for name, body := range map[string]string{"job.sh": periodicJobScript, "hold": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(hold) }) // the held run ends
	return dir, hold
}

// periodicRuns is the pids of the runs so far, in order.
func periodicRuns(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	return pids
}

// TestPeriodicRunSurvivesAgentKill9: an agent process is SIGKILLed (no
// Close, no last write) during a run its schedule launched; the next agent
// on the same data_dir finds that run's pid in the registry, re-adopts it
// (its status names that pid at once) and skips the ticks while it is
// alive: no run starts until it ends, the runs never overlap.
// (TestPeriodicRunSurvivesAgentRestart stops its agent gracefully, which
// writes the registry at close.)
func TestPeriodicRunSurvivesAgentKill9(t *testing.T) {
	if dir := os.Getenv(periodicCrashEnv); dir != "" {
		periodicCrashChild(dir)
		return
	}
	t.Parallel()
	dir, hold := heldPeriodicDir(t)
	dataDir := t.TempDir()
	cmd, ready := startCrashChild(t, periodicCrashEnv, dir, dataDir)
	run, _ := strconv.Atoi(ready)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, live := alive(run); !live {
		t.Fatalf("the scheduled run (pid %d), held, died with its agent", run)
	}

	a := newAgent(t, dataDir)
	p := periodicJob(dir)
	waitSeeing(t, slowBox, "the run re-adopted", func() (bool, string) {
		st := do(t, a, model.OpStatus, p).Status
		return st.PID == run, fmt.Sprintf("%s pid %d (the run: %d): %s", st.State, st.PID, run, st.Message)
	})
	// Ticks come every second: a few of them pass while the run is held.
	time.Sleep(3 * time.Second)
	if runs := periodicRuns(dir); len(runs) != 2 {
		t.Fatalf("runs %v while the re-adopted one (%d) was alive", runs, run)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	eventually(t, slowBox, "a run after the re-adopted one", func() bool { return len(periodicRuns(dir)) >= 3 })
	wantCode(t, do(t, a, model.OpStop, p), model.CodeSuccess, "stop")
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps.log")); err == nil {
		t.Fatalf("runs overlapped across the agent's kill -9: %s", b)
	}
}

// periodicCrashChild starts the periodic job, waits for the run its
// schedule launched (the second; held) to be its unit's and recorded on
// disk, names its pid and waits to be killed.
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
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runs := periodicRuns(dir)
		if len(runs) < 2 {
			continue
		}
		a.mu.Lock()
		u := a.procs[p.Key()].units[0]
		ours := u.pid == runs[1] && u.state == model.ProcRunning
		a.mu.Unlock()
		if !ours {
			continue
		}
		// The schedule's run, set with its persist under one lock: what
		// is pending now includes it.
		if err := a.waitPersisted(context.Background()); err != nil {
			fmt.Println("ERR persist", err)
			os.Exit(1)
		}
		fmt.Printf("READY %d\n", runs[1])
		time.Sleep(time.Hour) // until SIGKILL
	}
	fmt.Println("ERR no scheduled run within a minute")
	os.Exit(1)
}
