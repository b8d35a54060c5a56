package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/model"
)

// TestLateAnswersOnTwoServers: a complete task whose every host timed
// out gets its late answers on two servers at once (each server receives
// half of them: the one that ran the task corrects its run, the other the
// store). Every correction is counted in the stored task: none of the two
// stores its counts over the other's.
func TestLateAnswersOnTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	const hosts = 16
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.DeadlineSlack = 0
	timeout := func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		<-ctx.Done()
		return model.AgentReply{}, ctx.Err()
	}
	fa := &lateAgents{fakeAgents: newFake(hosts)}
	fb := &lateAgents{fakeAgents: newFake(hosts)}
	fa.reply, fb.reply = timeout, timeout
	stA, stB := sharedStore(t, emb), sharedStore(t, emb)
	logs := &testLog{t: t}
	a := engine.New(cfg, fa, fa, stA, engine.WithOwner("A"), engine.WithLogger(logs.logger("A")))
	b := engine.New(cfg, fb, fb, stB, engine.WithOwner("B"), engine.WithLogger(logs.logger("B")))
	startAll(t, a, b)
	ctx := context.Background()
	var all []model.Host
	for _, h := range fa.hosts {
		all = append(all, h.Host)
	}
	if err := a.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: all}}); err != nil {
		t.Fatal(err)
	}
	task, err := a.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the task stored complete, every host timed out", time.Minute, func() bool {
		tk, _, err := stB.Task(ctx, task.ID)
		return err == nil && tk.Status.Final() && tk.Counts.Timeout == hosts
	})

	var wg sync.WaitGroup
	for i, h := range all {
		f := fa
		if i%2 == 1 {
			f = fb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.late(model.LateReply{Host: h, TaskID: task.ID, OpID: model.OpID(task.ID, h, "ns:app"),
				Reply: model.AgentReply{Code: 0, Message: "started late"}})
		}()
	}
	wg.Wait()

	waitUntil(t, "every result corrected in the store", time.Minute, func() bool {
		rs, err := stB.Results(ctx, task.ID)
		if err != nil || len(rs) != hosts {
			return false
		}
		for _, r := range rs {
			if r.State != model.StateSuccess {
				return false
			}
		}
		return true
	})
	// The corrections are stored (results) before their task: wait for the
	// last task write, then check it counted them all.
	var tk model.Task
	waitUntil(t, "the stored task counts every correction", time.Minute, func() bool {
		tk, _, err = stB.Task(ctx, task.ID)
		return err == nil && tk.Counts.Success == hosts
	})
	if tk.Counts.Timeout != 0 || tk.Status != model.TaskDone {
		t.Fatalf("stored task: %+v %s, want %d successes, done", tk.Counts, tk.Status, hosts)
	}
}

// testLog writes the engines' warnings to the test's log.
type testLog struct{ t *testing.T }

func (l *testLog) logger(name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{l.t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("engine", name)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
