package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store/jsstore"
	"gseproc/model"
)

// rollOn operates op over namespace ns rolled by spec.
func rollOn(t *testing.T, e *engine.Engine, ns string, spec model.RolloutSpec) model.Task {
	t.Helper()
	task, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpRestart,
		Selector: backend.Selector{Namespace: ns}, Source: "test", Rollout: &spec})
	if err != nil {
		t.Fatal(err)
	}
	if task.Rollout == nil || task.Roll == nil || task.Roll.Batches == 0 {
		t.Fatalf("task %+v: no roll", task)
	}
	return task
}

// rollView waits until the roll of task id satisfies ok (20 s at most)
// and returns its view.
func rollView(t *testing.T, e *engine.Engine, id, what string, ok func(backend.TaskView) bool) backend.TaskView {
	t.Helper()
	var v backend.TaskView
	t.Cleanup(func() {
		if t.Failed() && v.Roll != nil {
			t.Logf("last view of %s: task %+v roll %+v", id, v.Task, *v.Roll)
		}
	})
	waitUntil(t, what, 20*time.Second, func() bool {
		var err error
		v, err = e.Task(context.Background(), id)
		return err == nil && v.Roll != nil && ok(v)
	})
	return v
}

// checkBatchesInOrder checks that no target of a batch started before
// every target of the batch before it had finished, from the results (in
// target order) and the view's batch sizes.
func checkBatchesInOrder(t *testing.T, v backend.TaskView) {
	t.Helper()
	at := 0
	var prevEnd time.Time
	for b, bv := range v.Roll.Batches {
		var end time.Time
		for _, res := range v.Results[at : at+bv.Size] {
			if res.State == model.StateCancelled {
				continue
			}
			if res.Started.Before(prevEnd) {
				t.Fatalf("batch %d: %s started at %v, before the batch before ended (%v)", b+1, res.Host, res.Started, prevEnd)
			}
			if res.Finished.After(end) {
				end = res.Finished
			}
		}
		at += bv.Size
		prevEnd = end
	}
	if at != len(v.Results) {
		t.Fatalf("batches hold %d targets of %d", at, len(v.Results))
	}
}

// TestRollOverSimulator: a restart rolled over a simulated fleet goes
// canary first, then batches of 25% of the hosts, one after the other;
// the view shows every batch done.
func TestRollOverSimulator(t *testing.T) {
	e, fleet := simEngine(t, quietFleet(40))
	ns := fleet.Definitions()[0].Process.Meta.Namespace
	task := rollOn(t, e, ns, model.RolloutSpec{Batch: "25%", Canary: "1", MaxFail: "0"})
	ch, err := e.Watch(context.Background(), task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, ch)
	v, err := e.Task(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Task.Status != model.TaskDone || len(got) != task.Targets {
		t.Fatalf("task %+v, %d results watched of %d", v.Task, len(got), task.Targets)
	}
	r := v.Roll
	if r.State != model.RollStateDone || r.Started != len(r.Batches) || !r.Batches[0].Canary || r.Batches[0].Hosts != 1 {
		t.Fatalf("roll %+v", r)
	}
	hosts := 0
	for _, b := range r.Batches {
		hosts += b.Hosts
		if b.State != model.RollStateDone || b.OK != b.Size {
			t.Fatalf("batch %+v not done", b)
		}
	}
	size := (hosts*25 + 99) / 100
	if want := 1 + (hosts-1+size-1)/size; len(r.Batches) != want || hosts < 8 {
		t.Fatalf("%d batches over %d hosts, want %d (canary, then %d hosts a batch)", len(r.Batches), hosts, want, size)
	}
	checkBatchesInOrder(t, v)
}

// gatedAgents answers each host once the test lets it (release), and
// counts dispatches per host.
type gatedAgents struct {
	*fakeAgents
	mu    sync.Mutex
	calls map[model.Host]int
	ops   map[model.Host]map[string]bool
	gate  chan struct{}
	fail  map[model.Host]error // error returned (or code: fakeCode)
	code  map[model.Host]int
}

func newGated(n int, gated bool) *gatedAgents {
	g := &gatedAgents{fakeAgents: newFake(n), calls: map[model.Host]int{}, ops: map[model.Host]map[string]bool{},
		fail: map[model.Host]error{}, code: map[model.Host]int{}}
	if gated {
		g.gate = make(chan struct{})
	}
	g.reply = func(ctx context.Context, h model.Host, req model.AgentRequest) (model.AgentReply, error) {
		g.mu.Lock()
		g.calls[h]++
		if g.ops[h] == nil {
			g.ops[h] = map[string]bool{}
		}
		g.ops[h][req.OpID] = true
		gate, err, code := g.gate, g.fail[h], g.code[h]
		g.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return model.AgentReply{}, ctx.Err()
			}
		}
		if err != nil {
			return model.AgentReply{}, err
		}
		return model.AgentReply{Code: code, Status: &model.ProcStatus{State: model.ProcRunning, PID: 9}}, nil
	}
	return g
}

