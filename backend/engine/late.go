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
	if rep.Status != nil {
		// A late answer is handed to every late subscriber: its status
		// is theirs to share, not this engine's to complete in place.
		cp := *rep.Status
		rep.Status = &cp
	}
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
	case c.stored: // the run was stored complete: again
		var ours bool
		c.fixed, ours, err = e.storeCorrection(ctx, c.task, c.targets, c.fixed)
		if !ours {
			c = correction{} // corrected in the store by another server
		}
	}
	if err != nil {
		return err
	}
	fixed, was, st := c.fixed, c.was, c.st
	if fixed.TaskID == "" {
		return nil // nothing to correct: not a timeout (any more)
	}
	if st != nil {
		cp := *st
		e.recordStatus(lr.Host, &cp)
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
	targets    []model.Target // task's, when stored
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
		ch := r.wakeLocked()
		r.mu.Unlock()
		select {
		case <-ch:
		case <-e.ctx.Done():
			return c, true
		}
	}
	i := slices.IndexFunc(r.targets, func(tg model.Target) bool { return tg.Host == lr.Host && tg.ProcKey == procKey })
	if i < 0 || !timedOut(r.result(i)) {
		r.mu.Unlock()
		return c, true
	}
	c.was = r.result(i)
	c.fixed, c.st = corrected(c.was, r.task.Op, lr.Reply, e.now())
	if c.fixed.State == model.StateTimeout {
		r.mu.Unlock()
		return correction{}, true // the host timed out too: nothing to correct
	}
	c.fixed, _ = r.finishLocked(i, c.fixed, c.fixed.Finished)
	if r.ended {
		r.task.Status = r.task.Counts.Outcome(r.cancelled)
		c.task, c.targets, c.stored = r.task, r.targets, true
		r.mu.Unlock()
		return c, true
	}
	// Running: stored with its other results, under its fence.
	r.puts.Add(1)
	fence := r.fence
	r.mu.Unlock()
	e.enqueue(write{res: &c.fixed, fence: fence, puts: &r.puts})
	return c, true
}

// correctStored corrects the result in the store, when the task is
// complete there (a task still running belongs to the engine running it).
func (e *Engine) correctStored(ctx context.Context, lr model.LateReply, procKey string) (c correction, err error) {
	t, targets, err := e.st.Task(ctx, lr.TaskID)
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
	fixed, ours, err := e.storeCorrection(ctx, t, targets, c.fixed)
	if err != nil || !ours {
		return correction{}, err
	}
	c.fixed = fixed
	return c, nil
}

// storeCorrection stores res, the corrected result of complete task t
// (of targets, which a task never changes), and t's new counts; it returns res as stored (its Seq may change) and
// false when the store holds a correction of that result already (made
// by another server: nothing of ours to say). Two servers may correct
// two results of one task at once (each got one of its late answers):
// with a TaskModifier the counts are tallied anew from the stored results
// in a read-modify-write of the task, never taken from a task read before
// the other's correction, which would lose its count. The task is
// complete: no owner writes it any more, so a correction takes no fence
// (correctors fencing each other out lost corrections).
func (e *Engine) storeCorrection(ctx context.Context, t model.Task, targets []model.Target, res model.Result) (model.Result, bool, error) {
	if e.modifier == nil {
		if err := e.st.PutResult(ctx, res); err != nil {
			return res, false, fmt.Errorf("store the corrected result: %w", err)
		}
		if err := e.st.UpdateTask(ctx, t); err != nil {
			return res, false, fmt.Errorf("store the corrected task: %w", err)
		}
		return res, true, nil
	}
	put := false
	err := e.modifier.ModifyTask(ctx, t.ID, func(ctx context.Context, cur model.Task) (model.Task, error) {
		rs, err := e.st.Results(ctx, t.ID)
		if err != nil {
			return cur, fmt.Errorf("read the results: %w", err)
		}
		var last int64
		i, clash := -1, false
		for j, r := range rs {
			last = max(last, r.Seq)
			if r.Host == res.Host && r.ProcKey == res.ProcKey {
				i = j
			} else if put && r.Seq == res.Seq {
				clash = true // another corrector took our Seq meanwhile
			}
		}
		if !put && i >= 0 && !timedOut(rs[i]) {
			return cur, errCorrectedElsewhere
		}
		if !put || clash {
			res.Seq = last + 1
			if err := e.st.PutResult(ctx, res); err != nil {
				return cur, fmt.Errorf("store the corrected result: %w", err)
			}
			put = true
			if i >= 0 {
				rs[i] = res
			} else {
				rs = append(rs, res)
			}
		}
		cur.Counts = tally(targets, rs)
		cur.Status = cur.Counts.Outcome(cur.Status == model.TaskCanceled)
		return cur, nil
	})
	switch {
	case errors.Is(err, errCorrectedElsewhere):
		return res, false, nil
	case err != nil:
		return res, false, fmt.Errorf("store the correction: %w", err)
	}
	return res, true, nil
}

// errCorrectedElsewhere: the result to correct is corrected in the store
// already.
var errCorrectedElsewhere = errors.New("corrected already")

// tally counts the results of targets by state, a target with no result
// as pending.
func tally(targets []model.Target, rs []model.Result) model.Counts {
	byTarget := make(map[model.Target]model.ResultState, len(rs))
	for _, r := range rs {
		byTarget[model.Target{Host: r.Host, ProcKey: r.ProcKey}] = r.State
	}
	var c model.Counts
	for _, tg := range targets {
		st, ok := byTarget[model.Target{Host: tg.Host, ProcKey: tg.ProcKey}]
		if !ok {
			st = model.StatePending
		}
		c.Add(st, 1)
	}
	return c
}
