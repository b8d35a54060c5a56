package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/model"
)

// Rolling tasks. A task with a Rollout is run by executeRoll instead of
// execute: model.DecideRoll says what to do next from the task's progress
// per batch (kept up to date as targets move, rollMoveLocked) and the
// operators' control (the RollBoard, which any engine writes); the loop
// does it: start a batch (stored in the task record before the first
// target is sent, so a resumed roll never starts it again), send a
// batch's pending targets through a pool of at most cfg.Concurrency
// workers, hold the workers (pause), wait, or stop the roll (the targets
// not sent are cancelled with the reason). Each target is sent under its
// op id as in any task, so a roll resumed after a restart or a takeover
// sends every host its op once.

// rollRun is the roll part of a run; its fields are guarded by run.mu
// except ctl and hold.
type rollRun struct {
	spec    model.Rollout
	plan    []model.Batch
	prog    []model.BatchProgress // by batch
	total   model.BatchProgress
	control model.RollControl
	ctl     chan struct{} // the control changed (1 buffered)
	hold    atomic.Bool   // workers send no more targets
}

// newRollRun builds the roll of r (whose results are set) with control c
// along plan, r's rollout planned over its targets (nil: planned here).
func newRollRun(r *run, c model.RollControl, plan []model.Batch) *rollRun {
	rr := &rollRun{spec: *r.task.Rollout, control: c, ctl: make(chan struct{}, 1), plan: plan}
	if rr.plan == nil {
		rr.plan = rr.spec.Plan(hostRuns(r.targets, func(t model.Target) model.Host { return t.Host }))
	}
	rr.prog, rr.total = model.PlanProgressOf(rr.plan, r.result)
	return rr
}

// hostRuns is model.HostRuns of the hosts of xs (targets or results, in
// target order).
func hostRuns[T any](xs []T, host func(T) model.Host) []int {
	hosts := make([]model.Host, len(xs))
	for i, x := range xs {
		hosts[i] = host(x)
	}
	return model.HostRuns(hosts)
}

// batchOf is the batch of target index i.
func (rr *rollRun) batchOf(i int) int {
	return sort.Search(len(rr.plan), func(b int) bool { return rr.plan[b].Hi > i })
}

// rollMoveLocked counts target i's move from state from to res.
func (r *run) rollMoveLocked(i int, from model.ResultState, res model.Result) {
	if r.roll == nil {
		return
	}
	if b := r.roll.batchOf(i); b < len(r.roll.prog) {
		r.roll.prog[b].Move(from, res)
	}
	r.roll.total.Move(from, res)
}

// groupByHost orders a roll's targets so that each host's are together,
// hosts in the order they first appear (a batch takes whole hosts).
func groupByHost(targets []model.Target) {
	first := make(map[model.Host]int, len(targets))
	for i, t := range targets {
		if _, ok := first[t.Host]; !ok {
			first[t.Host] = i
		}
	}
	sort.SliceStable(targets, func(a, b int) bool { return first[targets[a].Host] < first[targets[b].Host] })
}

// planRoll parses a request's rollout against its targets (grouped by
// host) and returns it with its plan.
func planRoll(v *model.Validator, spec model.RolloutSpec, targets []model.Target) (model.Rollout, []model.Batch) {
	ro := spec.Parse(v, "rollout.")
	if v.Err() != nil {
		return ro, nil
	}
	runs := hostRuns(targets, func(t model.Target) model.Host { return t.Host })
	if c, b := ro.Canary.Of(len(runs)), ro.Batch.Of(len(runs)); c > max(b, 1) {
		v.Addf("rollout.canary", "the canary batch (%s: %d hosts) must not be larger than a batch (%s: %d hosts of %d)",
			ro.Canary, c, ro.Batch, b, len(runs))
	}
	return ro, ro.Plan(runs)
}

