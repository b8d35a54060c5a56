package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gseproc/model"
)

// Late answers: a host whose answer came after its op's deadline was
// recorded as 116 (timeout) although it may have succeeded. A Dispatcher
// that still receives such answers (LateSource) hands them to the engine,
// which replaces the timeout by the real outcome, once (only a result
// still at 116 is corrected; the store keeps one result per target), and
// says so with a result_corrected event.

// lateQueue bounds the late answers waiting to be applied; beyond it one
// is dropped (and logged): its timeout stays.
const lateQueue = 1024

// subscribeLate makes the dispatcher's late answers correct results, when
// it delivers them.
func (e *Engine) subscribeLate() {
	src, ok := e.d.(LateSource)
	if !ok {
		return
	}
	q := make(chan model.LateReply, lateQueue)
	src.SubscribeLate(e.ctx, func(lr model.LateReply) {
		select {
		case q <- lr:
		default:
			e.log.Warn("late answers queue full: answer dropped, its timeout stays", "task", lr.TaskID, "host", lr.Host.String())
		}
	})
	e.track(func() {
		for {
			select {
			case <-e.ctx.Done():
				return
			case lr := <-q:
				if err := e.correctLate(e.ctx, lr); err != nil {
					e.log.Warn("late answer not applied", "task", lr.TaskID, "host", lr.Host.String(), "op_id", lr.OpID, "err", err)
				}
			}
		}
	})
}

// timedOut reports whether res is a timeout a late answer may correct.
func timedOut(res model.Result) bool {
	return res.State == model.StateTimeout && res.Code == model.CodeTimeout
}

// corrected is res (a timeout) as the late answer rep of op says it
// ended, known at now; st is the status the answer carried (nil: none).
func corrected(res model.Result, op model.OpType, rep model.AgentReply, now time.Time) (model.Result, *model.ProcStatus) {
	was := res.Message
	st := applyReply(&res, op, rep, res.Proc.ProcName, now)
	res.Message = fmt.Sprintf("answered after the deadline (%s): %s", was, res.Message)
	res.Finished = now
	if st != nil {
		res.Hosted = st.Hosted
	}
	return res, st
}

// correctLate applies a late answer to the result of its target: in the
// run when the task is here (running, or just stored complete), else in
// the store when the task is complete there.
func (e *Engine) correctLate(ctx context.Context, lr model.LateReply) error {
	procKey, ok := strings.CutPrefix(lr.OpID, lr.TaskID+"/"+lr.Host.AgentID()+"/")
	if !ok || lr.TaskID == "" || model.OpID(lr.TaskID, lr.Host, procKey) != lr.OpID {
		return fmt.Errorf("op id %q is not one of task %q on %s", lr.OpID, lr.TaskID, lr.Host)
	}
	e.mu.RLock()
	r := e.runs[lr.TaskID]
	if r == nil {
		r = e.recent.get(lr.TaskID)
	}
	e.mu.RUnlock()
	var c correction
	handled := false
	if r != nil {
		c, handled = e.correctRun(r, lr, procKey)
	}
	var err error
	switch {
	case !handled:
		c, err = e.correctStored(ctx, lr, procKey)
	case c.stored:
		err = e.storeCorrection(ctx, c.task, c.fixed) // the run was stored complete: again
	}
	if err != nil {
		return err
	}
	fixed, was, st := c.fixed, c.was, c.st
	if fixed.TaskID == "" {
		return nil // nothing to correct: not a timeout (any more)
	}
	if st != nil {
		e.recordStatus(lr.Host, *st)
	}
	e.log.Info("late answer corrected a timeout", "task", lr.TaskID, "host", lr.Host.String(), "proc", procKey,
		"code", fixed.Code, "state", string(fixed.State))
	e.onEvent(model.Event{Time: fixed.Finished, Host: lr.Host, ProcKey: procKey, Kind: model.EventResultCorrected,
		Message: fmt.Sprintf("task %s: the host answered its %s after the deadline; result %d (%s) corrected to %d (%s): %s",
			lr.TaskID, fixed.Op, was.Code, was.State, fixed.Code, fixed.State, fixed.Message)})
	return nil
}

