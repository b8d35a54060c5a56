package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"gseproc/model"
)

// Leases (when the store is a Leaser): the engine running a task holds its
// lease. One loop per engine, every third of the lease TTL, renews the
// leases of all its runs, then looks at every lease: one whose revision it
// has seen unchanged for the lease's TTL (by its own clock), or that its
// owner let go, it takes with a compare-and-set at that revision, so
// exactly one engine wins, and resumes the task as Start does.
//
// An engine that finds, renewing, that its lease was taken abandons the
// run: it dispatches no more targets and stores no more results.

// leaseSeen is when a lease revision was first seen by this engine.
type leaseSeen struct {
	rev uint64
	at  time.Time
}

func (e *Engine) leaseLoop() {
	every := e.leaseTTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	seen := map[string]leaseSeen{}
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		e.renewLeases(every)
		e.scanLeases(seen, every)
	}
}

// renewLeases renews the lease of every run; a lease found taken makes its
// run abandoned. Each renewal is bounded by limit, so one stuck call does
// not let the others expire.
func (e *Engine) renewLeases(limit time.Duration) {
	e.mu.RLock()
	ids := make([]string, 0, len(e.runs)+len(e.claims))
	for id := range e.runs {
		ids = append(ids, id)
	}
	for id := range e.claims {
		if e.runs[id] == nil {
			ids = append(ids, id) // being created: renewed, nothing to abandon yet
		}
	}
	e.mu.RUnlock()
	for _, id := range ids {
		r, renewed, err := e.renewLease(id, limit)
		if !renewed {
			continue
		}
		switch {
		case err == nil:
		case errors.Is(err, model.ErrConflict):
			if r != nil {
				e.abandon(r, err)
			}
		case e.ctx.Err() != nil:
			return
		default:
			e.log.Warn("renew lease", "task", id, "err", err)
		}
	}
}

// leaseHold is held while a task's lease is renewed and while it is let go
// (released set then, for good): no renewal runs after the release. A
// renewal that finds the lease deleted creates it again (RenewLease), so
// one made after the task let its lease go would leave a lease nobody runs
// or releases, and the lease scan would take the task over only to find
// it complete or gone (under an operate_proc load, hundreds of such
// takeovers, each listing the task's targets with a JetStream consumer).
// One hold is made with the claim (Operate, a takeover) and handed to the
// run, so renewals made while the task is being created or taken over and
// every way its lease is let go (a failed creation or takeover, the run's
// end) take the same lock.
type leaseHold struct {
	mu       sync.Mutex
	released bool
}

// letLeaseGo lets the lease of task id go for good (ReleaseLease; done:
// deleted) under h, so that no renewal creates it again afterwards.
func (e *Engine) letLeaseGo(ctx context.Context, h *leaseHold, id string, done bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	if err := e.leaser.ReleaseLease(ctx, id, e.owner, done); err != nil {
		e.log.Warn("release lease", "task", id, "err", err)
	}
}

// endTask lets the lease of finished task t go for good under h, as
// letLeaseGo does, and records the end in the audit trail, both with one
// call of the TaskEnder (the entry as recordFinished records it).
func (e *Engine) endTask(h *leaseHold, t model.Task, done bool) {
	en := e.stamp(finishedEntry(t))
	h.mu.Lock()
	h.released = true
	lerr, aerr := e.ender.EndTask(context.WithoutCancel(e.ctx), t.ID, e.owner, done, en)
	h.mu.Unlock()
	if lerr != nil {
		e.log.Warn("release lease", "task", t.ID, "err", lerr)
	}
	if aerr != nil {
		e.notAudited(en, aerr)
	}
}