func (g *gatedAgents) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedAgents) sent() map[model.Host]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[model.Host]int{}
	for h, n := range g.calls {
		out[h] = n
	}
	return out
}

// TestRollPauseResumeAbort: a roll that pauses until resumed waits after
// each batch; an operator's pause in the middle of a batch sends no more
// hosts the op (those running finish); resume goes on; abort cancels the
// targets not sent and ends the task cancelled. Each is audited.
func TestRollPauseResumeAbort(t *testing.T) {
	g := newGated(8, true)
	cfg := testCfg()
	cfg.Concurrency = 2
	e, _ := start(t, g.fakeAgents, cfg)
	ctx := backend.WithActor(context.Background(), model.Actor{Operator: "ann", Via: "test"})
	task := rollOn(t, e, "ns", model.RolloutSpec{Batch: "4", Pause: "manual", MaxFail: "0"})
	// 8 hosts: "ns" holds app on every host and db on the even ones.
	if task.Roll.Batches != 2 || task.Targets != 12 {
		t.Fatalf("task %+v roll %+v", task, task.Roll)
	}
	// Batch 1 (4 hosts, 6 targets) runs 2 at a time; pause it.
	waitUntil(t, "two targets sent", 20*time.Second, func() bool { return g.fakeAgents.calls.Load() >= 2 })
	if _, err := e.ControlRoll(ctx, task.ID, model.RollPause); err != nil {
		t.Fatal(err)
	}
	g.open()
	v := rollView(t, e, task.ID, "paused with the batch's sent targets finished", func(v backend.TaskView) bool {
		return v.Roll.State == model.RollStatePaused && v.Roll.Batches[0].Running == 0
	})
	if b := v.Roll.Batches[0]; b.Pending == 0 || b.OK == 0 || v.Roll.Control.PausedBy != "ann" {
		t.Fatalf("paused mid-batch: %+v, control %+v: want some sent and some not", b, v.Roll.Control)
	}
	sentWhilePaused := len(g.sent())
	if _, err := e.ControlRoll(ctx, task.ID, model.RollResume); err != nil {
		t.Fatal(err)
	}
	v = rollView(t, e, task.ID, "batch 1 done, waiting for a resume", func(v backend.TaskView) bool {
		return v.Roll.State == model.RollStateWaitingResume
	})
	if v.Roll.Started != 1 || v.Roll.Batches[0].State != model.RollStateDone || v.Roll.Batches[1].State != model.RollStateWaiting ||
		len(g.sent()) != 4 || sentWhilePaused >= 4 {
		t.Fatalf("after batch 1: %+v, hosts sent %d (%d while paused)", v.Roll, len(g.sent()), sentWhilePaused)
	}
	if !strings.Contains(v.Roll.Reason, "waiting for an operator") {
		t.Fatalf("reason %q", v.Roll.Reason)
	}
	// Abort instead of resuming: batch 2 is never sent.
	if _, err := e.ControlRoll(ctx, task.ID, model.RollAbort); err != nil {
		t.Fatal(err)
	}
	v = rollView(t, e, task.ID, "aborted", func(v backend.TaskView) bool { return v.Task.Status.Final() })
	if v.Task.Status != model.TaskCanceled || v.Roll.State != model.RollStateStopped || v.Roll.Stopped != "aborted by ann" ||
		v.Roll.Batches[1].State != model.BatchNotSent || len(g.sent()) != 4 {
		t.Fatalf("after abort: task %s, roll %+v, %d hosts sent", v.Task.Status, v.Roll, len(g.sent()))
	}
	for _, res := range v.Results[6:] {
		if res.State != model.StateCancelled || !strings.Contains(res.Message, "aborted by ann") {
			t.Fatalf("target of batch 2: %+v", res)
		}
	}
	// The unsent batch's targets are cancelled, not failed: the roll's
	// table and the ✗ of a batch read Bad.
	if b := v.Roll.Batches[1]; b.Bad != 0 || b.Cancelled != b.Size || b.Size == 0 {
		t.Fatalf("unsent batch counted %+v: want every target cancelled, none failed", b)
	}
	if _, err := e.ControlRoll(ctx, task.ID, model.RollResume); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("resume of a finished roll: %v, want a conflict", err)
	}
	es, err := e.Audit(context.Background(), model.AuditQuery{TaskID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, en := range es {
		actions = append(actions, en.Action+"/"+en.Result)
	}
	for _, want := range []string{"pause/ok", "resume/ok", "abort/ok", "resume/refused"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Fatalf("audit %v: no %s", actions, want)
		}
	}
}

