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
	"gseproc/backend/engine"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
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

	cfg := config.Default()
	cfg.NATS.URLs = []string{nodes[0].ClientURL()}
	cfg.NATS.User, cfg.NATS.Password = "server", "spw"
	cfg.NATS.Replicas = 3
	nb, err := node.StartNATS(ctx, cfg, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(cfg.Engine, nb.Dispatcher, nb.Inventory, nb.Store)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(); _ = nb.Close() })

	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "daemon.sh"), []byte(nodetest.Daemon), 0o755); err != nil {
		t.Fatal(err)
	}
	nodetest.KillAtEnd(t, filepath.Join(work, "d.pid")) // before the agent: it runs after the agent stopped
	ac := nodetest.AgentConfig(nodes[0].ClientURL(), me.CloudID, me.IP, filepath.Join(work, "agent"))
	ac.NATS.User, ac.NATS.Password = "agent21", "a21pw"
	ac.NATS.HeartbeatInterval = config.Duration(100 * time.Millisecond)
	nodetest.StartAgent(t, ac)
	nodetest.WaitFor(t, "the agent online", 30*time.Second, func() bool { return nodetest.HostOnline(e, me) })

	item := model.ProcessDef{
		Process: model.Process{
			Meta: model.Meta{Namespace: "biz_1", Name: "slow"},
			Spec: model.Spec{
				Identity: model.Identity{ProcName: "slow", SetupPath: work, PidPath: filepath.Join(work, "d.pid")},
				// The start takes 3 s: node A goes while it runs.
				Control: model.Control{StartCmd: "echo begun > begun; sleep 3; ./daemon.sh >/dev/null 2>&1 &"},
				Policy:  model.Policy{AutoType: model.AutoResident, OpTimeout: 40, StartCheckEndSecs: 10, InstanceNum: 1},
			},
		},
		Hosts: []model.Host{me},
	}
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Items: []model.ProcessDef{item}})
	if err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, "the start running on the host", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(work, "begun"))
		return err == nil
	})
	nodes[0].Shutdown()

	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := e.Watch(wctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rs []model.Result
	for r := range ch {
		rs = append(rs, r)
	}
	if wctx.Err() != nil {
		t.Fatalf("task not finished: %+v", rs)
	}
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
