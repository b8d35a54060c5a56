//go:build linux

package node_test

import (
	"context"
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
	"gseproc/backend/transport/transporttest"
	"gseproc/model"
)

// TestReplySurvivesNodeLoss: a three-node NATS cluster; a gseproc server
// and a real agent both connected to node A; the agent runs a slow
// start. Node A is shut down while the start runs: the agent and the
// server reconnect to the other nodes (found by NATS's discovery), and
// the agent's answer still reaches the task: the result recorded is the
// success the host really had, not 116. (Before replies went to the
// host's own subject, this failed with "Permissions Violation for
// Publish to _INBOX": the reply permission existed only on the node that
// delivered the request.)
func TestReplySurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node NATS cluster and a real agent")
	}
	me := model.Host{IP: "127.0.0.1", CloudID: 21}
	nodes := natsCluster(t, 3, config.NATSUser{User: "agent21", Password: "a21pw", Host: me.String()})
	ctx := context.Background()

	e, _ := gseServer(t, nodes[0].ClientURL(), 3)

	work := t.TempDir()
	// The start waits for node A to go, then takes 3 s more.
	item := slowStart(t, me, work, "slow", 3, 40, 10)
	ac := nodetest.AgentConfig(nodes[0].ClientURL(), me.CloudID, me.IP, filepath.Join(work, "agent"))
	ac.NATS.User, ac.NATS.Password = "agent21", "a21pw"
	ac.NATS.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	nodetest.StartAgent(t, ac)
	nodetest.WaitFor(t, "the agent online", 30*time.Second, func() bool { return nodetest.HostOnline(e, me) })

	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, "the start running on the host", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(work, "begun"))
		return err == nil
	})
	nodes[0].Shutdown()
	letGo(t, work)

	rs := nodetest.Results(t, e, task.ID, 60*time.Second)
	if len(rs) != 1 || rs[0].Code != model.CodeSuccess || rs[0].State != model.StateSuccess {
		t.Fatalf("start after node A died: %+v, want one success", rs)
	}
	v, err := e.Task(ctx, task.ID)
	if err != nil || v.Task.Status != model.TaskDone {
		t.Fatalf("task %+v %v: want done", v.Task, err)
	}
	b, err := os.ReadFile(filepath.Join(work, "d.pid"))
	if err != nil {
		t.Fatalf("the daemon's pid file: %v", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 1 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the daemon (pid %q) is not running", b)
	}
}

// slowStart is nodetest.Daemon, written to work, hosted on h as name: its
// start_cmd writes the file begun, waits for the file go (the test makes
// it once it has done what must happen while the start runs: no
// wall-clock window), sleeps secs, then starts the daemon.
// The daemon is killed at the test's end (call it before starting the
// agent: that cleanup then runs after the agent stopped).
func slowStart(t *testing.T, h model.Host, work, name string, secs, opTimeout, checkEndSecs int) model.ProcessDef {
	t.Helper()
	if err := os.WriteFile(filepath.Join(work, "daemon.sh"), []byte(nodetest.Daemon), 0o755); err != nil {
		t.Fatal(err)
	}
	nodetest.KillAtEnd(t, filepath.Join(work, "d.pid"))
	return model.ProcessDef{
		Process: model.Process{
			Meta: model.Meta{Namespace: "biz_1", Name: name},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: name, SetupPath: work, PidPath: filepath.Join(work, "d.pid")},
				Control:  model.Control{StartCmd: "echo begun > begun; while [ ! -e go ]; do sleep 0.05; done; sleep " + strconv.Itoa(secs) + "; ./daemon.sh >/dev/null 2>&1 &"},
				Policy: model.Policy{AutoType: model.AutoResident, StartCheckSecs: model.DefaultStartCheckSecs,
					StartRetries: model.DefaultStartRetries, StartInterval: model.DefaultStartInterval,
					OpTimeout: opTimeout, StartCheckEndSecs: checkEndSecs, InstanceNum: 1},
			},
		},
		Hosts: []model.Host{h},
	}
}