// TestRollThreshold: unreachable and timed-out hosts are failures; two
// of them in a batch exceed max-fail 1 and stop the roll there: the
// later batches are never sent, and the task says why.
func TestRollThreshold(t *testing.T) {
	g := newGated(8, false)
	g.fail[hostN(4)] = model.ErrUnreachable
	g.code[hostN(5)] = model.CodeTimeout
	g.code[hostN(2)] = model.CodeCommandFailed // one failure in batch 2: tolerated
	e, _ := start(t, g.fakeAgents, testCfg())
	spec := model.RolloutSpec{Batch: "2", MaxFail: "1"}
	task, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpRestart,
		Selector: backend.Selector{Namespace: "ns", Name: "app"}, Rollout: &spec})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, mustWatch(t, e, task.ID))
	v, err := e.Task(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "failure threshold exceeded in batch 3: 2 of its 2 targets failed (max-fail 1 per batch)"
	if v.Task.Status != model.TaskFailed || v.Roll.State != model.RollStateStopped || v.Roll.Stopped != want || v.Task.Roll.StoppedBatch != 3 {
		t.Fatalf("task %s roll %+v", v.Task.Status, v.Roll)
	}
	states := []string{}
	for _, b := range v.Roll.Batches {
		states = append(states, b.State)
	}
	if strings.Join(states, ",") != "done,done,done,not_sent" {
		t.Fatalf("batch states %v", states)
	}
	if b := v.Roll.Batches[3]; b.Bad != 0 || b.Cancelled != 2 || b.Size != 2 {
		t.Fatalf("unsent batch 4 counted %+v: want its 2 targets cancelled, none failed", b)
	}
	if b := v.Roll.Batches[2]; b.Bad != 2 || b.Cancelled != 0 {
		t.Fatalf("stopping batch 3 counted %+v: want its 2 failures", b)
	}
	if sent := g.sent(); len(sent) != 6 || sent[hostN(6)] != 0 || sent[hostN(7)] != 0 {
		t.Fatalf("hosts sent %v: want the first 6 only", sent)
	}
	if c := v.Task.Counts; c.Unreachable != 1 || c.Timeout != 1 || c.Failed != 1 || c.Cancelled != 2 {
		t.Fatalf("counts %+v", c)
	}
	checkBatchesInOrder(t, v)
}