// executeRoll runs a rolling task: see the top of this file.
func (e *Engine) executeRoll(r *run) {
	defer e.wg.Done()
	defer r.cancel()
	rr := r.roll
	var pool chan struct{} // closed once the workers of poolBatch are through
	poolBatch := -1
	defer func() {
		if pool != nil {
			<-pool
		}
	}()
	last := ""
	for {
		if pool != nil {
			select {
			case <-pool:
				pool = nil
			default:
			}
		}
		now := e.now()
		r.mu.Lock()
		if r.lost {
			r.mu.Unlock()
			return
		}
		complete := r.completeLocked(now)
		if r.done {
			r.mu.Unlock()
			if complete {
				e.finishTask(r)
			}
			return
		}
		in := model.RollInput{Batches: rr.plan, Started: r.task.Roll.Started, Total: rr.total, Control: rr.control, Now: now}
		if in.Started > 0 {
			in.Current = rr.prog[in.Started-1]
		}
		notify := r.wakeLocked()
		r.mu.Unlock()

		d := model.DecideRoll(rr.spec, in)
		if d.Reason != last {
			last = d.Reason
			e.log.Info("roll", "task", r.task.ID, "do", string(d.Do), "batch", d.Batch+1, "reason", d.Reason)
		}
		var wake <-chan time.Time
		switch d.Do {
		case model.RollDispatch:
			if d.Batch == in.Started {
				if err := e.startBatch(r, d.Batch); err != nil {
					if errors.Is(err, model.ErrConflict) {
						e.lose(r, err, false)
						return
					}
					e.log.Warn("roll: store the batch's start; trying again", "task", r.task.ID, "batch", d.Batch+1, "err", err)
					wake = time.After(time.Second)
					break
				}
			}
			rr.hold.Store(false)
			if pool != nil && poolBatch != d.Batch {
				<-pool // the batch before's workers, through already
				pool = nil
			}
			if pool == nil {
				pool, poolBatch = e.rollPool(r, rr.plan[d.Batch]), d.Batch
			}
		case model.RollWaitResume:
			rr.hold.Store(true)
			if rr.spec.PauseManual && !in.Control.Paused && d.Batch == in.Started && in.Control.Waiting < d.Batch {
				// At a manual pause (not an operator's pause, which a
				// resume lifts alone): a resume releases this batch.
				e.updateControl(r, func(c model.RollControl) model.RollControl {
					c.Waiting = max(c.Waiting, d.Batch)
					return c
				})
			}
		case model.RollWait:
			rr.hold.Store(true)
			wake = time.After(d.Until.Sub(now))
		case model.RollStop:
			rr.hold.Store(true)
			e.stopRoll(r, d)
		case model.RollRunning, model.RollDone:
		}
		select {
		case <-notify:
		case <-rr.ctl:
		case <-pool:
			pool = nil
		case <-wake:
		case <-r.ctx.Done():
			return
		}
	}
}

