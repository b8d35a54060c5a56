package node_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/node"
	"gseproc/backend/node/nodetest"
	"gseproc/backend/store/jsstore"
	"gseproc/backend/transport"
	"gseproc/model"
)

// helperEnv names the store dir of the server process TestKill9MidTask
// runs (and kills).
const helperEnv = "GSEPROC_NATS_KILL_HELPER"

// resumeLeaseTTL is the lease of the servers that TestKill9MidTask and
// TestRestartTaskSurvivesServerKill9 kill. Renewed every third of it, a
// lease left by a killed server expires at least two thirds of it (200 s)
// after the kill: a successor that waited for it would take longer than
// resumeWithin, which a successor resuming at once meets with room to
// spare on a loaded machine.
const (
	resumeLeaseTTL = 5 * time.Minute
	resumeWithin   = 2 * time.Minute
)

// killCfg is the config of the killed server and of its successor: NATS
// embedded on listen with JetStream in dir, a slow simulated fleet in
// process, and a server-role user the test connects with.
func killCfg(dir, listen string) config.Config {
	cfg := config.Default()
	cfg.NATS.Listen = listen
	cfg.NATS.StoreDir = dir
	cfg.NATS.Users = []config.NATSUser{{User: "peer", Password: "peerpw", Role: config.NATSRoleServer}}
	cfg.Engine.Concurrency = 4
	// The killed server's lease on its task would expire resumeLeaseTTL
	// after its last renewal; its successor on the same store dir is the
	// same server (its id is kept there) and resumes the task at once.
	cfg.Engine.LeaseTTL = config.Duration(resumeLeaseTTL)
	cfg.Simulator = config.SimulatorConfig{Hosts: 120, Seed: 5, Clouds: 1, Namespaces: []string{"web"},
		LatencyMedian: config.Duration(50 * time.Millisecond), LatencyP99: config.Duration(100 * time.Millisecond)}
	return cfg
}

// TestKillHelperServer is the server process of TestKill9MidTask: it
// starts a task and waits to be killed.
func TestKillHelperServer(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the server process of TestKill9MidTask")
	}
	ctx := context.Background()
	// NATS listens on a port of its own choosing, named to the test.
	e, nb, _, err := node.OpenNATSEngine(ctx, killCfg(dir, "127.0.0.1:-1"), false, true, "test", nil)
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	fmt.Println("NATS", nb.ClientURL)
	task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "web"}})
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	fmt.Printf("TASK %s %d\n", task.ID, task.Targets)
	time.Sleep(2 * time.Minute) // until SIGKILL
}

// TestKill9MidTask: a server process is SIGKILLed in the middle of a task;
// the next server on the same JetStream store dir is the same server (same
// id), resumes the task at once (not after the lease TTL), finds the
// results that were final, leaves them as they were, and completes the rest.
func TestKill9MidTask(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process")
	}
	dir := t.TempDir()
	proc := nodetest.StartProc(t, "TestKillHelperServer", helperEnv+"="+dir)
	natsURL := proc.Next("NATS")
	var taskID string
	var total int
	task := proc.Next("TASK")
	if _, err := fmt.Sscanf(task, "%s %d", &taskID, &total); err != nil {
		t.Fatalf("TASK %s: not a task id and a count: %v", task, err)
	}
	proc.Drain()

	// Watch its results through its NATS, as another server would.
	if natsURL == "" {
		t.Fatal("the server process did not name its NATS address")
	}
	nc, err := transport.ConnectNow(transport.ClientOptions{URLs: natsURL, User: "peer", Password: "peerpw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := jsstore.New(ctx, js, jsstore.OptionsFromConfig(config.Default()))
	if err != nil {
		t.Fatal(err)
	}
	var before []model.Result
	nodetest.WaitFor(t, "some final results", 30*time.Second, func() bool {
		rs, err := st.Results(ctx, taskID)
		before = rs
		return err == nil && countFinal(rs) >= 10
	})
	proc.Kill() // SIGKILL
	nc.Close()
	// Only results the killed server had stored count as "before".
	done := countFinal(before)
	if done >= total {
		t.Fatalf("task finished before the kill (%d/%d); make it slower", done, total)
	}

	// The next server on the same store dir resumes the task.
	up := time.Now()
	e, _, closer, err := node.OpenNATSEngine(ctx, killCfg(dir, "127.0.0.1:-1"), false, true, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer()
	ready := time.Now()
	// Watched past resumeWithin, so that a successor that waited for the
	// lease is told apart from one that is slow.
	nodetest.Results(t, e, taskID, 2*resumeWithin) // the resumed task completes
	if d := time.Since(up); d > resumeWithin {
		t.Fatalf("the task completed %s after the successor started: it waited for the lease instead of resuming its own task", d)
	}
	v, err := e.Task(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	if countFinal(v.Results) != total || (v.Task.Status != model.TaskDone && v.Task.Status != model.TaskFailed) {
		t.Fatalf("after restart: %s, %d/%d final", v.Task.Status, countFinal(v.Results), total)
	}
	after := map[model.Target]model.Result{}
	for _, r := range v.Results {
		after[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = r
	}
	for _, r := range before {
		a := after[model.Target{Host: r.Host, ProcKey: r.ProcKey}]
		if r.State.Final() && (!a.Finished.Equal(r.Finished) || a.Seq != r.Seq) {
			t.Fatalf("%s %s: result final before the kill changed: %+v -> %+v", r.Host, r.ProcKey, r, a)
		}
	}
	t.Logf("%d targets: %d final before kill -9, the rest completed %s after the restart; %s", total, done, time.Since(up).Round(time.Millisecond),
		resumedAfter(v.Results, up, ready))
}
