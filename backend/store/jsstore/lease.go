package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/engine"
	"gseproc/model"
)

var (
	_ engine.Leaser        = (*Store)(nil)
	_ engine.ResultWatcher = (*Store)(nil)
)

// leaseRec is a lease as stored. At (the writer's clock, informational)
// makes every write's value unique, so a write whose answer was lost is
// recognised by reading the key back.
type leaseRec struct {
	Task  string `json:"task"`
	Owner string `json:"owner"`
	TTLms int64  `json:"ttl_ms"`
	At    int64  `json:"at_ns"`
}

// leaseRevs are the revisions of the leases this store wrote last, by key,
// with their owner and TTL, so that a release needs no read first: a lease
// still at the revision written here is still as written (the release is
// a compare-and-set at that revision; refused, the lease is read as
// before). At most leaseRevsMax are kept; beyond, arbitrary ones are
// forgotten (their release reads the lease).
type leaseRevs struct {
	mu sync.Mutex
	m  map[string]leaseMark
}

type leaseMark struct {
	owner string
	ttl   time.Duration
	rev   uint64
}

const leaseRevsMax = 1 << 14

func (l *leaseRevs) set(k string, m leaseMark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]leaseMark{}
	}
	for x := range l.m {
		if len(l.m) < leaseRevsMax {
			break
		}
		delete(l.m, x)
	}
	l.m[k] = m
}

// take returns k's mark and forgets it.
func (l *leaseRevs) take(k string) (leaseMark, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.m[k]
	delete(l.m, k)
	return m, ok
}

func leaseData(task, owner string, ttl time.Duration) []byte {
	data, _ := json.Marshal(leaseRec{Task: task, Owner: owner, TTLms: ttl.Milliseconds(), At: time.Now().UnixNano()})
	return data
}

func (s *Store) getLease(ctx context.Context, k string) (jetstream.KeyValueEntry, leaseRec, error) {
	e, err := do(s, ctx, s.streams.leases, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.on().leases.Get(ctx, k) })
	if err != nil {
		return nil, leaseRec{}, err
	}
	var rec leaseRec
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, leaseRec{}, fmt.Errorf("decode lease %s: %w", k, err)
	}
	return e, rec, nil
}

// AcquireLease creates taskID's lease for owner; false when it has one.
func (s *Store) AcquireLease(ctx context.Context, taskID, owner string, ttl time.Duration) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	k := enc(taskID)
	data := leaseData(taskID, owner, ttl)
	// An earlier attempt may have been applied without its answer
	// arriving: the same value, or a lease of this owner, is ours.
	var rec leaseRec
	rev, err := s.createOwn(ctx, s.streams.leases, func(b *bound) jetstream.KeyValue { return b.leases }, k, data,
		func(e jetstream.KeyValueEntry) bool {
			rec = leaseRec{}
			return bytes.Equal(e.Value(), data) || json.Unmarshal(e.Value(), &rec) == nil && rec.Owner == owner
		})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("acquire lease of %s: %w", taskID, err)
	}
	if rec.Owner == "" {
		s.leaseRevs.set(k, leaseMark{owner, ttl, rev})
		return true, nil
	}
	s.leaseRevs.set(k, leaseMark{owner, time.Duration(rec.TTLms) * time.Millisecond, rev})
	return true, nil
}

// RenewLease rewrites owner's lease (model.ErrConflict when it is not
// owner's any more); a deleted lease is acquired again. A write refused
// as made on an older revision is made again on the lease as read anew
// while it is still owner's: a replicated stream refuses such a write
// while an earlier one on the key is still being applied (and the
// owner's own retried write may have moved the revision), and only
// another owner in the lease is a conflict.
func (s *Store) RenewLease(ctx context.Context, taskID, owner string, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	k := enc(taskID)
	for attempt := 0; ; attempt++ {
		e, rec, err := s.getLease(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			// Deleted (by an engine that found no such task yet): free, so
			// the owner takes it again, unless another engine was quicker.
			ok, err := s.AcquireLease(ctx, taskID, owner, ttl)
			if err != nil {
				return fmt.Errorf("renew lease of %s: %w", taskID, err)
			}
			if !ok {
				return fmt.Errorf("renew lease of %s: taken: %w", taskID, model.ErrConflict)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("renew lease of %s: %w", taskID, err)
		}
		if rec.Owner != owner {
			return fmt.Errorf("renew lease of %s: held by %q: %w", taskID, rec.Owner, model.ErrConflict)
		}
		data := leaseData(taskID, owner, ttl)
		rev, err := do(s, ctx, s.streams.leases, func(ctx context.Context) (uint64, error) { return s.on().leases.Update(ctx, k, data, e.Revision()) })
		switch {
		case err == nil:
			s.leaseRevs.set(k, leaseMark{owner, ttl, rev})
			return nil
		case !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			return fmt.Errorf("renew lease of %s: %w", taskID, err)
		case attempt >= 10:
			return fmt.Errorf("renew lease of %s: changed meanwhile: %w", taskID, model.ErrConflict)
		}
	}
}

// TakeLease replaces the lease at revision rev by owner's; false when it
// changed meanwhile.
func (s *Store) TakeLease(ctx context.Context, taskID, owner string, ttl time.Duration, rev uint64) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	k := enc(taskID)
	data := leaseData(taskID, owner, ttl)
	newRev, err := do(s, ctx, s.streams.leases, func(ctx context.Context) (uint64, error) { return s.on().leases.Update(ctx, k, data, rev) })
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		e, _, gerr := s.getLease(ctx, k)
		if gerr != nil || !bytes.Equal(e.Value(), data) {
			return false, nil
		}
		newRev, err = e.Revision(), nil
	}
	if err != nil {
		return false, fmt.Errorf("take lease of %s: %w", taskID, err)
	}
	s.leaseRevs.set(k, leaseMark{owner, ttl, newRev})
	return true, nil
}