// renewLease renews the lease of task id within limit, unless it was let
// go since the renewals began (renewed false); r is its run, nil while
// the task is being created or taken over.
func (e *Engine) renewLease(id string, limit time.Duration) (r *run, renewed bool, err error) {
	e.mu.RLock()
	r, h := e.runs[id], e.claims[id]
	if r != nil {
		h = r.lease
	}
	e.mu.RUnlock()
	if h == nil {
		return nil, false, nil // ended, or its creation failed, meanwhile
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return r, false, nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	err = e.leaser.RenewLease(ctx, id, e.owner, e.leaseTTL)
	cancel()
	return r, true, err
}

// scanLeases takes over the tasks whose lease expired.
func (e *Engine) scanLeases(seen map[string]leaseSeen, limit time.Duration) {
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	ls, err := e.leaser.Leases(ctx)
	cancel()
	if err != nil {
		if e.ctx.Err() == nil {
			e.log.Warn("list leases", "err", err)
		}
		return
	}
	now := time.Now()
	present := make(map[string]bool, len(ls))
	for _, l := range ls {
		present[l.TaskID] = true
		e.mu.RLock()
		_, mine := e.runs[l.TaskID]
		mine = mine || e.claims[l.TaskID] != nil
		e.mu.RUnlock()
		if mine {
			delete(seen, l.TaskID)
			continue // ours, or taken from us: the renewal finds out
		}
		// A lease in our name that we do not run (a restart under the same
		// owner id, a release that failed) is as good as let go.
		free := l.Owner == "" || l.Owner == e.owner
		s, ok := seen[l.TaskID]
		if !free && (!ok || s.rev != l.Rev) {
			seen[l.TaskID] = leaseSeen{rev: l.Rev, at: now}
			continue
		}
		ttl := l.TTL
		if ttl <= 0 {
			ttl = e.leaseTTL
		}
		if !free && now.Sub(s.at) < ttl {
			continue
		}
		delete(seen, l.TaskID)
		// On its own goroutine, so that the renewals go on meanwhile (the
		// claim makes them renew this lease too once it is ours).
		hold, ok := e.claim(l.TaskID)
		if !ok {
			continue // resumed or claimed here meanwhile
		}
		var unrenewed time.Duration
		if !free {
			unrenewed = now.Sub(s.at)
		}
		if !e.track(func() {
			defer func() {
				e.mu.Lock()
				delete(e.claims, l.TaskID)
				e.mu.Unlock()
			}()
			e.takeOver(l, unrenewed, hold)
		}) {
			e.mu.Lock()
			delete(e.claims, l.TaskID)
			e.mu.Unlock()
			return
		}
	}
	for id := range seen {
		if !present[id] {
			delete(seen, id)
		}
	}
}

// takeOver takes l at its revision and resumes its task; hold is its
// claim's, handed to the run it resumes.
func (e *Engine) takeOver(l Lease, unrenewed time.Duration, hold *leaseHold) {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	ok, err := e.leaser.TakeLease(ctx, l.TaskID, e.owner, e.leaseTTL, l.Rev)
	if err != nil || !ok {
		if err != nil && e.ctx.Err() == nil {
			e.log.Warn("take lease", "task", l.TaskID, "err", err)
		}
		return
	}
	t, _, err := e.st.Task(ctx, l.TaskID)
	if errors.Is(err, model.ErrNotFound) || (err == nil && t.Status.Final()) {
		// Complete (its owner died before letting the lease go) or gone.
		e.letLeaseGo(ctx, hold, l.TaskID, true)
		return
	}
	var defs map[string]model.Process
	if err == nil {
		defs, err = e.registry(ctx)
	}
	if err == nil {
		err = e.resumeTask(ctx, l.TaskID, "task taken over", defs)
	}
	if err != nil {
		if e.ctx.Err() == nil {
			e.log.Warn("take over", "task", l.TaskID, "err", err)
		}
		// Let it go for another engine (or this one, next scan).
		e.letLeaseGo(context.WithoutCancel(ctx), hold, l.TaskID, false)
		return
	}
	e.log.Info("lease taken over", "task", l.TaskID, "from", l.Owner, "unrenewed", unrenewed.Round(time.Millisecond))
}

// abandon stops a run whose lease another engine holds now: no more
// dispatches, no more stored results; its watchers go on from the store.
// A complete run is left alone (it is storing its end).
func (e *Engine) abandon(r *run, why error) { e.lose(r, why, false) }

// lose abandons r; a complete one only when evenDone (finishTask, when the
// task's end was refused: another engine fenced the task off).
func (e *Engine) lose(r *run, why error, evenDone bool) {
	r.mu.Lock()
	if r.lost || (r.done && !evenDone) {
		r.mu.Unlock()
		return
	}
	r.lost = true
	r.changedLocked()
	id := r.task.ID
	r.mu.Unlock()
	r.cancel()
	e.mu.Lock()
	if e.runs[id] == r {
		delete(e.runs, id)
		e.runsChangedLocked()
	}
	e.mu.Unlock()
	e.log.Warn("task abandoned: another server owns it now", "task", id, "err", why)
}

// releaseLeases lets the leases of the runs left unfinished by Close go,
// so that another engine takes their tasks over at once.
func (e *Engine) releaseLeases() {
	if e.leaser == nil {
		return
	}
	e.mu.RLock()
	ids := make([]string, 0, len(e.runs))
	for id, r := range e.runs {
		r.mu.Lock()
		if !r.done && !r.lost {
			ids = append(ids, id)
		}
		r.mu.Unlock()
	}
	e.mu.RUnlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), e.leaseTTL/3)
		if err := e.leaser.ReleaseLease(ctx, id, e.owner, false); err != nil {
			e.log.Warn("release lease", "task", id, "err", err)
		}
		cancel()
	}
}
