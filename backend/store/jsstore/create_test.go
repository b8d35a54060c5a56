package jsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend"
	"gseproc/model"
)

// TestCreateTask: CreateTask stores the lease (its owner's), the audit
// entry, the targets and the task; made again by its owner (an answer
// lost), it finds all of it its own; by another owner, the lease refuses
// it (model.ErrConflict) and the lease stays the first owner's.
func TestCreateTask(t *testing.T) {
	emb := startNATS(t, natsCfg(t, t.TempDir()))
	s := open(t, emb, Options{})
	ctx := tctx(t)
	tgs := targets(3)
	id := model.FormatTaskID(time.Now(), 5)
	task := model.Task{ID: id, Op: model.OpStart, Targets: len(tgs), Status: model.TaskPending, Created: time.Now().UTC()}
	en := model.AuditEntry{Time: time.Now().UTC(), Action: model.AuditOperate, Result: model.AuditOK, TaskID: id,
		Actor: model.Actor{Operator: "alice"}, TargetCount: len(tgs)}
	if err := s.CreateTask(ctx, task, tgs, "A", time.Minute, en); err != nil {
		t.Fatal(err)
	}
	check := func(entries int) {
		t.Helper()
		got, gotTargets, err := s.Task(ctx, id)
		if err != nil || got.ID != id || len(gotTargets) != len(tgs) {
			t.Fatalf("task %+v with %d targets: %v", got, len(gotTargets), err)
		}
		ls, err := s.Leases(ctx)
		if err != nil || len(ls) != 1 || ls[0].TaskID != id || ls[0].Owner != "A" || ls[0].TTL != time.Minute {
			t.Fatalf("leases %+v: %v", ls, err)
		}
		as, err := s.Audit(ctx, model.AuditQuery{Limit: 10})
		if err != nil || len(as) != entries || as[0].TaskID != id || as[0].Actor.Operator != "alice" {
			t.Fatalf("audit %+v: %v", as, err)
		}
	}
	check(1)
	// Its owner again: the lease and the task are found its own (the
	// audit entry, under a new message id, is stored again).
	if err := s.CreateTask(ctx, task, tgs, "A", time.Minute, en); err != nil {
		t.Fatalf("again by its owner: %v", err)
	}
	check(2)
	// Another owner: refused by the lease.
	if err := s.CreateTask(ctx, task, tgs, "B", time.Minute, en); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("by another owner: %v, want ErrConflict", err)
	}
	// A task that differs, under an id taken: refused by the record.
	other := task
	other.Op = model.OpStop
	if err := s.CreateTask(ctx, other, tgs, "A", time.Minute, en); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("another task under the id: %v, want ErrConflict", err)
	}
	// Targets given twice: refused before anything is written.
	id2 := model.FormatTaskID(time.Now(), 6)
	task2 := task
	task2.ID = id2
	if err := s.CreateTask(ctx, task2, append(tgs, tgs[0]), "A", time.Minute, en); err == nil {
		t.Fatal("a target given twice was taken")
	}
	if ls, err := s.Leases(ctx); err != nil || len(ls) != 1 {
		t.Fatalf("leases after a refused task: %+v %v", ls, err)
	}
}

// applyingKV is a bucket whose first create of a key is applied only after
// a while, and every create of that key is refused meanwhile, as a
// replicated JetStream stream refuses a create while an earlier write of
// the key is proposed and not yet stored (10164 "wrong last sequence",
// ErrKeyExists to nats.go), the key reading as not found.
type applyingKV struct {
	jetstream.KeyValue
	after   time.Duration
	mu      sync.Mutex
	pending map[string]bool // keys whose first create is being applied
	applied chan error      // the first create's own result
}

func (kv *applyingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.pending == nil {
		kv.pending = map[string]bool{key: true}
		time.AfterFunc(kv.after, func() {
			_, err := kv.KeyValue.Create(context.Background(), key, value, opts...)
			kv.mu.Lock()
			delete(kv.pending, key)
			kv.mu.Unlock()
			kv.applied <- err
		})
	}
	if kv.pending[key] {
		refusal := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
		return 0, fmt.Errorf("%w: %w", refusal, jetstream.ErrKeyExists)
	}
	return kv.KeyValue.Create(ctx, key, value, opts...)
}

// TestCreateRefusedWhileItsOwnIsApplied: a task record's and a lease's
// create refused as existing while nothing can be read there (their own
// earlier attempt still being applied) is asked again until the value is
// stored, and found its own: not a conflict (it was: "put task ...:64:
// exists: conflict", a 3-node cluster under load). Another owner's lease,
// and another task under the id, are still refused.
func TestCreateRefusedWhileItsOwnIsApplied(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	const after = 700 * time.Millisecond
	tasks := &applyingKV{KeyValue: s.on().tasks, after: after, applied: make(chan error, 1)}
	leases := &applyingKV{KeyValue: s.on().leases, after: after, applied: make(chan error, 1)}
	s.on().tasks, s.on().leases = tasks, leases

	id := model.FormatTaskID(time.Now(), 64)
	task := model.Task{ID: id, Op: model.OpStart, Targets: 1, Status: model.TaskPending, Created: time.Now().UTC()}
	t0 := time.Now()
	if err := s.PutTask(ctx, task, targets(1)); err != nil {
		t.Fatalf("put task while its own create is applied: %v", err)
	}
	if err := <-tasks.applied; err != nil {
		t.Fatalf("the first create: %v", err)
	}
	if took := time.Since(t0); took < after {
		t.Fatalf("put task returned in %s, before its record was stored (%s)", took, after)
	}
	if got, _, err := s.Task(ctx, id); err != nil || got.ID != id || got.Op != model.OpStart {
		t.Fatalf("task %+v: %v", got, err)
	}
	other := task
	other.Op = model.OpStop
	if err := s.PutTask(ctx, other, targets(1)); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("another task under the id: %v, want ErrConflict", err)
	}

	ok, err := s.AcquireLease(ctx, id, "A", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire a lease while its own create is applied: %v, %v", ok, err)
	}
	if err := <-leases.applied; err != nil {
		t.Fatalf("the first lease create: %v", err)
	}
	if ls, err := s.Leases(ctx); err != nil || len(ls) != 1 || ls[0].Owner != "A" {
		t.Fatalf("leases %+v: %v", ls, err)
	}
	if ok, err := s.AcquireLease(ctx, id, "B", time.Minute); err != nil || ok {
		t.Fatalf("another owner: %v, %v; want refused", ok, err)
	}
}

