//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gseproc/model"
)

// TestRegistryWritesCoalesced: a storm of crash-looping processes changes
// the registry hundreds of times; it is written at most once per
// registryDelay (each write waits that long after the change that asked
// for it), and, the restarts being the supervisor's own changes, about
// once per registrySupervisorDelay (plus the writes of the two ops); what
// is on disk after the agent closes is its last state.
func TestRegistryWritesCoalesced(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	a, err := New(testConfig(dataDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	p, _ := setup(t, "loop", map[string]string{"loop.sh": `#!/bin/sh
echo $$ > "$GSEPROC_PID_FILE"
sleep 0.05
exit 1
`})
	p.Spec.Control.StartCmd = "./loop.sh >/dev/null 2>&1 &"
	p.Spec.Policy.InstanceNum = 10
	p.Spec.Policy.StartRetries = 1000
	// A start check that looks after the script's 50 ms life (a loaded
	// machine) waits out its window for a pid that stays up: 2 s, not 30,
	// so a few such misses do not eat the test's deadline (the failed
	// start is a registry change too, and is retried).
	p.Spec.Policy.StartCheckEndSecs = 2
	// A loaded machine may take long to start ten: the op's deadline is wide.
	slow := func(op model.OpType) model.AgentReply {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return a.Handle(ctx, model.AgentRequest{TaskID: "t", Op: op, Process: p})
	}
	t0 := time.Now()
	// Registered, the restart policy starts them: no start check that a
	// loaded machine makes late can fail the op.
	wantCode(t, slow(model.OpRegister), model.CodeSuccess, "register")
	a.mu.Lock()
	first := a.regWant
	a.mu.Unlock()
	eventually(t, 2*time.Minute, "200 registry changes", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.regWant >= first+200
	})
	wantCode(t, slow(model.OpUnregister), model.CodeSuccess, "unregister")
	elapsed := time.Since(t0)
	a.mu.Lock()
	changes, writes := a.regWant, a.regWrites
	a.mu.Unlock()
	t.Logf("%d registry changes, %d writes in %s", changes, writes, elapsed.Round(time.Millisecond))
	if max := uint64(elapsed/registryDelay) + 2; writes > max {
		t.Fatalf("%d writes in %s: more than one per %s", writes, elapsed, registryDelay)
	}
	// Each op's changes take a write or two (the op's own, and one its
	// wait asks for); the restarts one per registrySupervisorDelay.
	if max := uint64(elapsed/registrySupervisorDelay) + 8; writes > max {
		t.Fatalf("%d writes in %s: the supervisor's restarts were written more than once per %s", writes, elapsed, registrySupervisorDelay)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs, err := loadRegistry(filepath.Join(dataDir, RegistryFile))
	if err != nil || len(recs) != 0 {
		t.Fatalf("registry after stop and close: %v %+v", err, recs)
	}
}

// TestAgentRestartAdoptsARestartNotYetRecorded: the agent restarted a
// hosted process and died before the coalesced write recorded the new
// pid. The next agent adopts the new process (written to the pid file
// after the recorded start, by a process with the unit's environment)
// instead of starting a second copy.
func TestAgentRestartAdoptsARestartNotYetRecorded(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	a1, err := New(testConfig(dataDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1) }()
	p, dir := setup(t, "missed", nil)
	p.Spec.Control.StartCmd = "echo start >> starts.log; ./daemon.sh >/dev/null 2>&1 &"
	r := do(t, a1, model.OpStart, p)
	wantCode(t, r, model.CodeSuccess, "start")
	old := r.Status.PID
	var u *unit
	a1.mu.Lock()
	u = a1.procs[p.Key()].units[0]
	env := a1.env(p, u)
	a1.mu.Unlock()
	cancel1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	// What the dead agent's restart did, after its last registry write.
	killPid(old)
	cmd := exec.Command("/bin/sh", "-c", "./daemon.sh >/dev/null 2>&1 &")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	var restarted int
	waitSeeing(t, slowBox, "the restart's pid file", func() (bool, string) {
		restarted = livePid(p.Spec.Identity.PidPath)
		return restarted != 0 && restarted != old, fmt.Sprintf("live pid %d (before the restart %d)", restarted, old)
	})
	t.Cleanup(func() { killPid(restarted) })

	a2 := newAgent(t, dataDir)
	waitSeeing(t, slowBox, "adopted", func() (bool, string) {
		a2.mu.Lock()
		defer a2.mu.Unlock()
		u := a2.procs[p.Key()].units[0]
		return u.state == model.ProcRunning && u.pid == restarted &&
				strings.Contains(u.msg, "re-adopted") && strings.Contains(u.msg, strconv.Itoa(restarted)),
			fmt.Sprintf("%s pid %d (want %d): %q", u.state, u.pid, restarted, u.msg)
	})
	if st := do(t, a2, model.OpStatus, p).Status; st.PID != restarted || !st.Hosted {
		t.Fatalf("status %+v", *st)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "starts.log"))
	if n := strings.Count(string(b), "start"); n != 1 {
		t.Fatalf("start_cmd ran %d times, want 1: the unrecorded restart was not adopted", n)
	}
}

// TestRegistryEncoderKeepsRecords: the registry's encoder writes what
// json.Marshal writes of the whole file, byte for byte, at every step,
// and encodes again only the records whose content changed (definition,
// op, register time, an instance); a record dropped and the same key
// hosted again with another definition is encoded anew.
func TestRegistryEncoderKeepsRecords(t *testing.T) {
	proc := func(name, cmd string) model.Process {
		return model.Process{Meta: model.Meta{Namespace: "ns", Name: name},
			Spec: model.Spec{Identity: model.Identity{ProcName: name, SetupPath: "/srv/" + name, PidPath: "/srv/" + name + "/pid"},
				Control: model.Control{StartCmd: cmd}, Policy: model.Policy{InstanceNum: 1, OpTimeout: 60}}}
	}
	view := func(p model.Process, gen uint64, pid int, st model.ProcState) hostedView {
		return hostedView{key: p.Key(), p: &p, pGen: gen, lastOp: model.OpStart, registerTime: 1700000000,
			instances: []instanceRecord{{PID: pid, StartTick: uint64(pid) * 10, State: st, Restarts: pid % 7}}}
	}
	a := proc("a", `echo "<a & b>" > "$GSEPROC_PID_FILE"`) // quotes and HTML characters escaped as Marshal does
	b := proc("b", "sleep 1 &")
	b2 := proc("b", "sleep 2 &")
	c := proc("c", `printf '"timestamp":0'`) // the key's text inside a value
	steps := []struct {
		name    string
		hosted  []hostedView
		encoded int // records encoded at this step
	}{
		{"empty", nil, 0},
		{"first write", []hostedView{view(b, 2, 11, model.ProcRunning), view(a, 1, 10, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 3},
		{"nothing changed", []hostedView{view(a, 1, 10, model.ProcRunning), view(b, 2, 11, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 0},
		{"one restarted", []hostedView{view(a, 1, 20, model.ProcRunning), view(b, 2, 11, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 1},
		{"one's state", []hostedView{view(a, 1, 20, model.ProcBackoff), view(b, 2, 11, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 1},
		{"b dropped", []hostedView{view(a, 1, 20, model.ProcBackoff), view(c, 3, 12, model.ProcRunning)}, 0},
		{"b again, a new definition", []hostedView{view(a, 1, 20, model.ProcBackoff), view(b2, 4, 11, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 1},
		{"a new definition, same pid", []hostedView{view(a, 5, 20, model.ProcBackoff), view(b2, 4, 11, model.ProcRunning), view(c, 3, 12, model.ProcRunning)}, 1},
		{"an op", func() []hostedView {
			v := view(c, 3, 12, model.ProcRunning)
			v.lastOp = model.OpStop
			return []hostedView{view(a, 5, 20, model.ProcBackoff), view(b2, 4, 11, model.ProcRunning), v}
		}(), 1},
		{"no generation: always encoded", []hostedView{view(a, 0, 20, model.ProcBackoff)}, 1},
		{"again", []hostedView{view(a, 0, 20, model.ProcBackoff)}, 1},
	}
	var enc regEncoder
	for i, s := range steps {
		now := int64(1700000000 + i)
		before := enc.encoded
		got, err := enc.encode(slices.Clone(s.hosted), now)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		recs := records(slices.Clone(s.hosted), now)
		if recs == nil {
			recs = []procRecord{}
		}
		want, err := json.Marshal(registryFile{Proc: recs})
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); string(got) != string(want) {
			t.Fatalf("%s:\n got %s\nwant %s", s.name, got, want)
		}
		if n := enc.encoded - before; n != s.encoded {
			t.Errorf("%s: %d records encoded, want %d", s.name, n, s.encoded)
		}
	}
}

// records is the registry of hosted, by process key, stamped now: what
// the encoder's output is compared with, json.Marshal of it.
func records(hosted []hostedView, now int64) []procRecord {
	sortHosted(hosted)
	recs := make([]procRecord, len(hosted))
	for i, v := range hosted {
		recs[i] = v.record(now)
	}
	return recs
}
