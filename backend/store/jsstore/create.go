package jsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
