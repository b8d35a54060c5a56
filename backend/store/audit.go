package store

import (
	"context"

	"gseproc/model"
)

// DefaultKeepAudit bounds the audit ring.
const DefaultKeepAudit = 1_000_000

// WithKeepAudit bounds the audit ring to n entries (the oldest go first).
func WithKeepAudit(n int) Option {
	return func(m *Memory) {
		if n > 0 {
			m.keepAudit = n
		}
	}
}

// auditLog is the memory store's audit trail: a ring grown on demand up
// to its bound, entries in Seq order.
type auditLog struct {
	entries []model.AuditEntry
	head    int // index of the oldest once the ring is full
	seq     uint64
}

// AppendAudit stores an entry with the next sequence number.
func (m *Memory) AppendAudit(_ context.Context, e model.AuditEntry) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &m.audit
	a.seq++
	e.Seq = a.seq
	e.Namespaces = append([]string(nil), e.Namespaces...)
	e.Targets = append([]string(nil), e.Targets...)
	if len(a.entries) < m.keepAudit {
		a.entries = append(a.entries, e)
		return e.Seq, nil
	}
	a.entries[a.head] = e
	a.head = (a.head + 1) % len(a.entries)
	return e.Seq, nil
}

// Audit lists the entries matching q, newest first.
func (m *Memory) Audit(_ context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a := &m.audit
	want := q.Want()
	out := []model.AuditEntry{}
	n := len(a.entries)
	for i := n - 1; i >= 0 && len(out) < want; i-- {
		e := a.entries[(a.head+i)%n]
		if !q.Since.IsZero() && e.Time.Before(q.Since) {
			break // older entries only from here on
		}
		if q.Match(e) {
			out = append(out, e)
		}
	}
	return out, nil
}
