//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gseproc/backend/config"
	"gseproc/model"
)

// zombieChildEnv makes the test binary act as a subreaper agent process
// whose hosted processes crash-loop (TestCrashLoopsLeaveNoZombie).
const zombieChildEnv = "GSEPROC_AGENT_ZOMBIE_CHILD"

// TestCrashLoopsLeaveNoZombie: an agent that is a subreaper (agent.
// subreaper) hosts 20 processes that crash-loop until they are given up:
// daemons left behind by their start_cmd's shell (so the agent's children
// once the shell exits) and foreground ones (the agent's own children).
// After the loops no child of the agent is a zombie, and orphans were
// reaped. It runs in a process of its own: being a subreaper is the
// process's, not the test's.
func TestCrashLoopsLeaveNoZombie(t *testing.T) {
	if dir := os.Getenv(zombieChildEnv); dir != "" {
		zombieChild(t, dir)
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashLoopsLeaveNoZombie$", "-test.v")
	cmd.Env = append(os.Environ(), zombieChildEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`ZOMBIES (\d+) REAPED (\d+) RESTARTS (\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("agent process: %v\n%s", err, out)
	}
	zombies, _ := strconv.Atoi(string(m[1]))
	reaped, _ := strconv.Atoi(string(m[2]))
	restarts, _ := strconv.Atoi(string(m[3]))
	t.Logf("%d restarts; %d orphans reaped; %d zombies left", restarts, reaped, zombies)
	if zombies != 0 || reaped == 0 || restarts == 0 {
		t.Fatalf("zombies %d (want 0), orphans reaped %d (want some), restarts %d\n%s", zombies, reaped, restarts, out)
	}
}

func zombieChild(t *testing.T, dir string) {
	a := newAgent(t, filepath.Join(dir, "data"), func(c *config.AgentConfig) { c.Subreaper = true })
	ev := collect(t, a)
	const n = 20
	var ps []model.Process
	for i := range n {
		name := fmt.Sprintf("loop%02d", i)
		start := `sleep 0.2 >/dev/null 2>&1 & echo $! > "$GSEPROC_PID_FILE"` // a daemon: an orphan once sh exits
		if i%2 == 1 {
			start = `echo $$ > "$GSEPROC_PID_FILE"; exec sleep 0.2` // the agent's own child
		}
		p := model.Process{
			Meta: model.Meta{Namespace: "zombie", Name: name},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, name+".pid")},
				Control:  model.Control{StartCmd: start},
				Policy: model.Policy{AutoType: model.AutoResident, StartRetries: 3, OpTimeout: 60,
					StartCheckEndSecs: 30, InstanceNum: 1},
			},
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := a.Handle(ctx, model.AgentRequest{TaskID: "z", Op: model.OpStart, Process: p})
		cancel()
		// A loaded machine may see it die before the check: both count.
		if r.Code != model.CodeSuccess && r.Code != model.CodePostCheckFailed {
			t.Fatalf("start %s: %d %s", p.Meta.Name, r.Code, r.Message)
		}
	}
	eventually(t, 3*time.Minute, "every process given up", func() bool {
		for _, st := range a.Statuses() {
			if st.Hosted && st.State != model.ProcFatal {
				return false
			}
		}
		return true
	})
	var zombies []int
	eventually(t, slowBox, "no zombie", func() bool {
		zombies = zombieChildren()
		return len(zombies) == 0
	})
	children.mu.Lock()
	reaped := children.reaped
	children.mu.Unlock()
	fmt.Printf("ZOMBIES %d REAPED %d RESTARTS %d\n", len(zombies), reaped, len(ev.of(model.EventRestartSuccess)))
}

// TestChildSetPidReused: a command's pid, freed by its owner's wait, is
// a new launch's before the first owner forgets it (waited after the
// wait returned): the new command's child stays owned, never the
// reaper's to take.
func TestChildSetPidReused(t *testing.T) {
	k := newChildSet()
	k.start()
	k.started(4242) // command A
	// A exits and its owner's wait reaps it; pid 4242 is free, and the
	// next launch (command B) gets it before A's owner calls waited.
	k.start()
	k.started(4242)
	k.waited(4242) // A's owner, late
	if !k.owned(4242) {
		t.Fatal("pid 4242, command B's child, is no longer owned once A's owner forgot A: the reaper would take B's exit status")
	}
	k.waited(4242) // B's owner
	if k.owned(4242) {
		t.Fatal("pid 4242 still owned after both owners waited")
	}
}

// TestReapExitedHoldsNoLaunch: a watcher reaps the orphan it saw exit
// through its pidfd while a launch is in flight (the gate held shared,
// from before a fork until its pid is registered): it does not wait for
// the launch, as the gated reap did, and what it reaps is the process
// watched (its own wait then finds no child).
func TestReapExitedHoldsNoLaunch(t *testing.T) {
	t.Parallel()
	k := newChildSet()
	// A reaper runs for this set (its sweep is not needed here), and a
	// child of this process no owner of k waits for exits.
	k.users = 1
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	fd, ok, err := pidfdOpen(pid)
	if !ok || err != nil {
		cmd.Wait()
		t.Skipf("no pidfd here (%v): the watcher reaps through the gate", err)
	}
	defer unix.Close(fd)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitPidfd(ctx, fd, pid); err != nil {
		t.Fatal(err)
	}
	k.start() // a launch in flight
	reaped := make(chan bool, 1)
	go func() { reaped <- k.reapExited(pid, fd) }()
	select {
	case got := <-reaped:
		if !got {
			t.Fatalf("the exited orphan %d was not reaped", pid)
		}
	case <-ctx.Done():
		t.Fatal("the reap of an exited orphan waited for a launch in flight")
	}
	k.started(0)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("pid %d could still be waited for: reapExited did not reap it", pid)
	}
}
