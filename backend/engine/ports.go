// Package engine is gseproc's core: the registry of process definitions,
// tasks fanned out to host agents with per-host deadlines, live results and
// state behind a Store. It implements backend.Backend.
package engine

import (
	"context"
	"errors"
	"time"

	"gseproc/model"
)

// Dispatcher sends one operation to one host's agent and waits for its
// reply. The simulator, a real in-process agent and the NATS transport all
// satisfy it. It must honour ctx's deadline. It returns an error wrapping
// model.ErrUnreachable when no agent is there to answer (reported as 117),
// and ctx.Err() when the deadline passes (reported as timeout).
type Dispatcher interface {
	// Dispatch sends req to host and returns its reply. The reply's
	// Status is the caller's from then on: the engine completes it and
	// keeps it without a copy, so a Dispatcher returns a status of its
	// own for each reply (every one does: decoded, or made for it).
	Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error)
}

// AsyncDispatcher is optional: a Dispatcher that sends a request without
// a goroutine waiting for its answer (the NATS transport). A run's
// fan-out then sends its targets from one goroutine and records each
// result as its answer comes (sendAll), instead of parking a worker per
// target in flight.
type AsyncDispatcher interface {
	// DispatchAsync sends req to host and calls done once with what
	// Dispatch would return, from any goroutine (this one too); ctx ends
	// (a deadline). done must not block for long.
	DispatchAsync(ctx context.Context, host model.Host, req model.AgentRequest, done func(model.AgentReply, error))
}

// LateSource is optional: a Dispatcher that still receives a host's
// answer after the dispatch gave up at its deadline (the NATS transport)
// implements it, so the timeout recorded for the host is corrected with
// the op's real outcome (see late.go).
type LateSource interface {
	// SubscribeLate calls fn with every late answer until ctx ends; it
	// returns at once. fn must not block.
	SubscribeLate(ctx context.Context, fn func(model.LateReply))
}

// Inventory knows the fleet: every host with its labels and agent state.
type Inventory interface {
	Hosts(ctx context.Context) ([]model.HostInfo, error)
}

// LabelSetInventory is optional, for an Inventory that keeps each host's
// labels as a shared set (the NATS dispatcher): HostLabelSets is Hosts
// with the labels apart, sets[i] host i's (shared, read only) and every
// HostInfo's Labels nil. A host list (Engine.HostListSets) hands the sets
// on instead of a map made for each host.
type LabelSetInventory interface {
	HostLabelSets(ctx context.Context) (hosts []model.HostInfo, sets []model.LabelSet, err error)
}

// LabelMaker is optional, for an Inventory that makes each host's labels
// from what it keeps instead of keeping a map of them (the simulator):
// HostsUnlabelled is Hosts with every HostInfo's Labels nil, and
// HostLabelsInto sets m (cleared first) to the labels of the host at
// place i of such a listing. A host list (Engine.HostListEach) copies
// each host's labels into its view's one map, not a map made for each
// host.
type LabelMaker interface {
	HostsUnlabelled(ctx context.Context) ([]model.HostInfo, error)
	HostLabelsInto(i int, m map[string]string)
}

// EventSource delivers host events (restarts, give-ups, limit breaches,
// agents on/offline) and unsolicited process status reports. Optional: a
// Dispatcher or Inventory that also implements it is subscribed by the engine.
type EventSource interface {
	// SubscribeEvents registers fn for every event from now until ctx ends
	// and returns at once: an event emitted after it returns reaches fn.
	// fn must not block.
	SubscribeEvents(ctx context.Context, fn func(model.Event))
}

// AckedEventSource is an EventSource that keeps each event (durably)
// until it is stored: fn's ack is called once the event is stored
// (nil) or could not be (the error; the source delivers it again
// later). The engine subscribes with SubscribeAckedEvents instead of
// SubscribeEvents when a source has it. An event can be delivered more
// than once; its ID makes storing it again harmless.
type AckedEventSource interface {
	SubscribeAckedEvents(ctx context.Context, fn func(ev model.Event, ack func(error)))
}

