package ui

import (
	"context"
	"errors"
	"sync"

	"gseproc/backend"
	"gseproc/model"
)

// errClosed is returned by calls made after the console closed.
var errClosed = errors.New("console closed")

// guarded wraps the backend so that once the console closes no new call
// starts and Close waits for the calls in flight: bubbletea may still run
// commands after its program returned, and the caller closes the backend
// right after the console.
type guarded struct {
	be     backend.Backend
	mu     sync.RWMutex
	closed bool
}

func guard(be backend.Backend) *guarded { return &guarded{be: be} }

// enter admits one call; the caller must call mu.RUnlock when it returns.
func (g *guarded) enter() error {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return errClosed
	}
	return nil
}

// close refuses new calls and waits for those in flight.
func (g *guarded) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *guarded) Info(ctx context.Context) (backend.Info, error) {
	if err := g.enter(); err != nil {
		return backend.Info{}, err
	}
	defer g.mu.RUnlock()
	return g.be.Info(ctx)
}

func (g *guarded) Namespaces(ctx context.Context) ([]backend.NamespaceSummary, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.Namespaces(ctx)
}

func (g *guarded) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	hs, err := g.be.Hosts(ctx, q)
	hs, _ = plainAll(hs, plainHost)
	return hs, err
}

// streamsHosts says the backend hands listings over host by host
// (backend.HostsReader: the client), not at once, or has the list form
// (backend.HostListReader: the client and the engine): the engine's
// Hosts makes each process's whole status, which a list drops.
func (g *guarded) streamsHosts() bool {
	_, each := g.be.(backend.HostsReader)
	_, list := g.be.(backend.HostListReader)
	return each || list
}

// HostsEach lists hosts, each made plain before fn sees it
// (backend.HostsEach).
func (g *guarded) HostsEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	if err := g.enter(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	return backend.HostsEach(ctx, g.be, q, plainEach(fn))
}

// HostListEach lists hosts for a list (backend.HostListEach: in the
// list form where the backend has it), each made plain before fn sees
// it.
func (g *guarded) HostListEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	if err := g.enter(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	return backend.HostListEach(ctx, g.be, q, plainEach(fn))
}

// indexedLister lists hosts with their labels as indexes into the
// listing's table of pairs (the client's HostListIndexed: the list form
// as it comes, no map made a host).
type indexedLister interface {
	HostListIndexed(ctx context.Context, q backend.HostQuery, fn func(pairs [][2]string, ids []uint32, v *backend.HostView)) error
}

// hostListIndexed lists hosts as indexedLister does, each made plain
// before fn sees it: the table's pairs once each (a listing of 100,000
// hosts has ~850), the rest of the host as plainEach makes it. ok is
// false when the backend does not list so (fn is not called).
func (g *guarded) hostListIndexed(ctx context.Context, q backend.HostQuery, fn func(pairs [][2]string, ids []uint32, v *backend.HostView)) (ok bool, err error) {
	il, ok := g.be.(indexedLister)
	if !ok {
		return false, nil
	}
	if err := g.enter(); err != nil {
		return true, err
	}
	defer g.mu.RUnlock()
	var (
		plain [][2]string
		c     backend.HostView // a host made plain: one for the listing, not one on the heap a host
	)
	return true, il.HostListIndexed(ctx, q, func(pairs [][2]string, ids []uint32, v *backend.HostView) {
		if pairs != nil && plain == nil { // one table a listing, read before its first host
			plain = make([][2]string, len(pairs))
			for i, p := range pairs {
				plain[i][0], _ = plainText(p[0])
				plain[i][1], _ = plainText(p[1])
			}
		}
		if pairs == nil {
			plain = nil
		}
		var changed bool
		if c, changed = plainHost(*v); changed {
			v = &c
		}
		fn(plain, ids, v)
	})
}

// plainEach is fn seeing each host made plain (plainHost: a copy when
// anything changed, the backend's view as it is when nothing did).
func plainEach(fn func(*backend.HostView)) func(*backend.HostView) {
	return func(v *backend.HostView) {
		if c, changed := plainHost(*v); changed {
			fn(&c)
			return
		}
		fn(v)
	}
}

