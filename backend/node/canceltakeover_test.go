//go:build linux

package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/transport/natsembed"
	"gseproc/model"
)

// cancelTakeoverEnv names the NATS URL of the server process that
// TestCancelDuringTakeoverStopsCommands kills.
const cancelTakeoverEnv = "GSEPROC_CANCEL_TAKEOVER_SERVER"

const cancelTakeoverHosts = 3

// cancelTakeoverCfg is a server on the test's NATS (an external cluster
// to it) under its own id; leases last 2 s, so the successor takes over
// soon after the kill.
func cancelTakeoverCfg(url, id string) config.Config {
	cfg := config.Default()
	cfg.NATS.URLs = []string{url}
	cfg.NATS.User, cfg.NATS.Password = "peer", "peerpw"
	cfg.Engine.ServerID = id
	cfg.Engine.LeaseTTL = config.Duration(2 * time.Second)
	return cfg
}

// cancelTakeoverItems: one definition per real agent (cloud 31..33 on
// 127.0.0.1) whose start_cmd runs until stopped (it writes its pid, then
// becomes sleep 300; no pid file comes, so the op is in flight until its
// op_timeout of two minutes).
func cancelTakeoverItems(work string) []model.ProcessDef {
	var items []model.ProcessDef
	for i := range cancelTakeoverHosts {
		cloud := 31 + i
		dir := filepath.Join(work, "h"+strconv.Itoa(cloud))
		name := "long" + strconv.Itoa(cloud)
		pol := model.DefaultPolicy()
		pol.AutoType, pol.OpTimeout, pol.StartCheckEndSecs = model.AutoResident, 120, 10
		items = append(items, model.ProcessDef{
			Process: model.Process{
				Meta: model.Meta{Namespace: "biz_1", Name: name},
				Spec: model.Spec{
					Identity: model.Identity{ProcName: name, SetupPath: dir, PidPath: filepath.Join(dir, "never.pid")},
					Control:  model.Control{StartCmd: "echo $$ > cmd.pid; exec sleep 300"},
					Policy:   pol,
				},
			},
			Hosts: []model.Host{{IP: "127.0.0.1", CloudID: cloud}},
		})
	}
	return items
}

// TestCancelTakeoverHelperServer is server A of
// TestCancelDuringTakeoverStopsCommands: it starts the long commands on
// the agents and waits to be killed.
func TestCancelTakeoverHelperServer(t *testing.T) {
	url := os.Getenv(cancelTakeoverEnv)
	if url == "" {
		t.Skip("the server process of TestCancelDuringTakeoverStopsCommands")
	}
	ctx := context.Background()
	e, _, _, err := node.OpenNATSEngine(ctx, cancelTakeoverCfg(url, "srv-a"), false, false, "test", nil)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	items := cancelTakeoverItems(os.Getenv(cancelTakeoverEnv + "_WORK"))
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
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: items})
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	fmt.Println("TASK", task.ID)
	time.Sleep(3 * time.Minute) // until SIGKILL
}

// TestCancelDuringTakeoverStopsCommands: server A sends long commands to
// real agents and is killed with SIGKILL while they run; the cancel is
// asked of server B, which did not run the task and takes it over once
// A's lease expires. The commands' processes are gone (the agents killed
// their process groups) and every result is cancelled, said by its host.
func TestCancelDuringTakeoverStopsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process and real agents")
	}
	nc := config.Default().NATS
	nc.Listen, nc.StoreDir = "127.0.0.1:-1", t.TempDir()
	nc.Users = []config.NATSUser{{User: "peer", Password: "peerpw", Role: config.NATSRoleServer}}
	emb, err := natsembed.StartEmbedded(nc, natsembed.EmbeddedOptions{Demo: true}, nil) // agents join without credentials
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	url := emb.ClientURL()

	work := t.TempDir()
	items := cancelTakeoverItems(work)
	var cmdPids []string
	for _, it := range items {
		d := it.Process.Spec.Identity.SetupPath
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		cmdPids = append(cmdPids, filepath.Join(d, "cmd.pid"))
	}
	nodetest.KillAtEnd(t, cmdPids...) // before the agents: it runs after they stopped
	for i := range cancelTakeoverHosts {
		nodetest.StartAgent(t, nodetest.AgentConfig(url, 31+i, "127.0.0.1", filepath.Join(work, "agent"+strconv.Itoa(i))))
	}

	proc := nodetest.StartProc(t, "TestCancelTakeoverHelperServer", cancelTakeoverEnv+"="+url, cancelTakeoverEnv+"_WORK="+work)
	taskID := proc.Next("TASK")
	proc.Drain()
	alive := func(pid int) bool { return pid > 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
	pids := make([]int, len(cmdPids))
	nodetest.WaitFor(t, "every host running the long command", 60*time.Second, func() bool {
		for i, f := range cmdPids {
			b, _ := os.ReadFile(f)
			pids[i], _ = strconv.Atoi(strings.TrimSpace(string(b)))
			if !alive(pids[i]) {
				return false
			}
		}
		return true
	})
	proc.Kill() // SIGKILL: A lets nothing go

	ctx := context.Background()
	b, _, closer, err := node.OpenNATSEngine(ctx, cancelTakeoverCfg(url, "srv-b"), false, false, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	if err := b.Cancel(ctx, taskID); err != nil {
		t.Fatal(err)
	}
	rs := nodetest.Results(t, b, taskID, 90*time.Second) // the task ends at B
	if len(rs) != cancelTakeoverHosts {
		t.Fatalf("%d results, want %d", len(rs), cancelTakeoverHosts)
	}
	for _, r := range rs {
		if r.State != model.StateCancelled || !strings.Contains(r.Message, "the host stopped it") {
			t.Errorf("%s %s: %s %d %q, want cancelled by its host", r.Host, r.ProcKey, r.State, r.Code, r.Message)
		}
	}
	// Killed before the host answered; reaped by the agent (a zombie
	// still answers kill 0), so allow it a moment.
	nodetest.WaitFor(t, "every long command gone", 30*time.Second, func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	v, err := b.Task(ctx, taskID)
	if err != nil || v.Task.Status != model.TaskCanceled {
		t.Fatalf("task at B: %s (%v)", v.Task.Status, err)
	}
	t.Logf("server A killed with %d commands running; cancel asked of B, which took the task over: every command stopped, results cancelled", cancelTakeoverHosts)
}
