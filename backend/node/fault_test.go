package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/model"
)

// faultEnv names the store dir of the server process that
// TestRestartTaskSurvivesServerKill9 kills.
const faultEnv = "GSEPROC_FAULT_SERVER"

const faultHosts = 5

func faultCfg(dir, listen string) config.Config {
	cfg := config.Default()
	cfg.NATS.Listen = listen
	cfg.NATS.StoreDir = dir
	// A successor that had to wait for the lease would be late.
	cfg.Engine.LeaseTTL = config.Duration(resumeLeaseTTL)
	cfg.Simulator = config.SimulatorConfig{Hosts: 10, Seed: 5, Clouds: 1, Namespaces: config.Default().Simulator.Namespaces, Demo: true}
	return cfg
}

// faultItems are one definition per real agent (cloud 11..15 on
// 127.0.0.1): nodetest.DaemonItems in namespace biz_1.
func faultItems(work string) []model.ProcessDef {
	var clouds []int
	for i := range faultHosts {
		clouds = append(clouds, 11+i)
	}
	return nodetest.DaemonItems(work, "biz_1", clouds)
}

// TestFaultHelperServer is the server process of
// TestRestartTaskSurvivesServerKill9: it waits for the agents, starts
// their processes, then starts a restart task and waits to be killed.
func TestFaultHelperServer(t *testing.T) {
	dir := os.Getenv(faultEnv)
	if dir == "" {
		t.Skip("the server process of TestRestartTaskSurvivesServerKill9")
	}
	ctx := context.Background()
	e, nb, _, err := node.OpenNATSEngine(ctx, faultCfg(dir, "127.0.0.1:-1"), true, false, "test", nil)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	fmt.Println("NATS", nb.ClientURL)
	items := faultItems(os.Getenv(faultEnv + "_WORK"))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		for _, it := range items {
			if nodetest.HostOnline(e, it.Hosts[0]) {
				n++
			}
		}
		if n == len(items) {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("ERROR agents not online:", n)
			return
		}
	}
	run := func(op model.OpType) (string, []model.Result) {
		task, err := e.Operate(ctx, backend.OperateRequest{Op: op, Items: items})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		if op == model.OpRestart {
			return task.ID, nil
		}
		ch, _ := e.Watch(ctx, task.ID, 0)
		var rs []model.Result
		for r := range ch {
			rs = append(rs, r)
		}
		return task.ID, rs
	}
	if _, rs := run(model.OpStart); len(rs) != faultHosts {
		fmt.Println("ERROR start:", rs)
		return
	} else {
		for _, r := range rs {
			if r.Code != 0 {
				fmt.Println("ERROR start:", r.Host, r.Code, r.Message)
				return
			}
		}
	}
	id, _ := run(model.OpRestart)
	fmt.Println("TASK", id)
	time.Sleep(2 * time.Minute) // until SIGKILL
}

// TestRestartTaskSurvivesServerKill9: real agents run a restart task of
// their real processes; the server is killed with SIGKILL while every
// host's start_cmd runs. The restarted server (same store dir, so the same
// server id) resumes the task at once, and every host is restarted exactly
// once, counted by the commands' own side effects: one more start and one
// stop per host, and every result success (not 828, not 117).
func TestRestartTaskSurvivesServerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process and real agents")
	}
	dir, work := t.TempDir(), t.TempDir()
	items := faultItems(work)
	var pidFiles []string
	for _, it := range items {
		d := it.Process.Spec.Identity.SetupPath
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "daemon.sh"), []byte(nodetest.Daemon), 0o755); err != nil {
			t.Fatal(err)
		}
		pidFiles = append(pidFiles, it.Process.Spec.Identity.PidPath)
	}
	nodetest.KillAtEnd(t, pidFiles...) // before the agents: it runs after they stopped

	proc := nodetest.StartProc(t, "TestFaultHelperServer", faultEnv+"="+dir, faultEnv+"_WORK="+work)
	natsURL := proc.Next("NATS")
	for i := range faultHosts {
		nodetest.StartAgent(t, nodetest.AgentConfig(natsURL, 11+i, "127.0.0.1", filepath.Join(work, "agent"+strconv.Itoa(i))))
	}
	taskID := proc.Next("TASK")
	proc.Drain()
	count := func(i int, file, word string) int {
		b, _ := os.ReadFile(filepath.Join(items[i].Process.Spec.Identity.SetupPath, file))
		return strings.Count(string(b), word)
	}
	// Kill the server once every host runs the restart's start_cmd (its
	// 2 s sleep): the stop is done, the start is under way.
	nodetest.WaitFor(t, "every host in the restart's start_cmd", 60*time.Second, func() bool {
		for i := range faultHosts {
			if count(i, "starts.log", "start") < 2 {
				return false
			}
		}
		return true
	})
	proc.Kill()

	// The same server again: same store dir and NATS address.
	up := time.Now()
	e, _, closer, err := node.OpenNATSEngine(context.Background(), faultCfg(dir, strings.TrimPrefix(natsURL, "nats://")), true, false, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	ready := time.Now()
	rs := nodetest.Results(t, e, taskID, 2*resumeWithin) // the resumed task completes
	took := time.Since(up)
	if len(rs) != faultHosts {
		t.Fatalf("%d results, want %d", len(rs), faultHosts)
	}
	for _, r := range rs {
		if r.State != model.StateSuccess || r.Code != model.CodeSuccess {
			t.Errorf("%s %s: %s %d %s", r.Host, r.ProcKey, r.State, r.Code, r.Message)
		}
	}
	for i := range faultHosts {
		if s, st := count(i, "starts.log", "start"), count(i, "stops.log", "stop"); s != 2 || st != 1 {
			t.Errorf("host %d: %d starts and %d stops, want 2 (the first start, the restart's) and 1", 11+i, s, st)
		}
	}
	if took > resumeWithin {
		t.Errorf("the resumed task took %s with a %s lease: the server waited for its own lease", took, resumeLeaseTTL)
	}
	t.Logf("restart over %d real agents survived kill -9 of the server; resumed task done %s after the restart; %s",
		faultHosts, took.Round(time.Millisecond), resumedAfter(rs, up, ready))
}

// resumedAfter says when the successor, which began to open at up and
// was open at ready, first dispatched a target of the resumed task (the
// earliest Started of rs after up; it resumes while it opens): the figure
// of "resumes at once" (issue 12: < 2 s after it is up), logged, not
// asserted: a loaded machine may miss any window.
func resumedAfter(rs []model.Result, up, ready time.Time) string {
	var first time.Time
	for _, r := range rs {
		if r.Started.After(up) && (first.IsZero() || r.Started.Before(first)) {
			first = r.Started
		}
	}
	if first.IsZero() {
		return "no target dispatched by the successor"
	}
	return fmt.Sprintf("the successor's first dispatch %s after it began to open (its opening took %s)",
		first.Sub(up).Round(time.Millisecond), ready.Sub(up).Round(time.Millisecond))
}
