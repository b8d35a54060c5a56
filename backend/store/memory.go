// Package store holds the engine's state. Memory is the in-memory store:
// bounded, safe for concurrent use, lost when the process exits. (A durable
// store comes with the network transport.)
package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/model"
)

// Defaults of the bounds. DefaultKeepResults is about what one op over
// the biggest namespace of 100,000 simulated hosts (~228,000 results)
// leaves: a finished task's results hold ~350 bytes each (its row and
// the status it read), so the embedded console at 100,000 hosts kept
// ~80 MB more for every such op up to 1,000,000 results (~350 MB); now
// the results of the op before go once a newer one has finished.
const (
	DefaultKeepTasks   = 1000
	DefaultKeepResults = 300_000
	DefaultKeepEvents  = 10000
)

// Option configures a Memory store.
type Option func(*Memory)

// WithKeepTasks bounds how many tasks are kept: beyond n, the oldest
// finished tasks are dropped (unfinished ones are never dropped).
func WithKeepTasks(n int) Option {
	return func(m *Memory) {
		if n > 0 {
			m.keepTasks = n
		}
	}
}

// WithKeepResults bounds the sub-results kept over all tasks: beyond n,
// the oldest finished tasks are dropped, so a few huge tasks cannot hold
// the memory of thousands. The newest task is always kept.
func WithKeepResults(n int) Option {
	return func(m *Memory) {
		if n > 0 {
			m.keepResults = n
		}
	}
}

// WithMaxAge drops finished tasks that ended more than d ago (checked as
// tasks are put or updated); 0 keeps them until a count bound drops them.
func WithMaxAge(d time.Duration) Option {
	return func(m *Memory) {
		if d > 0 {
			m.maxAge = d
		}
	}
}

// WithKeepEvents bounds the event ring to n events.
func WithKeepEvents(n int) Option {
	return func(m *Memory) {
		if n > 0 {
			m.keepEvents = n
		}
	}
}

// WithSeqStart makes NextSeq return values after n (tests use it; by
// default the sequence is seeded from the boot time).
func WithSeqStart(n uint64) Option { return func(m *Memory) { m.seq.Store(n) } }

// Memory is an in-memory engine.Store.
type Memory struct {
	seq atomic.Uint64

	mu    sync.RWMutex
	procs map[string]model.ProcessDef
	lent  []model.ProcessDef // the registry sorted by key, lent by SharedProcesses; nil after a change
	rev   uint64
	// statuses are the last known statuses, a host's in a short slice (a
	// map per host was a map and its group for every host of the fleet).
	// Each is kept by address and never changed: a new status replaces
	// it whole (KeepProcStatus keeps the engine's own).
	statuses map[model.Host][]*model.ProcStatus
	groups   map[groupKey]model.ProcessGroup
	tasks    map[string]*taskRec
	order    []string // task ids in creation order, oldest first

	events []model.Event // ring of capacity keepEvents
	evHead int           // index of the oldest event
	evLen  int
	evIDs  map[string]struct{} // the IDs of the events in the ring

	nResults int // results stored over all tasks

	audit auditLog

	rollSubs map[chan string]context.Context // WatchRollControls

	keepTasks, keepResults, keepEvents, keepAudit int
	maxAge                                        time.Duration
}

// NewMemory returns an empty store. NextSeq is seeded from the current time
// in microseconds, so task ids (which also carry the creation second) stay
// unique across restarts of the process unless it created more than a
// million tasks a second.
func NewMemory(opts ...Option) *Memory {
	m := &Memory{
		procs:       make(map[string]model.ProcessDef),
		statuses:    make(map[model.Host][]*model.ProcStatus),
		groups:      make(map[groupKey]model.ProcessGroup),
		tasks:       make(map[string]*taskRec),
		keepTasks:   DefaultKeepTasks,
		keepResults: DefaultKeepResults,
		keepEvents:  DefaultKeepEvents,
		keepAudit:   DefaultKeepAudit,
	}
	m.seq.Store(uint64(time.Now().UnixMicro()))
	for _, o := range opts {
		o(m)
	}
	return m
}

func cloneDef(d model.ProcessDef) model.ProcessDef {
	d.Process = d.Process.Clone()
	d.Hosts = slices.Clone(d.Hosts)
	return d
}