// closingKV is a bucket whose first create is applied and then answered
// nats.ErrConnectionClosed: the connection closed for good (a NATS server
// closes one for a protocol violation) before the answer came.
type closingKV struct {
	jetstream.KeyValue
	once sync.Once
}

func (kv *closingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	lost := false
	kv.once.Do(func() { lost = true })
	rev, err := kv.KeyValue.Create(ctx, key, value, opts...)
	if lost && err == nil {
		return 0, nats.ErrConnectionClosed
	}
	return rev, err
}

// TestCreateAnsweredConnectionClosed: a task record's create applied whose
// answer was lost with its connection (closed for good) is asked again
// (on the connection then in use) and found its own; it failed with 'nats:
// connection closed'.
func TestCreateAnsweredConnectionClosed(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	s.on().tasks = &closingKV{KeyValue: s.on().tasks}
	id := model.FormatTaskID(time.Now(), 64)
	task := model.Task{ID: id, Op: model.OpStart, Targets: 1, Status: model.TaskPending, Created: time.Now().UTC()}
	if err := s.PutTask(ctx, task, targets(1)); err != nil {
		t.Fatalf("put task whose create's answer was lost with its connection: %v", err)
	}
	if got, _, err := s.Task(ctx, id); err != nil || got.ID != id {
		t.Fatalf("task %+v: %v", got, err)
	}
}

// closingUpdateKV is a bucket whose first update is applied and then
// answered nats.ErrConnectionClosed (as closingKV's create).
type closingUpdateKV struct {
	jetstream.KeyValue
	once sync.Once
}

func (kv *closingUpdateKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	lost := false
	kv.once.Do(func() { lost = true })
	n, err := kv.KeyValue.Update(ctx, key, value, rev)
	if lost && err == nil {
		return 0, nats.ErrConnectionClosed
	}
	return n, err
}

// TestPutProcessAnsweredConnectionClosed: a definition's update at its
// revision, applied with its answer lost with the connection, is asked
// again (do), refused at the revision it moved, and found its own: not a
// conflict (it was: "revision 1 is not the stored one: conflict"). An
// update at a stale revision of another definition stays a conflict.
func TestPutProcessAnsweredConnectionClosed(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	ctx := tctx(t)
	stored := func() model.ProcessDef {
		t.Helper()
		ps, err := s.Processes(ctx)
		if err != nil || len(ps) != 1 {
			t.Fatalf("processes %+v: %v", ps, err)
		}
		return ps[0]
	}
	if err := s.PutProcess(ctx, proc("web", "nginx")); err != nil {
		t.Fatal(err)
	}
	got := stored()
	s.on().procs = &closingUpdateKV{KeyValue: s.on().procs}
	upd := got
	upd.Hosts = upd.Hosts[:1]
	if err := s.PutProcess(ctx, upd); err != nil {
		t.Fatalf("update whose answer was lost with its connection: %v", err)
	}
	if now := stored(); now.Rev <= got.Rev || len(now.Hosts) != 1 {
		t.Fatalf("after the update: %+v", now)
	}
	// The same update again at the revision it moved: refused, as
	// TestRegistry's (asked once, nothing of its own can be stored).
	if err := s.PutProcess(ctx, upd); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("the update again at the stale revision %d: %v, want ErrConflict", got.Rev, err)
	}
}

// TestCreateRefusedPastItsBoundIsUnavailable: a create refused as
// existing with nothing to read there until the caller's bound is spent
// fails as unavailable, never as a conflict (the refusal was wrapped, so
// a task put that ran out of time said "exists: conflict" and a lease
// asked for said "held by another", the errors createOwn exists to
// avoid).
func TestCreateRefusedPastItsBoundIsUnavailable(t *testing.T) {
	s := open(t, startNATS(t, natsCfg(t, t.TempDir())), Options{})
	const after = 3 * time.Second // the first create is applied long after the bound
	tasks := &applyingKV{KeyValue: s.on().tasks, after: after, applied: make(chan error, 1)}
	leases := &applyingKV{KeyValue: s.on().leases, after: after, applied: make(chan error, 1)}
	s.on().tasks, s.on().leases = tasks, leases
	bounded := func() context.Context { return backend.WithStoreWait(tctx(t), 500*time.Millisecond) }

	id := model.FormatTaskID(time.Now(), 65)
	task := model.Task{ID: id, Op: model.OpStart, Targets: 1, Status: model.TaskPending, Created: time.Now().UTC()}
	err := s.PutTask(bounded(), task, targets(1))
	if !errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrConflict) {
		t.Fatalf("put task past its bound: %v, want unavailable, not a conflict", err)
	}
	ok, err := s.AcquireLease(bounded(), id, "A", time.Minute)
	if ok || !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("acquire a lease past its bound: %v, %v; want unavailable", ok, err)
	}
	for _, kv := range []*applyingKV{tasks, leases} {
		if err := <-kv.applied; err != nil {
			t.Fatalf("the first create: %v", err)
		}
	}
}