// rollPool sends the pending targets of batch b over at most
// cfg.Concurrency workers, which stop claiming targets once the roll is
// held; the channel closes when they are through.
func (e *Engine) rollPool(r *run, b model.Batch) chan struct{} {
	done := make(chan struct{})
	var next atomic.Int64
	next.Store(int64(b.Lo))
	var wg sync.WaitGroup
	n := min(e.cfg.Concurrency, b.Hi-b.Lo)
	share := func() { // one closure for every worker
		defer wg.Done()
		for r.ctx.Err() == nil && !r.roll.hold.Load() {
			i := int(next.Add(1) - 1)
			if i >= b.Hi {
				return
			}
			e.dispatchOne(r, i)
		}
	}
	wg.Add(n)
	for range n {
		e.goWork(share)
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// startBatch records that batch b starts (stored before any of its
// targets is sent). When the store fails, the run is put back to the
// batch not started, so that the loop's next decision tries the start
// (and its pause between batches) again instead of sending a batch
// the record does not know started.
func (e *Engine) startBatch(r *run, b int) error {
	r.mu.Lock()
	prev := r.task.Roll
	if prev.Started > b {
		r.mu.Unlock()
		return nil
	}
	st := *prev
	st.Started = b + 1
	r.task.Roll = &st
	if r.task.Status == model.TaskPending {
		r.task.Status = model.TaskRunning
	}
	r.mu.Unlock()
	err := e.storeRun(r)
	if err != nil {
		r.mu.Lock()
		if r.task.Roll.Started == b+1 {
			back := *r.task.Roll
			back.Started = prev.Started
			r.task.Roll = &back
		}
		r.mu.Unlock()
	}
	return err
}

// stopRoll stops the roll for d's reason: its pending targets are
// cancelled (those running finish), the reason is stored with the task.
func (e *Engine) stopRoll(r *run, d model.RollDecision) {
	now := e.now()
	r.mu.Lock()
	if r.done || r.lost {
		r.mu.Unlock()
		return
	}
	st := *r.task.Roll
	if st.Stopped == "" {
		st.Stopped, st.StoppedBatch = d.Reason, d.Batch+1
		r.task.Roll = &st
		e.log.Warn("roll stopped", "task", r.task.ID, "batch", d.Batch+1, "reason", d.Reason)
	}
	if d.Aborted {
		r.cancelled = true
	}
	finals, complete := r.cancelPendingLocked(now, "not sent: the roll stopped: "+d.Reason)
	r.puts.Add(len(finals))
	r.mu.Unlock()
	for i := range finals {
		e.enqueue(write{res: &finals[i], fence: r.fence, puts: &r.puts})
	}
	if complete {
		e.finishTask(r)
		return
	}
	if err := e.storeRun(r); errors.Is(err, model.ErrConflict) {
		e.lose(r, err, false)
	} else if err != nil {
		e.log.Warn("roll: store why it stopped", "task", r.task.ID, "err", err)
	}
}

// storeRun stores the run's task record now (fenced when the store
// fences). Writes of one run are one at a time, each of the newest state.
func (e *Engine) storeRun(r *run) error {
	r.store.Lock()
	defer r.store.Unlock()
	t := r.snapshot()
	if e.fencer != nil {
		return e.fencer.UpdateTaskFenced(e.ctx, r.fence, t)
	}
	return e.st.UpdateTask(e.ctx, t)
}

// updateControl changes a roll's control in the store and in the run.
func (e *Engine) updateControl(r *run, fn func(model.RollControl) model.RollControl) {
	c, err := e.rolls.UpdateRollControl(r.ctx, r.task.ID, fn)
	if err != nil {
		e.log.Warn("roll: store its control", "task", r.task.ID, "err", err)
		return
	}
	e.setControl(r, c)
}

// setControl gives a run the control c and wakes its loop.
func (e *Engine) setControl(r *run, c model.RollControl) {
	r.mu.Lock()
	if r.roll == nil {
		r.mu.Unlock()
		return
	}
	r.roll.control = c
	if c.Paused || c.Aborted {
		// At once: the workers send nothing more from now (the loop,
		// woken below, decides the rest).
		r.roll.hold.Store(true)
	}
	r.mu.Unlock()
	select {
	case r.roll.ctl <- struct{}{}:
	default:
	}
}

// rollLoop gives the rolls this engine runs the controls written in the
// store by any engine.
func (e *Engine) rollLoop(ids <-chan string) {
	for id := range ids {
		e.mu.RLock()
		r := e.runs[id]
		e.mu.RUnlock()
		if r == nil || r.roll == nil {
			continue
		}
		c, err := e.rolls.RollControl(e.ctx, id)
		if err != nil {
			e.log.Warn("roll: read its control", "task", id, "err", err)
			continue
		}
		e.setControl(r, c)
	}
}

// ControlRoll pauses, resumes or aborts a rolling task, wherever it runs:
// the request is stored (RollBoard) and the engine running the roll acts
// on it. Each call is recorded in the audit trail.
func (e *Engine) ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error) {
	t, summary, err := e.controlRoll(ctx, id, act)
	en := model.AuditEntry{Actor: actor(ctx, "", ""), Action: string(act), Namespaces: t.Namespace,
		Targets: []string{id}, TargetCount: t.Targets, TaskID: id}
	if en.Action == "" {
		en.Action = "roll"
	}
	if t.ID != "" {
		en.Op = t.Op.String()
	}
	en.Result, en.Summary = outcome(err)
	if err == nil {
		en.Summary = summary
	}
	if rerr := e.record(ctx, en); rerr != nil && err == nil {
		return t, fmt.Errorf("%s %s: done, but %w", act, id, rerr)
	}
	return t, err
}

func (e *Engine) controlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, string, error) {
	if _, err := model.ParseRollAction(string(act)); err != nil {
		return model.Task{}, "", model.ValidationError{{Field: "action", Reason: err.Error()}}
	}
	if err := e.refuseReadOnly(string(act) + " a roll"); err != nil {
		return model.Task{}, "", err
	}
	e.mu.RLock()
	r := e.runs[id]
	e.mu.RUnlock()
	var t model.Task
	if r != nil {
		t = r.snapshot()
	} else {
		var err error
		if t, _, err = e.st.Task(ctx, id); err != nil {
			return t, "", fmt.Errorf("%s %s: %w", act, id, err)
		}
	}
	if t.Rollout == nil {
		return t, "", fmt.Errorf("%s %s: not a rolling task (cancel stops it): %w", act, id, model.ErrConflict)
	}
	if t.Status.Final() {
		return t, "", fmt.Errorf("%s %s: the task is over (%s): %w", act, id, t.Status, model.ErrConflict)
	}
	by := actorName(actor(ctx, "", ""))
	c, err := e.rolls.UpdateRollControl(ctx, id, func(c model.RollControl) model.RollControl { return c.Apply(act, by, e.now()) })
	if err != nil {
		return t, "", fmt.Errorf("%s %s: %w", act, id, err)
	}
	if r != nil {
		e.setControl(r, c)
	}
	e.log.Info("roll "+string(act), "task", id, "by", by)
	switch act {
	case model.RollPause:
		return t, "paused: no more hosts are sent the op until it is resumed", nil
	case model.RollResume:
		return t, "resumed", nil
	}
	return t, "aborted: the targets not sent yet are cancelled", nil
}

// actorName is who an actor is, in one word for "paused by ...".
func actorName(a model.Actor) string {
	for _, s := range []string{a.Operator, a.User, a.App, a.Via} {
		if s != "" {
			return s
		}
	}
	return "an operator"
}

// rollView is the view of a rolling task's run (under r.mu).
func (r *run) rollViewLocked(now time.Time) *model.RollView {
	if r.roll == nil {
		return nil
	}
	v := model.ViewRoll(r.task, r.roll.control, r.roll.plan, r.roll.prog, r.roll.total, now)
	return &v
}

// storedRollView is the view of a rolling task another engine runs (or
// that is over): its plan and progress from its targets and results.
func (e *Engine) storedRollView(ctx context.Context, t model.Task, results []model.Result) *model.RollView {
	if t.Rollout == nil {
		return nil
	}
	plan := t.Rollout.Plan(hostRuns(results, func(r model.Result) model.Host { return r.Host }))
	prog, total := model.PlanProgress(plan, results)
	var c model.RollControl
	if e.rolls != nil {
		var err error
		if c, err = e.rolls.RollControl(ctx, t.ID); err != nil {
			e.log.Debug("roll: read its control", "task", t.ID, "err", err)
		}
	}
	v := model.ViewRoll(t, c, plan, prog, total, e.now())
	return &v
}
