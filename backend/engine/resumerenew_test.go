package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/store/jsstore"
	"gseproc/model"
)

// slowResumeStore is a JetStream store on which reading the results of
// the second task resumed waits (up to a minute) for a renewal of the
// first one's lease: a start-up resuming many tasks, each long to load.
type slowResumeStore struct {
	*jsstore.Store
	first string

	mu      sync.Mutex
	reads   []string
	renewed chan struct{} // closed at the first renewal of first
	once    sync.Once     // closes renewed
	waited  bool          // the second read saw the renewal
}

func (s *slowResumeStore) Results(ctx context.Context, taskID string) ([]model.Result, error) {
	s.mu.Lock()
	s.reads = append(s.reads, taskID)
	second := len(s.reads) == 2 && taskID != s.first
	s.mu.Unlock()
	if second {
		select {
		case <-s.renewed:
			s.mu.Lock()
			s.waited = true
			s.mu.Unlock()
		case <-time.After(time.Minute):
		}
	}
	return s.Store.Results(ctx, taskID)
}

func (s *slowResumeStore) RenewLease(ctx context.Context, taskID, owner string, ttl time.Duration) error {
	if taskID == s.first {
		s.once.Do(func() { close(s.renewed) })
	}
	return s.Store.RenewLease(ctx, taskID, owner, ttl)
}

// TestResumeRenewsWhileResuming: an engine starting up with several
// unfinished tasks renews the lease of the ones it resumed first while it
// still loads the others (else a long resume let the first leases expire
// and another server took those tasks over).
func TestResumeRenewsWhileResuming(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server")
	}
	emb := sharedNATS(t)
	ctx := context.Background()
	st := &slowResumeStore{Store: sharedStore(t, emb), renewed: make(chan struct{})}
	p := proc("ns", "app", nil)
	p.Spec.Policy.OpTimeout = 120 // the first task runs until the test lets it
	ids := unfinishedTasks(t, st, p, hostN(0), 2)
	ts, err := st.Tasks(ctx, 0)
	if err != nil || len(ts) != 2 {
		t.Fatalf("tasks %+v %v", ts, err)
	}
	// Resumed in the order the store lists them.
	for _, tk := range ts {
		if !tk.Status.Final() {
			st.first = tk.ID
			break
		}
	}
	cfg := testCfg()
	cfg.LeaseTTL = config.Duration(time.Second)
	// The first task runs until Start has returned: its lease is to be
	// renewed meanwhile.
	f := newFake(1)
	started := make(chan struct{})
	f.reply = func(ctx context.Context, _ model.Host, _ model.AgentRequest) (model.AgentReply, error) {
		select {
		case <-started:
		case <-ctx.Done():
			return model.AgentReply{}, ctx.Err()
		}
		return model.AgentReply{Code: 0, Message: "success"}, nil
	}
	e := engine.New(cfg, f, f, st, engine.WithOwner("A"))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	close(started)
	st.mu.Lock()
	waited, reads := st.waited, st.reads
	st.mu.Unlock()
	if len(reads) < 2 || !waited {
		t.Fatalf("results read for %v; the first task's lease renewed while the second was resumed: %v, want true", reads, waited)
	}
	for _, id := range ids {
		ch, err := e.Watch(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res := collect(t, ch); len(res) != 1 || res[0].State != model.StateSuccess {
			t.Fatalf("task %s resumed with %+v", id, res)
		}
	}
}
