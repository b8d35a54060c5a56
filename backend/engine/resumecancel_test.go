package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gseproc/backend/engine"
	"gseproc/backend/store"
	"gseproc/model"
)

// lateCancelBoard is a memory store with a CancelBoard whose first
// CancelRequested of a task answers no, as read just before the cancel was
// recorded: the cancel is recorded then and delivered by the watch, which
// has handed it on (cancelLoop looked for the run) before the answer.
type lateCancelBoard struct {
	*store.Memory
	mu    sync.Mutex
	asked map[string]bool
	in    chan string
}

func (b *lateCancelBoard) RequestCancel(_ context.Context, id string) error {
	b.mu.Lock()
	b.asked[id] = true
	b.mu.Unlock()
	b.in <- id
	return nil
}

func (b *lateCancelBoard) CancelRequested(ctx context.Context, id string) (bool, error) {
	b.mu.Lock()
	asked, first := b.asked[id], !b.asked[id]
	b.mu.Unlock()
	if first {
		_ = b.RequestCancel(ctx, id)
		// Two more past the watch: the first was handled by then.
		b.in <- "-"
		b.in <- "-"
	}
	return asked, nil
}

func (b *lateCancelBoard) WatchCancels(ctx context.Context) (<-chan string, error) {
	return relayIDs(ctx, b.in), nil
}

// relayIDs is a watch's channel: the ids sent on in, until ctx ends.
func relayIDs(ctx context.Context, in <-chan string) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			select {
			case id := <-in:
				select {
				case out <- id:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestResumeCancelledMeanwhile: a cancel recorded while an engine resumes
// a task, after it read that none was, and seen by its watch before the
// run was launched, still cancels the task (it ran to its timeout).
func TestResumeCancelledMeanwhile(t *testing.T) {
	ctx := context.Background()
	st := &lateCancelBoard{Memory: store.NewMemory(), asked: map[string]bool{}, in: make(chan string)}
	p := proc("ns", "app", nil)
	h := hostN(0)
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{h}}); err != nil {
		t.Fatal(err)
	}
	id := model.FormatTaskID(time.Now(), 1)
	if err := st.PutTask(ctx, model.Task{ID: id, Op: model.OpStart, Targets: 1, Status: model.TaskRunning, Created: time.Now()},
		[]model.Target{{Host: h, ProcKey: p.Key()}}); err != nil {
		t.Fatal(err)
	}
	f := newFake(1)
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		<-ctx.Done() // runs until stopped, or its deadline
		return model.AgentReply{}, ctx.Err()
	}
	e := engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Watch(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res := collect(t, ch); len(res) != 1 || res[0].State != model.StateCancelled {
		t.Fatalf("task %s resumed with %+v, want its target cancelled", id, res)
	}
}

// lateRollBoard is a memory store with a RollBoard whose first
// RollControl of a task answers none, as read just before an abort was
// written: the abort is written then and delivered by the watch, which
// has handed it on (rollLoop looked for the run) before the answer.
type lateRollBoard struct {
	*store.Memory
	mu   sync.Mutex
	ctl  map[string]model.RollControl
	read map[string]bool
	in   chan string
}

func (b *lateRollBoard) RollControl(_ context.Context, id string) (model.RollControl, error) {
	b.mu.Lock()
	c, first := b.ctl[id], !b.read[id]
	b.read[id] = true
	if first {
		b.ctl[id] = model.RollControl{Aborted: true}
	}
	b.mu.Unlock()
	if first {
		b.in <- id
		b.in <- "-"
		b.in <- "-"
	}
	return c, nil
}

func (b *lateRollBoard) UpdateRollControl(_ context.Context, id string, fn func(model.RollControl) model.RollControl) (model.RollControl, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctl[id] = fn(b.ctl[id])
	return b.ctl[id], nil
}

func (b *lateRollBoard) WatchRollControls(ctx context.Context) (<-chan string, error) {
	return relayIDs(ctx, b.in), nil
}

// TestResumeRollAbortedMeanwhile: an abort written while an engine resumes
// a roll, after it read the roll's control, and seen by its watch before
// the run was launched, still stops the roll (it sent every batch).
func TestResumeRollAbortedMeanwhile(t *testing.T) {
	ctx := context.Background()
	st := &lateRollBoard{Memory: store.NewMemory(), ctl: map[string]model.RollControl{}, read: map[string]bool{}, in: make(chan string)}
	p := proc("ns", "app", nil)
	hs := []model.Host{hostN(0), hostN(1), hostN(2)}
	if err := st.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: hs}); err != nil {
		t.Fatal(err)
	}
	id := model.FormatTaskID(time.Now(), 1)
	var targets []model.Target
	for _, h := range hs {
		targets = append(targets, model.Target{Host: h, ProcKey: p.Key()})
	}
	if err := st.PutTask(ctx, model.Task{ID: id, Op: model.OpStart, Targets: len(hs), Status: model.TaskRunning, Created: time.Now(),
		Rollout: &model.Rollout{Batch: model.Quantity{N: 1}}, Roll: &model.RollState{}}, targets); err != nil {
		t.Fatal(err)
	}
	f := newFake(3)
	var e *engine.Engine
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		// The first batch ends once the run has the abort (or after 10 s):
		// no later batch is sent then.
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if v, err := e.Task(ctx, id); err == nil && v.Roll != nil && v.Roll.Control.Aborted {
				break
			}
		}
		return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, nil
	}
	e = engine.New(testCfg(), f, f, st)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Watch(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, ch)
	if len(res) != len(hs) {
		t.Fatalf("%d results, want %d: %+v", len(res), len(hs), res)
	}
	for _, r := range res {
		if r.Host != hs[0] && r.State != model.StateCancelled {
			t.Fatalf("roll %s resumed with %+v, want the batches after the first cancelled (aborted)", id, res)
		}
	}
}
