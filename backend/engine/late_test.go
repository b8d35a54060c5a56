package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// lateAgents are fakeAgents that also deliver late answers (LateSource):
// the test hands them in with late.
type lateAgents struct {
	*fakeAgents
	mu  sync.Mutex
	fns []func(model.LateReply)
}

func (l *lateAgents) SubscribeLate(_ context.Context, fn func(model.LateReply)) {
	l.mu.Lock()
	l.fns = append(l.fns, fn)
	l.mu.Unlock()
}

func (l *lateAgents) late(lr model.LateReply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns {
		fn(lr)
	}
}

// TestLateAnswer: a host that timed out answers late: its result becomes
// the success, once (a repeat of the answer changes nothing), with one
// result_corrected event, and the task done, in the engine and in the
// store; an engine that does not hold the task (its run is elsewhere, or
// forgotten) corrects it in the store when the task is complete there.
func TestLateAnswer(t *testing.T) {
	ctx := context.Background()
	f := &lateAgents{fakeAgents: newFake(2)}
	slow := hostN(0)
	f.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		if h == slow {
			<-ctx.Done()
			return model.AgentReply{}, ctx.Err()
		}
		return model.AgentReply{Code: 0, Message: "success"}, nil
	}
	cfg := testCfg()
	cfg.DeadlineSlack = 0
	st := store.NewMemory()
	e := engine.New(cfg, f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	all := []model.Host{hostN(0), hostN(1)}
	if err := e.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: all}}); err != nil {
		t.Fatal(err)
	}
	evs, err := e.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run := func() model.Task {
		t.Helper()
		task, err := e.Operate(ctx, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "ns", Name: "app"}})
		if err != nil {
			t.Fatal(err)
		}
		ch, err := e.Watch(ctx, task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for r := range ch {
			n++
			if r.Host == slow && r.Code != model.CodeTimeout {
				t.Fatalf("the slow host: %+v, want 116", r)
			}
		}
		if n != 2 {
			t.Fatalf("%d results, want 2", n)
		}
		return task
	}
	corrections := func(want int) {
		t.Helper()
		got := 0
		for deadline := time.After(20 * time.Second); got < want; {
			select {
			case ev := <-evs:
				if ev.Kind == model.EventResultCorrected {
					got++
				}
			case <-deadline:
				t.Fatalf("%d result_corrected events, want %d", got, want)
			}
		}
		select { // and no more
		case ev := <-evs:
			if ev.Kind == model.EventResultCorrected {
				t.Fatalf("one correction too many: %+v", ev)
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
	// stored waits until the store holds task with status and the slow
	// host's result with code.
	stored := func(task model.Task, code int, status model.TaskStatus) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			tk, _, _ := st.Task(ctx, task.ID)
			rs, _ := st.Results(ctx, task.ID)
			for _, r := range rs {
				if r.Host == slow && r.Code == code && tk.Status == status {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("stored: task %s, results %+v; want %s and the slow host's %d", tk.Status, rs, status, code)
			}
		}
	}

	task := run()
	stored(task, model.CodeTimeout, model.TaskFailed)
	lr := model.LateReply{Host: slow, TaskID: task.ID, OpID: model.OpID(task.ID, slow, "ns:app"), Reply: model.AgentReply{Code: 0, Message: "started late"}}
	f.late(lr)
	corrections(1)
	stored(task, model.CodeSuccess, model.TaskDone)
	v, err := e.Task(ctx, task.ID)
	if err != nil || v.Task.Status != model.TaskDone || v.Task.Counts.Success != 2 || v.Task.Counts.Timeout != 0 {
		t.Fatalf("engine: %+v %v, want done with 2 successes", v.Task, err)
	}
	for _, r := range v.Results {
		if r.Host == slow && (r.Code != 0 || !strings.Contains(r.Message, "after the deadline")) {
			t.Fatalf("engine: the slow host's result %+v", r)
		}
	}
	// A watch from the start sends the log: the slow host's timeout as it
	// was sent (the run keeps it, though its target's result is now the
	// correction), then the correction, in Seq order.
	ch, err := e.Watch(ctx, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var log []model.Result
	for r := range ch {
		log = append(log, r)
	}
	if len(log) != 3 || log[2].Host != slow || log[2].Code != 0 || log[2].Seq != 3 {
		t.Fatalf("watch after the correction: %+v, want 3 results, the correction last", log)
	}
	for _, r := range log[:2] {
		if r.Host == slow && (r.Code != model.CodeTimeout || r.Seq > 2) {
			t.Fatalf("watch after the correction: the slow host's first result %+v, want its timeout", r)
		}
	}
	// The same answer again, and an op id that is not this task's: nothing.
	f.late(lr)
	f.late(model.LateReply{Host: slow, TaskID: task.ID, OpID: "forged/op", Reply: model.AgentReply{Code: 0}})
	corrections(0)

	// Another engine on the store, which never ran the task: it corrects
	// it in the store.
	task2 := run()
	stored(task2, model.CodeTimeout, model.TaskFailed)
	f2 := &lateAgents{fakeAgents: newFake(2)}
	e2 := engine.New(cfg, f2, f2, st)
	if err := e2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.Close() })
	// The answer's status is every late subscriber's: the engine
	// completes a copy of it, not the one it is handed.
	sent := &model.ProcStatus{State: model.ProcFatal, PID: -1}
	f2.late(model.LateReply{Host: slow, TaskID: task2.ID, OpID: model.OpID(task2.ID, slow, "ns:app"), Reply: model.AgentReply{Code: model.CodeCommandFailed, Message: "start failed", Status: sent}})
	stored(task2, model.CodeCommandFailed, model.TaskFailed)
	if *sent != (model.ProcStatus{State: model.ProcFatal, PID: -1}) {
		t.Fatalf("the late answer's status was changed in place: %+v", *sent)
	}
	rs, _ := st.Results(ctx, task2.ID)
	for _, r := range rs {
		if r.Host == slow && (r.State != model.StateFailed || !strings.Contains(r.Message, "start failed")) {
			t.Fatalf("store: the slow host's corrected result %+v", r)
		}
	}
}