// Store holds the engine's state. The in-memory store (backend/store) and
// the JetStream store satisfy it; every method is safe for concurrent use.
type Store interface {
	// Registry.
	PutProcess(ctx context.Context, def model.ProcessDef) error
	DeleteProcess(ctx context.Context, key string) error
	Processes(ctx context.Context) ([]model.ProcessDef, error)

	// Last known status of a process on a host (agent reports, results).
	PutProcStatus(ctx context.Context, host model.Host, st model.ProcStatus) error
	ProcStatuses(ctx context.Context) (map[model.Host][]model.ProcStatus, error)

	// Tasks and their sub-results. NextSeq never returns the same value
	// twice for one store, across restarts of a durable store.
	NextSeq(ctx context.Context) (uint64, error)
	PutTask(ctx context.Context, t model.Task, targets []model.Target) error
	UpdateTask(ctx context.Context, t model.Task) error
	Task(ctx context.Context, id string) (model.Task, []model.Target, error) // model.ErrNotFound
	Tasks(ctx context.Context, limit int) ([]model.Task, error)              // newest first
	PutResult(ctx context.Context, r model.Result) error
	Results(ctx context.Context, taskID string) ([]model.Result, error)

	// Process groups: a namespace's resource pool on a host. PutGroups
	// creates or replaces them by (namespace, host); one whose resource
	// limits nothing is removed. Groups lists those of namespace ns
	// (every namespace when empty), by namespace and host.
	PutGroups(ctx context.Context, gs []model.ProcessGroup) error
	Groups(ctx context.Context, ns string) ([]model.ProcessGroup, error)

	// Host events, newest last.
	AppendEvent(ctx context.Context, e model.Event) error
	Events(ctx context.Context, limit int) ([]model.Event, error)

	// The audit trail: AppendAudit stores an entry and returns the
	// sequence number it got (increasing, never reused); Audit lists the
	// entries matching q, newest first (at most q.Want()).
	AppendAudit(ctx context.Context, e model.AuditEntry) (uint64, error)
	Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error)

	Close() error
}

// BatchStore is optional: a Store that writes many results, statuses or
// events faster together than one by one (pipelined) implements it. Each
// returns once every write is stored (or failed: the error joins the
// failures), exactly as durable as the same writes made one at a time.
type BatchStore interface {
	PutResults(ctx context.Context, rs []model.Result) error
	// PutProcStatuses may keep sts's entries by address past the call
	// (the JetStream store's status watch hands them back instead of
	// decoding them): the caller never changes them afterwards.
	PutProcStatuses(ctx context.Context, sts []HostStatus) error
	AppendEvents(ctx context.Context, evs []model.Event) error
}

// StatusKeeper is optional: a Store in the engine's own memory (the
// memory store) keeps a last known status by address instead of a copy.
// The engine hands it its own record of the status, which nobody changes
// afterwards (a new status replaces it whole): the memory store's copy of
// every status was the engine's second copy (85 MB of an embedded console
// at 100,000 hosts after a status op over 228,000 processes). The writer
// calls KeepProcStatus instead of PutProcStatus (and PutProcStatuses).
type StatusKeeper interface {
	KeepProcStatus(ctx context.Context, host model.Host, st *model.ProcStatus) error
}

// TaskKeeper is optional: a Store in the engine's own memory (the memory
// store) keeps a new task's targets by reference instead of a copy. The
// engine hands it the targets its run holds, which nobody changes
// afterwards: the memory store's copy was 12 MB of an embedded console
// for an op over 228,000 (host, process) targets. createTask calls
// KeepTask instead of PutTask.
type TaskKeeper interface {
	KeepTask(ctx context.Context, t model.Task, targets []model.Target) error
}

// SharedRegistry is optional: a Store that keeps the registry in memory
// (the JetStream store's watched index) lends its definitions, sorted by
// key, without copying them per call (an operate read the whole registry
// twice, each read copying every definition: 5 % of the server's CPU at
// 650 operates a second). The slice and all it holds are the store's:
// read-only for the caller, never changed by the store once lent.
type SharedRegistry interface {
	SharedProcesses(ctx context.Context) ([]model.ProcessDef, error)
}

// TaskRecordReader is optional: a Store that reads a task's record alone,
// without its targets or results (the JetStream store: one key). A task
// past the runs an engine keeps in memory (a fan-out over 100,000 hosts,
// or one another engine ran) is answered from its record once stored
// complete: the end of a watch of 217,847 results read every one of them
// back from the store to send the task alone (~4 s of the server's CPU),
// and a console's status read (results=false) as much again.
type TaskRecordReader interface {
	TaskRecord(ctx context.Context, id string) (model.Task, error) // model.ErrNotFound
}

// HostStatus is the last known status of a process on a host.
type HostStatus struct {
	Host   model.Host
	Status model.ProcStatus
}

// StatusSource is optional: a Dispatcher or Inventory that knows the
// current state of a host's processes without being asked (the agents'
// heartbeats, the simulator's model) implements it, so hosts show real
// states before any operation. The engine keeps the newer of this and the
// last status an operation reported.
type StatusSource interface {
	// Statuses returns what is known now of host's processes (nil: nothing).
	Statuses(host model.Host) []model.ProcStatus
}

// HostCounter is optional, for an Inventory: the number of hosts Hosts
// would list and of those whose agent is online, without listing them (the
// status bar asks every few seconds; a listing of 100,000 hosts is 15 MB).
type HostCounter interface {
	HostCounts(ctx context.Context) (total, online int, err error)
}

