package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestCancelDuringTakeover: A runs a task whose ops on five hosts last
// until stopped; A crashes (its store first: it lets nothing go); the
// cancel is asked of B, which does not run the task, and B takes the
// task over once A's lease expires. B sends nothing to run: each target A
// had not finished goes to its host as a cancel by op id (CancelOp), and
// the host's answer (stopped) is the result; A's finished results stay.
func TestCancelDuringTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.Concurrency = 8
	cfg.LeaseTTL = config.Duration(time.Second)
	const hosts, quick = 8, 3
	fa := newFake(hosts)
	fa.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		if h.IP < hostN(quick).IP {
			return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, nil
		}
		<-ctx.Done() // runs until stopped
		return model.AgentReply{}, ctx.Err()
	}
	fb := newFake(hosts)
	var mu sync.Mutex
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
	task := operateOnAll(t, a, fa)
	waitUntil(t, "A's quick results stored", 30*time.Second, func() bool {
		v, err := b.Task(ctx, task.ID)
		return err == nil && countFinal(v.Results) == quick
	})
	waitUntil(t, "A running the others", 30*time.Second, func() bool { return fa.inflight.Load() == hosts-quick })
	_ = stA.Close() // A crashes: nothing let go
	_ = a.Close()

	if err := b.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	var final []model.Result
	waitUntil(t, "B took the task over and finished it", 60*time.Second, func() bool {
		v, err := b.Task(ctx, task.ID)
		final = v.Results
		return err == nil && v.Task.Status.Final() && countFinal(v.Results) == hosts
	})
	v, _ := b.Task(ctx, task.ID)
	if v.Task.Status != model.TaskCanceled {
		t.Errorf("task %s, want %s", v.Task.Status, model.TaskCanceled)
	}
	for _, r := range final {
		if r.Host.IP < hostN(quick).IP {
			if r.State != model.StateSuccess {
				t.Errorf("%s: A's result %s %q changed", r.Host, r.State, r.Message)
			}
			continue
		}
		if r.State != model.StateCancelled || !strings.Contains(r.Message, "the host stopped it: stopped") {
			t.Errorf("%s: %s %q, want cancelled by the host", r.Host, r.State, r.Message)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != hosts-quick {
		t.Errorf("B sent to %d hosts, want the %d A had not finished", len(got), hosts-quick)
	}
	for h, req := range got {
		if !req.CancelOp || req.OpID != model.OpID(task.ID, h, req.Process.Key()) {
			t.Errorf("%s: B sent %+v, want a cancel of the op A sent", h, req)
		}
	}
}
