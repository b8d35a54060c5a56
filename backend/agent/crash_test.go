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
