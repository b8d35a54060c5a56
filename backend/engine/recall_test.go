package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestCancelDuringTakeover: A runs a task whose ops on some hosts last
// until stopped; A crashes (its store first: it lets nothing go); the
// cancel is asked of B, which does not run the task, and B takes the
// task over once A's lease expires. B sends nothing to run: each target A
// may have sent and not finished goes to its host as a cancel by op id
// (CancelOp), and the host's answer (stopped) is the result; A's finished
// results stay. In a roll, the targets of batches A had not started were
// sent to no host: they are cancelled without being sent.
func TestCancelDuringTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	for _, tc := range []struct {
		name string
		roll *model.RolloutSpec
	}{{"plain", nil}, {"roll", &model.RolloutSpec{Batch: "4"}}} {
		t.Run(tc.name, func(t *testing.T) { cancelDuringTakeover(t, tc.roll) })
	}
}

func cancelDuringTakeover(t *testing.T, roll *model.RolloutSpec) {
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.Concurrency = 8
	cfg.LeaseTTL = config.Duration(time.Second)
	const hosts, quick = 8, 3
	var mu sync.Mutex
	sentByA := map[model.Host]bool{} // running at A when it crashed
	fa := newFake(hosts)
	fa.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		if h.IP < hostN(quick).IP {
			return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, nil
		}
		mu.Lock()
		sentByA[h] = true
		mu.Unlock()
		<-ctx.Done() // runs until stopped
		return model.AgentReply{}, ctx.Err()
	}
	fb := newFake(hosts)
	got := map[model.Host]model.AgentRequest{}
	fb.reply = func(_ context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		mu.Lock()
		got[h] = req
		mu.Unlock()
		if !req.CancelOp {
			return model.AgentReply{Code: model.CodeSuccess, Message: "ran"}, nil
		}
		return model.AgentReply{Code: model.CodeCommandFailed, Cancelled: true, Message: "stopped (its process group killed)"}, nil
	}
	stA, stB := sharedStore(t, emb), sharedStore(t, emb)
	ctx := context.Background()
	a := engine.New(cfg, fa, fa, stA, engine.WithOwner("A"))
	b := engine.New(cfg, fb, fb, stB, engine.WithOwner("B"))
	startAll(t, a, b)
	var all []model.Host
	for _, h := range fa.hosts {
		all = append(all, h.Host)
	}
	if err := a.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: all}}); err != nil {
		t.Fatal(err)
	}
	task, err := a.Operate(ctx, backend.OperateRequest{Op: model.OpRestart, Selector: backend.Selector{Namespace: "ns"}, Rollout: roll})
	if err != nil {
		t.Fatal(err)
	}
	running := hosts - quick
	if roll != nil {
		running = 1 // the first batch: three quick hosts and one that runs
	}
	waitUntil(t, "A's quick results stored", 30*time.Second, func() bool {
		v, err := b.Task(ctx, task.ID)
		return err == nil && countFinal(v.Results) == quick
	})
	waitUntil(t, "A running the others", 30*time.Second, func() bool { return fa.inflight.Load() == int64(running) })
	_ = stA.Close() // A crashes: nothing let go
	_ = a.Close()

	if err := b.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	var v backend.TaskView
	waitUntil(t, "B took the task over and finished it", 60*time.Second, func() bool {
		v, err = b.Task(ctx, task.ID)
		return err == nil && v.Task.Status.Final() && countFinal(v.Results) == hosts
	})
	if v.Task.Status != model.TaskCanceled {
		t.Errorf("task %s, want %s", v.Task.Status, model.TaskCanceled)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sentByA) != running {
		t.Fatalf("A was running %d ops, want %d", len(sentByA), running)
	}
	for _, r := range v.Results {
		switch {
		case r.Host.IP < hostN(quick).IP:
			if r.State != model.StateSuccess {
				t.Errorf("%s: A's result %s %q changed", r.Host, r.State, r.Message)
			}
		case sentByA[r.Host]:
			if r.State != model.StateCancelled || !strings.Contains(r.Message, "the host stopped it: stopped") {
				t.Errorf("%s: %s %q, want cancelled by the host", r.Host, r.State, r.Message)
			}
		default: // a batch A had not started
			if r.State != model.StateCancelled || !strings.Contains(r.Message, "before it was sent") {
				t.Errorf("%s: %s %q, want cancelled before it was sent", r.Host, r.State, r.Message)
			}
		}
	}
	if len(got) != running {
		t.Errorf("B sent to %d hosts, want the %d A was running", len(got), running)
	}
	for h, req := range got {
		if !sentByA[h] || !req.CancelOp || req.OpID != model.OpID(task.ID, h, req.Process.Key()) {
			t.Errorf("%s: B sent %+v, want a cancel of the op A sent", h, req)
		}
	}
}
