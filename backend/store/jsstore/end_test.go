package jsstore

import (
	"testing"
	"time"

	"gseproc/model"
)

// TestEndTask: EndTask lets the lease go as ReleaseLease does (done:
// deleted; not done: left ownerless) and stores the audit entry, whether
// the lease is at the revision this store wrote last, was renewed by
// another store meanwhile (the revision known here is stale: the lease
// is read and let go as found), or was taken over by another owner (left
// as it is); each case's audit entry is stored once.
func TestEndTask(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	a, b := open(t, emb, Options{}), open(t, emb, Options{})
	ctx := tctx(t)
	const ttl = time.Minute
	entries := 0
	end := func(id, owner string, done bool) {
		t.Helper()
		en := model.AuditEntry{Time: time.Now().UTC(), Action: model.AuditTaskFinished, Result: model.AuditOK, TaskID: id,
			Actor: model.Actor{Operator: "alice"}}
		if lerr, aerr := a.EndTask(ctx, id, owner, done, en); lerr != nil || aerr != nil {
			t.Fatalf("end %s: lease %v, audit %v", id, lerr, aerr)
		}
		entries++
		as, err := a.Audit(ctx, model.AuditQuery{Limit: 100})
		if err != nil || len(as) != entries || as[0].TaskID != id || as[0].Action != model.AuditTaskFinished {
			t.Fatalf("audit after ending %s: %d entries (want %d), newest %+v: %v", id, len(as), entries, as, err)
		}
	}
	acquire := func(s *Store, id string) {
		t.Helper()
		if ok, err := s.AcquireLease(ctx, id, "A", ttl); !ok || err != nil {
			t.Fatalf("acquire %s: %v %v", id, ok, err)
		}
	}

	// Done, at the revision written here: deleted.
	id1 := model.FormatTaskID(time.Now(), 1)
	acquire(a, id1)
	end(id1, "A", true)
	if l, ok := leaseOf(t, b, id1); ok {
		t.Fatalf("lease of a task ended done: %+v", l)
	}

	// Not done: left ownerless, its TTL kept.
	id2 := model.FormatTaskID(time.Now(), 2)
	acquire(a, id2)
	end(id2, "A", false)
	if l, ok := leaseOf(t, b, id2); !ok || l.Owner != "" || l.TTL != ttl {
		t.Fatalf("lease of a task let go: %+v %v, want ownerless with TTL %s", l, ok, ttl)
	}

	// Renewed by another store of the same owner since: the revision known
	// here is stale, the lease is read and deleted as found.
	id3 := model.FormatTaskID(time.Now(), 3)
	acquire(a, id3)
	if err := b.RenewLease(ctx, id3, "A", ttl); err != nil {
		t.Fatal(err)
	}
	end(id3, "A", true)
	if l, ok := leaseOf(t, b, id3); ok {
		t.Fatalf("lease renewed elsewhere, then ended done: %+v", l)
	}

	// Taken over by another owner: left as it is.
	id4 := model.FormatTaskID(time.Now(), 4)
	acquire(a, id4)
	l, _ := leaseOf(t, b, id4)
	if ok, err := b.TakeLease(ctx, id4, "B", ttl, l.Rev); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	end(id4, "A", true)
	if l, ok := leaseOf(t, b, id4); !ok || l.Owner != "B" {
		t.Fatalf("a lease taken over, ended by its old owner: %+v %v, want B's", l, ok)
	}

	// No lease at all (never acquired, or gone): the entry is stored.
	end(model.FormatTaskID(time.Now(), 5), "A", true)
}