func mustWatch(t *testing.T, e *engine.Engine, id string) <-chan model.Result {
	t.Helper()
	ch, err := e.Watch(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestRollValidation: a bad rollout is refused with its fields, and
// nothing is stored or sent.
func TestRollValidation(t *testing.T) {
	g := newGated(4, false)
	e, _ := start(t, g.fakeAgents, testCfg())
	for _, tc := range []struct {
		spec   model.RolloutSpec
		fields []string
	}{
		{model.RolloutSpec{Batch: "0%"}, []string{"rollout.batch"}},
		{model.RolloutSpec{Batch: "2", Canary: "3"}, []string{"rollout.canary"}},
		{model.RolloutSpec{Batch: "25%", Canary: "2"}, []string{"rollout.canary"}}, // 2 hosts > 1 host a batch
		{model.RolloutSpec{Batch: "1", MaxFail: "-1", Pause: "later"}, []string{"rollout.max_fail", "rollout.pause"}},
	} {
		_, err := e.Operate(context.Background(), backend.OperateRequest{Op: model.OpRestart,
			Selector: backend.Selector{Namespace: "ns", Name: "app"}, Rollout: &tc.spec})
		if got := fieldsOf(err); strings.Join(got, ",") != strings.Join(tc.fields, ",") {
			t.Errorf("%+v: fields %v (%v), want %v", tc.spec, got, err, tc.fields)
		}
	}
	ts, err := e.Tasks(context.Background(), 0)
	if err != nil || len(ts) != 0 || len(g.sent()) != 0 {
		t.Fatalf("refused rolls left %d tasks, sent %d hosts (%v)", len(ts), len(g.sent()), err)
	}
	// Not a roll: pause is refused.
	task, _ := operate(t, e, backend.OperateRequest{Op: model.OpStatus, Selector: backend.Selector{Namespace: "ns"}})
	if _, err := e.ControlRoll(context.Background(), task.ID, model.RollPause); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("pause of a task that is no roll: %v", err)
	}
	if _, err := e.ControlRoll(context.Background(), task.ID, "jump"); fieldsOf(err) == nil {
		t.Fatalf("unknown action: %v", err)
	}
}

// TestRollSurvivesRestarts: a roll paused until resumed, over a JetStream
// store. Its server stops after batch 1 (waiting for a resume); a new one
// resumes the task still waiting; another server, which does not run it,
// is asked to resume it and the one running it goes on; its server is
// killed (store closed first) waiting after batch 2; a new one finishes it.
// Every host is sent its op exactly once, under one op id.
func TestRollSurvivesRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	cfg := testCfg()
	cfg.LeaseTTL = config.Duration(3 * time.Second) // a lease let go is taken within a second
	g := newGated(6, false)
	ctx := context.Background()
	var last *jsstore.Store
	newEngine := func(owner string) *engine.Engine {
		last = sharedStore(t, emb)
		e := engine.New(cfg, g.fakeAgents, g.fakeAgents, last, engine.WithOwner(owner))
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a := newEngine("S")
	var hosts []model.Host
	for _, h := range g.hosts {
		hosts = append(hosts, h.Host)
	}
	if err := a.Seed(ctx, []model.ProcessDef{{Process: proc("ns", "app", nil), Hosts: hosts}}); err != nil {
		t.Fatal(err)
	}
	task := rollOn(t, a, "ns", model.RolloutSpec{Batch: "2", Pause: "manual"})
	waiting := func(e *engine.Engine, started int) {
		t.Helper()
		rollView(t, e, task.ID, "waiting for a resume", func(v backend.TaskView) bool {
			return v.Roll.State == model.RollStateWaitingResume && v.Roll.Started == started
		})
	}
	waiting(a, 1)
	_ = a.Close()

	b := newEngine("S")
	stB := last
	waiting(b, 1)
	if n := len(g.sent()); n != 2 {
		t.Fatalf("after a restart while waiting: %d hosts sent, want 2", n)
	}
	other := newEngine("O") // holds no lease of the task
	if _, err := other.ControlRoll(ctx, task.ID, model.RollResume); err != nil {
		t.Fatal(err)
	}
	waiting(b, 2)
	// Killed only once the store holds batch 2's results (other runs no
	// roll: its view is the store's): an op sent again after a crash
	// goes under the same op id, which a real agent answers from its
	// ledger, but this test's agents count every send.
	waiting(other, 2)
	_ = other.Close()
	// A crash: the store goes away first, nothing is let go.
	_ = stB.Close()
	_ = b.Close()

	c := newEngine("S")
	waiting(c, 2)
	if _, err := c.ControlRoll(ctx, task.ID, model.RollResume); err != nil {
		t.Fatal(err)
	}
	v := rollView(t, c, task.ID, "done", func(v backend.TaskView) bool { return v.Task.Status.Final() })
	if v.Task.Status != model.TaskDone || v.Roll.State != model.RollStateDone || v.Roll.Started != 3 {
		t.Fatalf("task %s roll %+v", v.Task.Status, v.Roll)
	}
	for _, h := range hosts {
		g.mu.Lock()
		n, ops := g.calls[h], len(g.ops[h])
		g.mu.Unlock()
		if n != 1 || ops != 1 {
			t.Fatalf("host %s sent %d times under %d op ids, want once", h, n, ops)
		}
	}
	checkBatchesInOrder(t, v)
}