// ReleaseLease deletes owner's lease (done) or leaves it ownerless. A
// lease this store wrote last for owner is released at the revision it
// wrote (leaseRevs): one write, no read; refused (written since), the
// lease is read and released as it is found.
func (s *Store) ReleaseLease(ctx context.Context, taskID, owner string, done bool) error {
	if err := s.check(); err != nil {
		return err
	}
	k := enc(taskID)
	if m, ok := s.leaseRevs.take(k); ok && m.owner == owner {
		var err error
		if done {
			err = s.on().leases.Purge(ctx, k, jetstream.LastRevision(m.rev))
		} else {
			_, err = s.on().leases.Update(ctx, k, leaseData(taskID, "", m.ttl), m.rev)
		}
		if err == nil {
			return nil
		}
	}
	e, rec, err := s.getLease(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", taskID, err)
	}
	if rec.Owner != owner {
		return nil
	}
	if done {
		err = s.on().leases.Purge(ctx, k, jetstream.LastRevision(e.Revision()))
	} else {
		_, err = s.on().leases.Update(ctx, k, leaseData(taskID, "", time.Duration(rec.TTLms)*time.Millisecond), e.Revision())
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("release lease of %s: %w", taskID, err)
	}
	return nil
}

// Leases lists every lease.
func (s *Store) Leases(ctx context.Context) ([]engine.Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []engine.Lease
	err := s.each(ctx, s.on().leases, ">", func(e jetstream.KeyValueEntry) error {
		var rec leaseRec
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return fmt.Errorf("decode %s: %w", e.Key(), err)
		}
		out = append(out, engine.Lease{TaskID: rec.Task, Owner: rec.Owner, TTL: time.Duration(rec.TTLms) * time.Millisecond, Rev: e.Revision()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// WatchResults sends taskID's stored results, then each one stored later;
// it closes once the task is stored complete and every result stored
// before that was sent, when the task is deleted, or when ctx ends.
func (s *Store) WatchResults(ctx context.Context, taskID string) (<-chan model.Result, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if _, err := s.task(ctx, taskID); err != nil {
		return nil, fmt.Errorf("watch results of %w", err)
	}
	tk := enc(taskID)
	filter := tk + ".*"
	rw, err := do(s, ctx, s.streams.results, func(context.Context) (jetstream.KeyWatcher, error) { return s.on().results.Watch(ctx, filter) })
	if err != nil {
		return nil, fmt.Errorf("watch results of %s: %w", taskID, err)
	}
	tw, err := do(s, ctx, s.streams.tasks, func(context.Context) (jetstream.KeyWatcher, error) { return s.on().tasks.Watch(ctx, tk) })
	if err != nil {
		_ = rw.Stop()
		return nil, fmt.Errorf("watch task %s: %w", taskID, err)
	}
	out := make(chan model.Result, 256)
	go func() {
		defer close(out)
		defer func() { _ = rw.Stop(); _ = tw.Stop() }()
		var high uint64 // highest result revision seen
		final := false
		var want uint64 // once final: read results up to this revision
		lastSeq := func() (uint64, error) {
			return do(s, ctx, s.streams.results, func(ctx context.Context) (uint64, error) { return s.lastSeq(ctx, s.on().results, filter) })
		}
		setFinal := func() bool {
			final = true
			var err error
			want, err = lastSeq()
			return err == nil
		}
		// A watch whose consumer was on a node that died delivers nothing
		// until the client notices (many seconds): after attemptTimeout of
		// silence, the store is asked directly, and a stalled watch is
		// replaced by one resuming after the last revision seen.
		silence := time.NewTimer(attemptTimeout)
		defer silence.Stop()
		tasks := tw.Updates()
		for {
			if final && high >= want {
				last, err := lastSeq()
				if err != nil || high >= last {
					return
				}
				want = last
			}
			select {
			case <-ctx.Done():
				return
			case <-silence.C:
				if !final {
					t, err := s.task(ctx, taskID)
					if errors.Is(err, model.ErrNotFound) {
						return
					}
					if err == nil && t.Status.Final() && !setFinal() {
						return
					}
				}
				if last, err := lastSeq(); err == nil && last > high {
					nw, err := s.on().results.Watch(ctx, filter, jetstream.ResumeFromRevision(high+1))
					if err == nil {
						_ = rw.Stop()
						rw = nw
					}
				}
				silence.Reset(attemptTimeout)
			case e, ok := <-rw.Updates():
				if !ok {
					return
				}
				silence.Reset(attemptTimeout)
				if e == nil {
					continue
				}
				high = max(high, e.Revision())
				if e.Operation() != jetstream.KeyValuePut {
					continue
				}
				ps, err := resultsOf(e.Key(), e.Value())
				if err != nil {
					continue // not a result: skipped, as listings fail on it
				}
				for _, p := range ps {
					select {
					case out <- p.R:
					case <-ctx.Done():
						return
					}
				}
			case e, ok := <-tasks:
				if !ok {
					return
				}
				silence.Reset(attemptTimeout)
				if e == nil {
					continue
				}
				if e.Operation() != jetstream.KeyValuePut {
					return // deleted
				}
				var t model.Task
				if err := json.Unmarshal(e.Value(), &t); err == nil && t.Status.Final() && !final {
					tasks = nil // nothing more to learn from it
					if !setFinal() {
						return
					}
				}
			}
		}
	}()
	return out, nil
}