// correction is a late answer applied to one result: fixed replaces was
// (fixed.TaskID is empty when there was nothing to correct); st is the
// status the answer carried; stored: the run was stored complete, task
// (its new counts) and fixed are to be stored again.
type correction struct {
	fixed, was model.Result
	st         *model.ProcStatus
	task       model.Task
	stored     bool
}

// correctRun corrects the result in run r, unless the run was lost to
// another engine (handled false: the store decides). A run complete but
// not stored yet is corrected once it is (finishTask would store its task
// as it read it).
func (e *Engine) correctRun(r *run, lr model.LateReply, procKey string) (c correction, handled bool) {
	for {
		r.mu.Lock()
		if r.lost {
			r.mu.Unlock()
			return c, false
		}
		if !r.done || r.ended {
			break
		}
		ch := r.notify
		r.mu.Unlock()
		select {
		case <-ch:
		case <-e.ctx.Done():
			return c, true
		}
	}
	i := slices.IndexFunc(r.targets, func(tg model.Target) bool { return tg.Host == lr.Host && tg.ProcKey == procKey })
	if i < 0 || !timedOut(r.results[i]) {
		r.mu.Unlock()
		return c, true
	}
	c.was = r.results[i]
	c.fixed, c.st = corrected(c.was, r.task.Op, lr.Reply, e.now())
	if c.fixed.State == model.StateTimeout {
		r.mu.Unlock()
		return correction{}, true // the host timed out too: nothing to correct
	}
	c.fixed, _ = r.finishLocked(i, c.fixed, c.fixed.Finished)
	if r.ended {
		r.task.Status = r.task.Counts.Outcome(r.cancelled)
		c.task, c.stored = r.task, true
		r.mu.Unlock()
		return c, true
	}
	// Running: stored with its other results, under its fence.
	r.puts.Add(1)
	fence := r.fence
	r.mu.Unlock()
	e.enqueue(write{res: &c.fixed, fence: fence, done: r.puts.Done})
	return c, true
}

// correctStored corrects the result in the store, when the task is
// complete there (a task still running belongs to the engine running it).
func (e *Engine) correctStored(ctx context.Context, lr model.LateReply, procKey string) (c correction, err error) {
	t, _, err := e.st.Task(ctx, lr.TaskID)
	if err != nil {
		return c, fmt.Errorf("read the task: %w", err)
	}
	if !t.Status.Final() {
		return c, errors.New("the task is running on another server; its timeout stays")
	}
	rs, err := e.st.Results(ctx, lr.TaskID)
	if err != nil {
		return c, fmt.Errorf("read the results: %w", err)
	}
	var last int64
	found := -1
	for i, r := range rs {
		last = max(last, r.Seq)
		if r.Host == lr.Host && r.ProcKey == procKey {
			found = i
		}
	}
	if found < 0 || !timedOut(rs[found]) {
		return c, nil
	}
	c.was = rs[found]
	c.fixed, c.st = corrected(c.was, t.Op, lr.Reply, e.now())
	if c.fixed.State == model.StateTimeout {
		return correction{}, nil // the host timed out too: nothing to correct
	}
	c.fixed.Seq = last + 1
	t.Counts.Add(c.was.State, -1)
	t.Counts.Add(c.fixed.State, 1)
	t.Status = t.Counts.Outcome(t.Status == model.TaskCanceled)
	if err := e.storeCorrection(ctx, t, c.fixed); err != nil {
		return correction{}, err
	}
	return c, nil
}

// storeCorrection stores a corrected result of a complete task and the
// task with its new counts. The task is complete: nobody else writes it,
// so it is fenced afresh.
func (e *Engine) storeCorrection(ctx context.Context, t model.Task, res model.Result) error {
	if e.fencer != nil {
		fence, err := e.fencer.Fence(ctx, t.ID)
		if err != nil {
			return err
		}
		if err := e.fencer.PutResultsFenced(ctx, t.ID, fence, []model.Result{res}); err != nil {
			return err
		}
		return e.fencer.UpdateTaskFenced(ctx, fence, t)
	}
	if err := e.st.PutResult(ctx, res); err != nil {
		return fmt.Errorf("store the corrected result: %w", err)
	}
	if err := e.st.UpdateTask(ctx, t); err != nil {
		return fmt.Errorf("store the corrected task: %w", err)
	}
	return nil
}
