package jsstore

import (
	"context"
	"fmt"

	"gseproc/backend/engine"
	"gseproc/model"
)

var _ engine.TaskEnder = (*Store)(nil)

// EndTask lets owner's lease of taskID go as ReleaseLease does and appends
// the audit entry of the task's end (engine.TaskEnder): when the lease is
// one this store wrote last for owner (leaseRevs), its release (a purge,
// or an ownerless rewrite, at the revision written) and the entry are
// published at once and both acknowledgements awaited together
// (publishEach: one that fails is published again alone, as do would).
// A release refused (the lease written since), or of a lease this store
// does not know, is made as ReleaseLease makes it: the lease read, then
// let go as found. The entry carries a message id of its own, so a
// repeated publish stores it once.
func (s *Store) EndTask(ctx context.Context, taskID, owner string, done bool, audit model.AuditEntry) (leaseErr, auditErr error) {
	if err := s.check(); err != nil {
		return err, err
	}
	var msgs []pubMsg
	am, auditErr := s.auditMsg(audit)
	auditAt := -1
	if auditErr == nil {
		auditAt = len(msgs)
		msgs = append(msgs, am)
	}
	k := enc(taskID)
	leaseAt := -1
	if m, ok := s.leaseRevs.take(k); ok && m.owner == owner {
		rel := pubMsg{subject: kvSubject(s.on().leases, k), what: "release lease of " + taskID, expect: m.rev, expectSet: true}
		if done {
			rel.purge = true
		} else {
			rel.data = leaseData(taskID, "", m.ttl)
		}
		leaseAt = len(msgs)
		msgs = append(msgs, rel)
	}
	p := s.publishEach(ctx, msgs, false)
	if auditAt >= 0 {
		if err := p.errOf(msgs, auditAt); err != nil {
			auditErr = fmt.Errorf("append audit: %w", err)
		}
	}
	if leaseAt < 0 || p.errOf(msgs, leaseAt) != nil {
		// Not known here, refused (written since: read it as it is), or
		// not stored: as ReleaseLease after its write at the known
		// revision failed.
		leaseErr = s.ReleaseLease(ctx, taskID, owner, done)
	}
	return leaseErr, auditErr
}