// PutProcess creates or replaces a definition. When def.Rev is not zero it
// must equal the stored revision (optimistic update), else ErrConflict.
func (m *Memory) PutProcess(_ context.Context, def model.ProcessDef) error {
	key := def.Process.Key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.procs[key]; ok && def.Rev != 0 && def.Rev != old.Rev {
		return fmt.Errorf("put process %s: revision %d, stored %d: %w", key, def.Rev, old.Rev, model.ErrConflict)
	}
	m.rev++
	def = cloneDef(def)
	def.Rev = m.rev
	m.procs[key] = def
	m.lent = nil
	return nil
}

// DeleteProcess removes a definition by key.
func (m *Memory) DeleteProcess(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.procs[key]; !ok {
		return fmt.Errorf("delete process %s: %w", key, model.ErrNotFound)
	}
	delete(m.procs, key)
	m.lent = nil
	return nil
}

// Processes returns every definition sorted by key.
func (m *Memory) Processes(_ context.Context) ([]model.ProcessDef, error) {
	m.mu.RLock()
	out := make([]model.ProcessDef, 0, len(m.procs))
	for _, d := range m.procs {
		out = append(out, cloneDef(d))
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Process.Key() < out[j].Process.Key() })
	return out, nil
}

// SharedProcesses returns every definition sorted by key without copying
// them per call (engine.SharedRegistry): listing 100,000 hosts copied every
// definition's host list. The slice and what it holds are the store's,
// read-only for the caller; a write makes a new one (a stored definition is
// replaced whole, never changed), so a slice once lent never changes.
func (m *Memory) SharedProcesses(_ context.Context) ([]model.ProcessDef, error) {
	m.mu.RLock()
	out := m.lent
	m.mu.RUnlock()
	if out != nil {
		return out, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lent == nil {
		l := make([]model.ProcessDef, 0, len(m.procs))
		for _, d := range m.procs {
			l = append(l, d)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Process.Key() < l[j].Process.Key() })
		m.lent = l
	}
	return m.lent, nil
}

// PutProcStatus records the last known status of st.ProcKey on host.
func (m *Memory) PutProcStatus(ctx context.Context, host model.Host, st model.ProcStatus) error {
	return m.KeepProcStatus(ctx, host, &st)
}

// KeepProcStatus is PutProcStatus keeping st by address, not a copy
// (engine.StatusKeeper): the caller never changes *st afterwards.
func (m *Memory) KeepProcStatus(_ context.Context, host model.Host, st *model.ProcStatus) error {
	if st.ProcKey == "" {
		return fmt.Errorf("put status on %s: proc key is empty", host)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.statuses[host]
	for i, was := range l {
		if was.ProcKey == st.ProcKey {
			l[i] = st
			return nil
		}
	}
	m.statuses[host] = append(l, st)
	return nil
}

// ProcStatuses returns every last known status by host, each host's sorted by key.
func (m *Memory) ProcStatuses(_ context.Context) (map[model.Host][]model.ProcStatus, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[model.Host][]model.ProcStatus, len(m.statuses))
	for h, kept := range m.statuses {
		l := make([]model.ProcStatus, len(kept))
		for i, st := range kept {
			l[i] = *st
		}
		sort.Slice(l, func(i, j int) bool { return l[i].ProcKey < l[j].ProcKey })
		out[h] = l
	}
	return out, nil
}

// NextSeq returns the next task sequence number.
func (m *Memory) NextSeq(_ context.Context) (uint64, error) { return m.seq.Add(1), nil }

// PutTask creates a task with its targets.
func (m *Memory) PutTask(ctx context.Context, t model.Task, targets []model.Target) error {
	return m.KeepTask(ctx, t, slices.Clone(targets))
}

// KeepTask is PutTask keeping targets, not a copy (engine.TaskKeeper):
// the caller never changes them afterwards.
func (m *Memory) KeepTask(_ context.Context, t model.Task, targets []model.Target) error {
	rec, err := newTaskRec(t, targets)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tasks[t.ID]; ok {
		return fmt.Errorf("put task %s: exists: %w", t.ID, model.ErrConflict)
	}
	m.tasks[t.ID] = rec
	m.order = append(m.order, t.ID)
	m.evictLocked()
	return nil
}