// StatusAppender is optional, for a StatusSource: AppendStatuses appends
// what Statuses(host) returns to dst, so that a listing of every host
// reuses one buffer instead of a slice per host.
type StatusAppender interface {
	AppendStatuses(dst []model.ProcStatus, host model.Host) []model.ProcStatus
}

// ListStatusAppender is optional, for a StatusSource: AppendListStatuses
// appends to dst what Statuses(host) reports of each process keys names
// (in any order, a process it reports nothing of left out), each status
// holding only ProcKey, State, PID, Hosted and ReportTime: what a host
// list shows (Engine.HostListEach) and the choice of the newer status
// reads. A source that makes its statuses (the simulator) saves making
// what the list drops.
type ListStatusAppender interface {
	AppendListStatuses(dst []model.ProcStatus, host model.Host, keys []string) []model.ProcStatus
}

// ResultWatcher is optional: a Store shared by several engines (JetStream)
// implements it so that an engine can follow, live, a task another engine
// is running. Without it, Watch of a task that is not running here
// returns what the store holds and closes.
type ResultWatcher interface {
	// WatchResults sends every result stored for taskID: those stored
	// already, then each one as it is stored, in no particular order (the
	// engine orders them by Seq). The channel closes once the task is
	// complete in the store and every result stored before that was sent,
	// when the task is deleted, or when ctx ends; the caller drains it after
	// cancelling ctx. model.ErrNotFound when the task is unknown.
	WatchResults(ctx context.Context, taskID string) (<-chan model.Result, error)
}

// Lease is a task's lease as a Leaser holds it.
type Lease struct {
	TaskID string
	// Owner is the engine that runs the task; empty when its engine let it
	// go (a graceful Close): any engine may take it at once.
	Owner string
	// TTL is how long the lease lasts unrenewed, as its owner declared it.
	TTL time.Duration
	// Rev changes with every write of the lease (acquire, renew, take).
	Rev uint64
}

// Leaser is optional: a Store shared by several engines implements it so
// that exactly one engine runs each unfinished task, and another takes it
// over when that engine dies. Expiry is judged by the observer's own clock
// (a lease whose Rev has not changed for its TTL since the observer first
// saw it has expired), so engines' clocks need not agree. Without it (the
// memory store, one engine), leases are not used.
type Leaser interface {
	// AcquireLease creates taskID's lease for owner: false when the task
	// already has one (of another owner).
	AcquireLease(ctx context.Context, taskID, owner string, ttl time.Duration) (bool, error)
	// RenewLease writes owner's lease again: model.ErrConflict when the
	// lease belongs to another owner (it was taken over). A lease that is
	// gone is acquired again.
	RenewLease(ctx context.Context, taskID, owner string, ttl time.Duration) error
	// TakeLease replaces the lease at revision rev by owner's: false when
	// it changed meanwhile (renewed, or another engine took it first).
	TakeLease(ctx context.Context, taskID, owner string, ttl time.Duration, rev uint64) (bool, error)
	// ReleaseLease lets owner's lease go: deleted when the task is complete
	// (done), else left ownerless for another engine to take at once.
	// Nothing happens when the lease is not owner's.
	ReleaseLease(ctx context.Context, taskID, owner string, done bool) error
	// Leases lists every lease.
	Leases(ctx context.Context) ([]Lease, error)
}

// SimControl is a simulated fleet the engine can drive live
// (simulator.Fleet satisfies it): Control carries out a validated change
// on the (host, process) targets it simulates, leaving the rest alone.
type SimControl interface {
	Control(ctx context.Context, c model.SimChange, targets []model.Target, scope string) (model.SimOutcome, error)
}

// CancelBoard is optional: a Store shared by several engines implements it
// so that a cancel asked of any engine reaches the engine running the task,
// and an engine that takes the task over later.
type CancelBoard interface {
	// RequestCancel records that taskID is to be cancelled.
	RequestCancel(ctx context.Context, taskID string) error
	// CancelRequested reports whether a cancel of taskID is recorded.
	CancelRequested(ctx context.Context, taskID string) (bool, error)
	// WatchCancels sends the id of every task whose cancel is recorded
	// from the call on, until ctx ends; then the channel closes.
	WatchCancels(ctx context.Context) (<-chan string, error)
}

