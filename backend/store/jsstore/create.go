package jsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/backend/engine"
	"gseproc/model"
)

var _ engine.TaskCreator = (*Store)(nil)

// CreateTask stores a new task (engine.TaskCreator): its lease (a create
// of the lease key: refused when the key has a value), the audit entry
// and its targets are published at once and every acknowledgement is
// awaited (publishEach: one that fails is published again alone, as do
// would); then, all of them stored, the task record is created as PutTask
// creates it. A task record is thus never stored without its lease, its
// audit entry and its targets, as when each was written in turn, and the
// caller acts on the task only once CreateTask returned: the operation is
// recorded before anything is done. One round trip for the three writes
// and one for the record, instead of four in a row.
func (s *Store) CreateTask(ctx context.Context, t model.Task, targets []model.Target, owner string, ttl time.Duration, audit model.AuditEntry) error {
	if err := s.check(); err != nil {
		return err
	}
	w, err := s.taskWrites(t, targets)
	if err != nil {
		return err
	}
	am, err := s.auditMsg(audit)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrNotAudited, err)
	}
	const leaseAt, auditAt = 0, 1
	msgs := make([]pubMsg, 0, 2+len(w.targets))
	msgs = append(msgs, pubMsg{subject: kvSubject(s.on().leases, enc(t.ID)), data: leaseData(t.ID, owner, ttl),
		what: "acquire lease of " + t.ID, create: true}, am)
	msgs = append(msgs, w.targets...)
	p := s.publishEach(ctx, msgs, true)
	if p.stop != nil {
		// ctx ended, or the store was found down within the caller's bound.
		return fmt.Errorf("put task %s: %w", t.ID, p.stop)
	}
	var errs []error
	switch err := p.errOf(msgs, leaseAt); {
	case err == nil:
		s.leaseRevs.set(enc(t.ID), leaseMark{owner, ttl, p.seqs[leaseAt]})
	case !wrongLastSeq(err):
		errs = append(errs, err)
	default:
		// The key has a value: ours, whose acknowledgement was lost
		// (AcquireLease tells), a delete marker, or another owner's.
		if ok, err := s.AcquireLease(ctx, t.ID, owner, ttl); err != nil {
			errs = append(errs, err)
		} else if !ok {
			errs = append(errs, fmt.Errorf("put task %s: its lease is held: %w", t.ID, model.ErrConflict))
		}
	}
	if err := p.errOf(msgs, auditAt); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", engine.ErrNotAudited, err))
	}
	for i := auditAt + 1; i < len(msgs); i++ {
		if err := p.errOf(msgs, i); err != nil {
			errs = append(errs, fmt.Errorf("put task %s: %w", t.ID, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return s.createTask(ctx, t, w)
}

// wrongLastSeq says whether err is JetStream's refusal of a write that
// expected another last sequence (a create of a key that has a value).
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// createOwn creates key with value in the bucket kv picks (on the
// connection in use at each try) and returns its revision; a value found
// there that own says is this call's (an earlier attempt applied, its
// answer lost) is success too, with its revision. Another value is
// jetstream.ErrKeyExists.
//
// On a replicated stream JetStream refuses a create of a key while an
// earlier write of it is still being applied (proposed, not yet stored:
// "wrong last sequence", which nats.go reports as ErrKeyExists), and the
// key then reads as not found: the earlier attempt of this very call, do
// having asked again after attemptTimeout without an answer (a loaded
// machine: seen as "put task ...:64: exists: conflict" on a 3-node
// cluster). So a refusal with nothing to read is not a conflict: the
// create is asked again, within do's deadline, until the key is stored
// (ours: success) or created (it was deleted meanwhile); an error of the
// read is returned as such, never as a conflict.
func (s *Store) createOwn(ctx context.Context, on string, kv func(*bound) jetstream.KeyValue, key string, value []byte,
	own func(jetstream.KeyValueEntry) bool) (uint64, error) {
	start := time.Now()
	deadline := start.Add(failoverWait)
	if bound, ok := backend.StoreDeadline(ctx); ok {
		deadline = bound
	}
	for k := 0; ; k++ {
		rev, err := do(s, ctx, on, func(ctx context.Context) (uint64, error) { return kv(s.on()).Create(ctx, key, value) })
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return rev, err
		}
		e, gerr := s.get(ctx, kv(s.on()), key)
		switch {
		case gerr == nil && own(e):
			return e.Revision(), nil
		case gerr == nil:
			return 0, err
		case !errors.Is(gerr, jetstream.ErrKeyNotFound):
			// The refusal is not wrapped: not a conflict (ErrKeyExists).
			return 0, fmt.Errorf("create refused as existing (%v), then reading it back: %w", err, gerr)
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("%w: a create refused as existing for %s, yet nothing stored: %v",
				model.ErrUnavailable, time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(retryBackoff.Delay(k, rand.Float64()), time.Until(deadline))):
		}
	}
}