func (g *guarded) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.Processes(ctx, q)
}

func (g *guarded) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	if err := g.enter(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	return g.be.SaveProcess(ctx, def)
}

func (g *guarded) DeleteProcess(ctx context.Context, key string) error {
	if err := g.enter(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	return g.be.DeleteProcess(ctx, key)
}

func (g *guarded) Operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	if err := g.enter(); err != nil {
		return model.Task{}, err
	}
	defer g.mu.RUnlock()
	return g.be.Operate(ctx, req)
}

func (g *guarded) Task(ctx context.Context, id string) (backend.TaskView, error) {
	if err := g.enter(); err != nil {
		return backend.TaskView{}, err
	}
	defer g.mu.RUnlock()
	v, err := g.be.Task(ctx, id)
	v.Results, _ = plainAll(v.Results, plainResult)
	return v, err
}

// TaskResults reads a task, each result made plain before fn sees it
// (backend.TaskResults).
func (g *guarded) TaskResults(ctx context.Context, id string, fn func(*model.Result)) (backend.TaskView, error) {
	if err := g.enter(); err != nil {
		return backend.TaskView{}, err
	}
	defer g.mu.RUnlock()
	return backend.TaskResults(ctx, g.be, id, func(r *model.Result) {
		if c, changed := plainResult(*r); changed {
			fn(&c)
			return
		}
		fn(r)
	})
}

// SharesStatuses is the backend's (backend.SharesStatuses).
func (g *guarded) SharesStatuses() bool { return backend.SharesStatuses(g.be) }

// TaskSummary reads a task without its results (backend.TaskSummary).
func (g *guarded) TaskSummary(ctx context.Context, id string) (backend.TaskView, error) {
	if err := g.enter(); err != nil {
		return backend.TaskView{}, err
	}
	defer g.mu.RUnlock()
	return backend.TaskSummary(ctx, g.be, id)
}

func (g *guarded) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.Tasks(ctx, limit)
}

func (g *guarded) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	ch, err := g.be.Watch(ctx, id, after)
	if err != nil {
		return ch, err
	}
	return plainChan(ctx, ch, plainResult), nil
}

func (g *guarded) ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error) {
	if err := g.enter(); err != nil {
		return model.Task{}, err
	}
	defer g.mu.RUnlock()
	return g.be.ControlRoll(ctx, id, act)
}

func (g *guarded) Cancel(ctx context.Context, id string) error {
	if err := g.enter(); err != nil {
		return err
	}
	defer g.mu.RUnlock()
	return g.be.Cancel(ctx, id)
}

func (g *guarded) Events(ctx context.Context) (<-chan model.Event, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	ch, err := g.be.Events(ctx)
	if err != nil {
		return ch, err
	}
	return plainChan(ctx, ch, plainEvent), nil
}

func (g *guarded) RecentEvents(ctx context.Context, n int) ([]model.Event, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	evs, err := g.be.RecentEvents(ctx, n)
	evs, _ = plainAll(evs, plainEvent)
	return evs, err
}

func (g *guarded) SetProcessGroups(ctx context.Context, req backend.GroupRequest) ([]backend.GroupResult, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.SetProcessGroups(ctx, req)
}

func (g *guarded) ProcessGroups(ctx context.Context, q backend.GroupQuery) ([]model.ProcessGroup, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.ProcessGroups(ctx, q)
}

func (g *guarded) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.Audit(ctx, q)
}

func (g *guarded) Simulate(ctx context.Context, req backend.SimRequest) (model.SimOutcome, error) {
	if err := g.enter(); err != nil {
		return model.SimOutcome{}, err
	}
	defer g.mu.RUnlock()
	return g.be.Simulate(ctx, req)
}

func (g *guarded) Logs(ctx context.Context, q backend.LogQuery) (<-chan model.TailChunk, error) {
	if err := g.enter(); err != nil {
		return nil, err
	}
	defer g.mu.RUnlock()
	return g.be.Logs(ctx, q)
}