// Fencer is optional: a Leaser whose writes can be fenced implements it,
// so that an engine that lost a task's lease (paused, partitioned) and
// has not noticed yet cannot overwrite what the task's new owner stores.
// The creator of a task holds token 0 (never fenced); an engine that
// resumes or takes a task over calls Fence and holds the token it gets.
// A write with a token that is not the task's latest is refused with
// model.ErrConflict.
type Fencer interface {
	// Fence makes the caller the only writer of taskID's results and
	// task record, and returns its token.
	Fence(ctx context.Context, taskID string) (uint64, error)
	// PutResultsFenced stores results of taskID (only) as
	// BatchStore.PutResults does, with token fence.
	PutResultsFenced(ctx context.Context, taskID string, fence uint64, rs []model.Result) error
	// PutResultsFencedMany stores each set as PutResultsFenced would, all
	// at once (the fences read together, the results published together):
	// errs[i] is set i's outcome, model.ErrConflict when its token is not
	// its task's latest; nil when every set was stored.
	PutResultsFencedMany(ctx context.Context, sets []FencedResults) (errs []error)
	// UpdateTaskFenced stores t as Store.UpdateTask does, with token fence.
	UpdateTaskFenced(ctx context.Context, fence uint64, t model.Task) error
}

// TaskCreator is optional: a Store and Leaser that stores a new task's
// first writes together implements it. CreateTask stores owner's lease of
// t (ttl), the audit entry of the operation that makes it and t's
// targets, all at once, and only once every one of them is stored, t (as
// Store.PutTask): a task in the store always has its lease, the record of
// the operation and its targets. A lease held by another owner is
// model.ErrConflict; an audit entry not stored is an error wrapping
// ErrNotAudited. On any error t is not stored (its lease may be: the
// caller lets it go).
type TaskCreator interface {
	CreateTask(ctx context.Context, t model.Task, targets []model.Target, owner string, ttl time.Duration, audit model.AuditEntry) error
}

// TaskEnder is optional: a Leaser that makes a finished task's last
// writes together implements it. EndTask lets owner's lease of taskID go
// as Leaser.ReleaseLease does (done: deleted) and appends audit, the entry
// of the task's end, both at once: one wait for both acknowledgements
// instead of one after the other. It returns each write's error apart.
// The engine calls it once the task is stored complete (or could not be),
// as it called ReleaseLease and then recorded the entry.
type TaskEnder interface {
	EndTask(ctx context.Context, taskID, owner string, done bool, audit model.AuditEntry) (leaseErr, auditErr error)
}

// ErrNotAudited is the error of a CreateTask whose audit entry was not
// stored.
var ErrNotAudited = errors.New("audit entry not stored")

// FencedResults are results of one task and the token they are written
// with (Fencer.PutResultsFencedMany). Results are by address: the
// writer's copies, not copied again (a batch of 84,000 results of ~550
// bytes was a second copy of each, ~45 MB an op over 100,000 hosts);
// the store reads them and may set a missing State (pending).
type FencedResults struct {
	TaskID  string
	Fence   uint64
	Results []*model.Result
}

// StatusWatcher is optional: a Store shared by several engines that
// tells each of them the last known statuses the others store
// implements it. An engine remembers what it stored of each status to
// store only changes; without the watch, a status another engine stored
// over it stayed in the store (and that engine's memory) while this one
// believed the store current, up to statusRefresh.
type StatusWatcher interface {
	// WatchProcStatuses sends every status stored from the call on, by
	// any engine (this one too), in store order, until ctx ends; then the
	// channel closes.
	WatchProcStatuses(ctx context.Context) (<-chan HostStatus, error)
}

// TaskModifier is optional: a Store that can change a task by a
// read-modify-write implements it. ModifyTask reads task taskID, calls
// modify with it and stores what modify returns only if the task is still
// as read; else it reads it and calls modify again. What modify reads of
// the store after the task (its results) is thus as new as the task it
// changes: two servers each changing one count of a complete task never
// store one's change over the other's. modify may be called again on the
// task as its own earlier call left it (a write applied whose answer was
// lost is asked again, and refused: the task is no longer as read), so it
// must make the same task of a task it made (storeCorrection tallies the
// counts anew from the results).
type TaskModifier interface {
	ModifyTask(ctx context.Context, taskID string, modify func(context.Context, model.Task) (model.Task, error)) error
}

// RollBoard keeps what operators asked of rolling tasks (pause, resume,
// abort: model.RollControl), apart from the task record its running
// engine writes, so that any engine can change it and the one running the
// roll (or taking it over later) reads it. Both stores implement it; the
// engine refuses a rolling operation on a store that does not.
type RollBoard interface {
	// RollControl returns taskID's control (the zero value when none).
	RollControl(ctx context.Context, taskID string) (model.RollControl, error)
	// UpdateRollControl applies fn to taskID's control atomically (a
	// compare-and-set, repeated when another writer came between) and
	// returns what it stored. fn may be applied again to what it made (a
	// write applied whose answer was lost is asked again, and refused):
	// fn(fn(c)) must equal fn(c), as model.RollControl.Apply's do.
	UpdateRollControl(ctx context.Context, taskID string, fn func(model.RollControl) model.RollControl) (model.RollControl, error)
	// WatchRollControls sends the id of every task whose control is
	// written from the call on, until ctx ends; then the channel closes.
	WatchRollControls(ctx context.Context) (<-chan string, error)
}
