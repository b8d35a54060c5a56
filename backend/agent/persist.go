//go:build linux

package agent

import (
	"context"
	"sort"
	"time"

	"gseproc/model"
)

// registryDelay is how long after the first change the registry is
// written: every change made meanwhile goes into the same write.
const registryDelay = 50 * time.Millisecond

// registrySupervisorDelay is how long after the first change a write is
// due when only the supervisor changed it on its own (a restart decided,
// a restart's new pid and count: persistSupervisedLocked). A crash loses
// at most these, and the next start recovers them from the processes
// themselves (doc.go); in a crash storm they are most of the changes, and
// writing them every registryDelay wrote the whole registry 20 times a
// second. A change an op makes (or waits for) is due in registryDelay.
const registrySupervisorDelay = time.Second

// registryRetry is the wait before a failed registry write is tried again.
const registryRetry = time.Second

// persistLocked records that the hosting registry changed. Nothing is
// written here: the registry writer (persister) writes the whole registry
// once, compact, registryDelay after the first change, whatever the number
// of changes meanwhile; an op waits for that write before it answers
// (waitPersisted).
func (a *Agent) persistLocked() {
	a.regWant++
	select {
	case a.regKick <- struct{}{}:
	default: // a write is already due
	}
}

// persistSupervisedLocked records a change the supervisor made on its own
// that the next start can recover from the processes if a crash loses it
// (a restart decided, a restart's new pid and count): written within
// registrySupervisorDelay, or with the next change an op makes.
func (a *Agent) persistSupervisedLocked() {
	a.regWant++
	select {
	case a.regLazy <- struct{}{}:
	default:
	}
}

// persister writes the registry registryDelay after a change
// (registrySupervisorDelay after one of the supervisor's own), until the
// agent closes (Close writes what is left).
func (a *Agent) persister() {
	defer a.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var due time.Time // when the next write is due; zero: none
	dueIn := func(d time.Duration) {
		if at := time.Now().Add(d); due.IsZero() || at.Before(due) {
			due = at
			t.Reset(d)
		}
	}
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.regKick:
			dueIn(registryDelay)
		case <-a.regLazy:
			dueIn(registrySupervisorDelay)
		case <-t.C:
			due = time.Time{}
			if a.flush() != nil {
				dueIn(registryRetry)
			}
		}
	}
}

// flush writes the registry if it changed since the last write: the
// records are taken under the agent lock, encoded and written (kept.
// WriteFile: temp file, fsync, rename) outside it. Writes are one at a
// time, so a later state never lands before an earlier one.
func (a *Agent) flush() error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	want := a.regWant
	if want == a.regDone {
		a.mu.Unlock()
		return nil
	}
	hosted := a.hostedLocked()
	a.mu.Unlock()

	err := saveRegistry(a.regPath, records(hosted))

	a.mu.Lock()
	a.regWrites++
	if err == nil {
		a.regDone = want
	}
	a.regErr = err
	close(a.regFlushed)
	a.regFlushed = make(chan struct{})
	a.mu.Unlock()
	if err != nil {
		a.log.Error("persist hosting registry (tried again in "+registryRetry.String()+")", "err", err)
	}
	return err
}

// waitPersisted waits until every registry change made so far is on disk
// (or ctx ends): an op answers only once what it changed would survive a
// crash of the agent. It returns the write's error when it failed.
func (a *Agent) waitPersisted(ctx context.Context) error {
	a.mu.Lock()
	want := a.regWant
	if a.regDone < want {
		// What is pending may be the supervisor's alone, due later: an
		// op waiting for it has it written in registryDelay.
		select {
		case a.regKick <- struct{}{}:
		default:
		}
	}
	for a.regDone < want {
		ch := a.regFlushed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		a.mu.Lock()
		if a.regDone < want && a.regErr != nil {
			err := a.regErr
			a.mu.Unlock()
			return err
		}
	}
	a.mu.Unlock()
	return nil
}

// hostedView is a hosted entry as the registry records it, taken under
// the agent lock; the records are built (and sorted) outside it.
type hostedView struct {
	p            model.Process
	lastOp       model.OpType
	registerTime int64
	instances    []instanceRecord
}

// hostedLocked takes what the registry records of every hosted process.
// The definitions are shared, not copied: an entry's definition is
// replaced whole, never changed in place.
func (a *Agent) hostedLocked() []hostedView {
	out := make([]hostedView, 0, len(a.procs))
	for _, e := range a.procs {
		if !e.hosted {
			continue
		}
		v := hostedView{p: e.p, lastOp: e.lastOp, registerTime: e.registerTime, instances: make([]instanceRecord, len(e.units))}
		for i, u := range e.units {
			v.instances[i] = instanceRecord{PID: u.pid, StartTick: u.tick, State: u.state,
				Held: u.held, Done: u.done, Restarts: u.restarts}
		}
		out = append(out, v)
	}
	return out
}

// records is the registry of hosted, by process key.
func records(hosted []hostedView) []procRecord {
	sort.Slice(hosted, func(i, j int) bool { return hosted[i].p.Key() < hosted[j].p.Key() })
	recs := make([]procRecord, len(hosted))
	now := time.Now().Unix()
	for i, v := range hosted {
		recs[i] = recordOf(v.p, v.lastOp, now, &hostedRecord{Process: v.p, RegisterTime: v.registerTime, Instances: v.instances})
	}
	return recs
}