// evictLocked drops the oldest finished tasks while more than keepTasks
// tasks or keepResults results are kept. The newest task always stays.
func (m *Memory) evictLocked() {
	count := len(m.order)
	over := func() bool { return count > m.keepTasks || m.nResults > m.keepResults }
	now := time.Now()
	expired := func(t model.Task) bool {
		return m.maxAge > 0 && !t.Finished.IsZero() && now.Sub(t.Finished) > m.maxAge
	}
	if !over() && m.maxAge == 0 {
		return
	}
	kept := m.order[:0]
	last := len(m.order) - 1
	for i, id := range m.order {
		rec := m.tasks[id]
		if i < last && (over() || expired(rec.task)) && rec.task.Status.Final() {
			delete(m.tasks, id)
			m.nResults -= rec.n
			count--
			continue
		}
		kept = append(kept, id)
	}
	clear(m.order[len(kept):])
	m.order = kept
}

// UpdateTask replaces a task's summary (status, counts, finish time).
func (m *Memory) UpdateTask(_ context.Context, t model.Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.tasks[t.ID]
	if !ok {
		return fmt.Errorf("update task %s: %w", t.ID, model.ErrNotFound)
	}
	rec.task = t
	m.evictLocked()
	return nil
}

// Task returns a task and its targets.
func (m *Memory) Task(_ context.Context, id string) (model.Task, []model.Target, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rec, ok := m.tasks[id]
	if !ok {
		return model.Task{}, nil, fmt.Errorf("task %s: %w", id, model.ErrNotFound)
	}
	return rec.task, slices.Clone(rec.targets), nil
}

// TaskRecord is task id without its targets (engine.TaskRecordReader).
func (m *Memory) TaskRecord(_ context.Context, id string) (model.Task, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rec, ok := m.tasks[id]
	if !ok {
		return model.Task{}, fmt.Errorf("task %s: %w", id, model.ErrNotFound)
	}
	return rec.task, nil
}

// Tasks lists tasks newest first; limit <= 0 means all.
func (m *Memory) Tasks(_ context.Context, limit int) ([]model.Task, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := len(m.order)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]model.Task, 0, n)
	for i := len(m.order) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, m.tasks[m.order[i]].task)
	}
	return out, nil
}

// PutResult creates or replaces the sub-result of (r.Host, r.ProcKey).
func (m *Memory) PutResult(_ context.Context, r model.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.tasks[r.TaskID]
	if !ok {
		return fmt.Errorf("put result of task %s: %w", r.TaskID, model.ErrNotFound)
	}
	if r.State == "" {
		r.State = model.StatePending
	}
	isNew, ok := rec.put(&r)
	if !ok {
		return fmt.Errorf("put result of task %s: %s %s is not a target: %w", r.TaskID, r.Host, r.ProcKey, model.ErrNotFound)
	}
	if isNew {
		rec.n++
		m.nResults++
	}
	return nil
}

// Results returns the sub-results put so far, in target order.
func (m *Memory) Results(_ context.Context, taskID string) ([]model.Result, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rec, ok := m.tasks[taskID]
	if !ok {
		return nil, fmt.Errorf("results of task %s: %w", taskID, model.ErrNotFound)
	}
	out := make([]model.Result, 0, rec.n)
	for i := range rec.results.Len() {
		if r, ok := rec.result(i); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// AppendEvent adds an event to the ring, dropping the oldest when full.
// An event whose ID is in the ring already is kept once.
func (m *Memory) AppendEvent(_ context.Context, e model.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = make([]model.Event, m.keepEvents)
		m.evIDs = map[string]struct{}{}
	}
	if e.ID != "" {
		if _, dup := m.evIDs[e.ID]; dup {
			return nil
		}
		m.evIDs[e.ID] = struct{}{}
	}
	if m.evLen < len(m.events) {
		m.events[(m.evHead+m.evLen)%len(m.events)] = e
		m.evLen++
		return nil
	}
	delete(m.evIDs, m.events[m.evHead].ID)
	m.events[m.evHead] = e
	m.evHead = (m.evHead + 1) % len(m.events)
	return nil
}

// Events returns the last limit events, newest last; limit <= 0 means all kept.
func (m *Memory) Events(_ context.Context, limit int) ([]model.Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := m.evLen
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]model.Event, n)
	for i := range n {
		out[i] = m.events[(m.evHead+m.evLen-n+i)%len(m.events)]
	}
	return out, nil
}

// Close releases nothing: the memory store holds no resources. It is safe
// to call more than once.
func (m *Memory) Close() error { return nil }