// letGo lets slowStart's start_cmd in work go on.
func letGo(t *testing.T, work string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLateAnswerCorrectsTimeout: a real agent reaches NATS through a
// relay; while it runs a start (held until then, done within its 4 s
// deadline) the relay cuts it off and keeps it off past the deadline: the
// server records 116.
// The agent had started the process and answered (nats.go kept the answer
// while it reconnected); let back in, its answer arrives late and
// replaces the timeout by the success, once, with a result_corrected
// event; the task ends done, in memory and in the store.
func TestLateAnswerCorrectsTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real agent")
	}
	ctx := context.Background()
	cfg := nodetest.NATSConfig(t.TempDir())
	cfg.Engine.DeadlineSlack = 0
	e, nb, closeEngine, err := node.OpenNATSEngine(ctx, cfg, true, false, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeEngine() })
	evs, err := e.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	me := model.Host{IP: "127.0.0.1", CloudID: 22}
	// The start goes on once the agent is cut off, within its 4 s deadline.
	item := slowStart(t, me, work, "late", 0, 4, 2)
	rl := transporttest.NewRelay(t, nb.ClientURL)
	ac := nodetest.AgentConfig(rl.URL(), me.CloudID, me.IP, filepath.Join(work, "agent"))
	ac.NATS.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	nodetest.StartAgent(t, ac)
	nodetest.WaitFor(t, "the agent online", 30*time.Second, func() bool { return nodetest.HostOnline(e, me) })

	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, "the start running on the host", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(work, "begun"))
		return err == nil
	})
	rl.Point("")
	rl.Cut()
	letGo(t, work)

	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := e.Watch(wctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var first []model.Result
	for r := range ch {
		first = append(first, r)
	}
	if len(first) != 1 || first[0].Code != model.CodeTimeout {
		t.Fatalf("while the agent is cut off: %+v, want one 116", first)
	}

	rl.Point(nb.ClientURL)
	var corrected []model.Event
	for len(corrected) == 0 {
		select {
		case ev := <-evs:
			if ev.Kind == model.EventResultCorrected {
				corrected = append(corrected, ev)
			}
		case <-wctx.Done():
			t.Fatal("no result_corrected event")
		}
	}
	if ev := corrected[0]; ev.Host != me || ev.ProcKey != item.Process.Key() || !strings.Contains(ev.Message, task.ID) || !strings.Contains(ev.Message, "116") {
		t.Fatalf("event %+v: want the host, the process, the task and the 116 it corrects", ev)
	}
	check := func(where string, tk model.Task, rs []model.Result) {
		t.Helper()
		if tk.Status != model.TaskDone || tk.Counts.Success != 1 || tk.Counts.Timeout != 0 {
			t.Fatalf("%s: task %s %+v, want done with one success", where, tk.Status, tk.Counts)
		}
		if len(rs) != 1 || rs[0].Code != model.CodeSuccess || rs[0].State != model.StateSuccess || rs[0].Seq <= first[0].Seq {
			t.Fatalf("%s: results %+v, want the success, after the timeout", where, rs)
		}
	}
	v, err := e.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("engine", v.Task, v.Results)
	nodetest.WaitFor(t, "the correction stored", 30*time.Second, func() bool {
		tk, _, err := nb.Store.Task(ctx, task.ID)
		return err == nil && tk.Status == model.TaskDone
	})
	st, _, _ := nb.Store.Task(ctx, task.ID)
	srs, err := nb.Store.Results(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("store", st, srs)
	// Once: no second correction comes (the agent's heartbeats go on).
	select {
	case ev := <-evs:
		if ev.Kind == model.EventResultCorrected {
			t.Fatalf("a second correction: %+v", ev)
		}
	case <-time.After(500 * time.Millisecond):
	}
}
