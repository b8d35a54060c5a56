// Package engine is gseproc's core: the registry of process definitions,
// tasks fanned out to host agents with per-host deadlines, live results and
// state behind a Store. It implements backend.Backend.
package engine

import (
	"context"

	"gseproc/model"
)

// Dispatcher sends one operation to one host's agent and waits for its
// reply. The simulator, a real in-process agent and the NATS transport all
// satisfy it. It must honour ctx's deadline. It returns an error wrapping
// model.ErrUnreachable when no agent is there to answer (reported as 117),
// and ctx.Err() when the deadline passes (reported as timeout).
type Dispatcher interface {
	Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error)
}

// Inventory knows the fleet: every host with its labels and agent state.
type Inventory interface {
	Hosts(ctx context.Context) ([]model.HostInfo, error)
}

// EventSource delivers host events (restarts, give-ups, limit breaches,
// agents on/offline) and unsolicited process status reports. Optional: a
// Dispatcher or Inventory that also implements it is subscribed by the engine.
type EventSource interface {
	// SubscribeEvents calls fn for every event until ctx ends. fn must not block.
	SubscribeEvents(ctx context.Context, fn func(model.Event))
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

	// Host events, newest last.
	AppendEvent(ctx context.Context, e model.Event) error
	Events(ctx context.Context, limit int) ([]model.Event, error)

	Close() error
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
