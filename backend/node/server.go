package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/backend/engine"
	"gseproc/backend/health"
	"gseproc/backend/store/jsstore"
	"gseproc/model"
)

// Server is what `gseproc server` serves: its engine once started, and
// until then why not. A server on NATS starts in two steps: it connects to
// NATS at once (a cluster node started alone accepts its agents and its
// health answers), then opens its store and starts its engine in the
// background, waiting for the JetStream quorum as long as it takes: a node
// whose peers are not up yet waits for them ("waiting for 2 of 3 nodes" in
// /readyz and the log) instead of giving up. Backend calls before that are
// refused with the reason (the API server refuses them earlier, as /readyz
// says).
type Server struct {
	// AgentsURL is where agents connect ("" without NATS).
	AgentsURL string

	log     *slog.Logger
	demo    bool
	prober  *health.Prober // nil without NATS: always ready once started
	started chan struct{}  // closed once the engine started or failed
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	e      *engine.Engine
	closer func() error   // closes the engine and what it runs on
	st     *jsstore.Store // the store, once started (its Outage: the prober)
	phase  string         // what the node is doing while not started
	err    error          // why it could not start
}

// StartServer builds the backend `gseproc server` serves, as [server]
// fleet says: "nats" (real agents over NATS, state in JetStream), "mixed"
// (the same plus the simulated fleet of [simulator]; --demo) or
// "simulated" (in-process fleet, in-memory state, no NATS, started before
// it returns). Close stops it, whatever it got to.
func StartServer(ctx context.Context, cfg config.Config, demo bool, version string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Server{log: log, demo: demo, started: make(chan struct{}), stop: func() {}}
	switch cfg.Server.Fleet {
	case "simulated":
		e, closer, err := OpenEmbedded(ctx, cfg, version, log)
		if err != nil {
			return nil, err
		}
		n.e, n.closer = e, closer
		close(n.started)
		return n, nil
	case "", "nats", "mixed":
	default:
		return nil, fmt.Errorf("server.fleet %q is not one of nats, mixed, simulated", cfg.Server.Fleet)
	}
	if !demo && !cfg.NATS.External() && cfg.NATS.StoreDir == "" {
		dir, err := defaultStoreDir()
		if err != nil {
			return nil, err
		}
		cfg.NATS.StoreDir = dir
		log.Info("nats: JetStream state kept in the default directory ([nats] store_dir sets another)", "store_dir", dir)
	}
	fleet, err := serverFleet(cfg, demo || cfg.Server.Fleet == "mixed")
	if err != nil {
		return nil, err
	}
	nb, err := connectNATS(cfg, demo, log)
	if err != nil {
		if fleet != nil {
			_ = fleet.Close()
		}
		return nil, err
	}
	n.AgentsURL = nb.ClientURL
	n.phase = "opening the store and resuming unfinished tasks"
	o := health.Options{Link: nb.Link, Logger: log, Starting: n.why,
		Leases: func() int {
			if e := n.engine(); e != nil {
				return e.Runs()
			}
			return 0
		},
		Agents: nb.NATS.Count,
		StoreOutage: func() (time.Time, bool, error) {
			st := n.store()
			if st == nil {
				return time.Time{}, false, nil
			}
			since, err := st.Outage()
			return since, errors.Is(err, jsstore.ErrNATSSilent), err
		},
		CheckStore: func(ctx context.Context) (health.StoreCheck, bool) {
			st := n.store()
			if st == nil {
				return health.StoreCheck{}, false
			}
			h := st.Check(ctx)
			return health.StoreCheck{Err: h.Err, NATSSilent: errors.Is(h.Err, jsstore.ErrNATSSilent), Streams: h.Streams,
				Unanswered: h.Unanswered, Lag: h.Lag, Behind: h.Behind}, true
		}}
	if nb.Embedded != nil {
		o.Node = nb.Embedded.Server()
	}
	if n.prober, err = health.Start(o); err != nil {
		_ = nb.Close()
		if fleet != nil {
			_ = fleet.Close()
		}
		return nil, err
	}

	sctx, stop := context.WithCancel(ctx)
	n.stop = stop
	n.wg.Go(func() {
		defer close(n.started)
		waitDone := make(chan struct{})
		n.wg.Go(func() { n.sayWaiting(sctx, waitDone) })
		e, closer, err := startNATSEngine(sctx, cfg, nb, fleet, version, log)
		close(waitDone)
		phase := ""
		if err != nil && sctx.Err() != nil {
			err, phase = nil, "stopped before it started" // asked to stop: not a failure
		}
		n.mu.Lock()
		n.e, n.closer, n.err, n.phase = e, closer, err, phase
		if st, ok := nb.Store.(*jsstore.Store); ok && err == nil {
			n.st = st
		}
		n.mu.Unlock()
		if err == nil {
			n.prober.Probe() // ready now, not at the next probe
		}
	})
	return n, nil
}

// sayWaiting logs, every 10 s until done, why the store is not open yet
// (the prober's reason: "waiting for 2 of 3 nodes"), so that a node left
// alone says what it waits for.
func (n *Server) sayWaiting(ctx context.Context, done <-chan struct{}) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
		st := n.prober.Status()
		n.log.Warn("server: still starting: waiting for JetStream to open the store", "state", st.State, "reason", st.Reason,
			"since", st.Since.UTC().Format(time.RFC3339))
	}
}

// Started is closed once the node has started, or failed to (Err).
func (n *Server) Started() <-chan struct{} { return n.started }

// Err is why the node could not start (nil while starting or once started).
func (n *Server) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Running says the engine has started.
func (n *Server) Running() bool { return n.engine() != nil }

// Readiness is the readiness as the prober last found it; nil without NATS
// (an in-process fleet is always ready).
func (n *Server) Readiness() func() health.Status {
	if n.prober == nil {
		return nil
	}
	return n.prober.Status
}

// why is what the node is doing while it has not started ("" once started).
func (n *Server) why() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return "could not start: " + n.err.Error()
	}
	return n.phase
}

// store is the node's JetStream store once started (nil before).
func (n *Server) store() *jsstore.Store {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}

func (n *Server) engine() *engine.Engine {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.e
}

// Backlog is the engine's host events and writes queued or being stored
// (engine.Backlog): 0, 0 before it has started.
func (n *Server) Backlog() (events, writes int) {
	if e := n.engine(); e != nil {
		return e.Backlog()
	}
	return 0, 0
}

// Close stops the start if under way, the prober, then the engine and
// everything it runs on.
func (n *Server) Close() error {
	n.stop()
	n.wg.Wait()
	if n.prober != nil {
		n.prober.Close()
	}
	n.mu.Lock()
	closer := n.closer
	n.mu.Unlock()
	if closer == nil {
		return nil // never started: a failed start closed what it had
	}
	return closer()
}

// backend is the engine, or an error saying why there is none yet.
func (n *Server) backend() (backend.Backend, error) {
	e, err := n.ready()
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ready is the started engine, or an error saying why there is none yet.
func (n *Server) ready() (*engine.Engine, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.e != nil:
		return n.e, nil
	case n.err != nil:
		return nil, fmt.Errorf("server could not start: %w", n.err)
	}
	return nil, errNotStarted{n.phase}
}

type errNotStarted struct{ phase string }

func (e errNotStarted) Error() string { return "server starting: " + e.phase }

var (
	_ backend.Backend            = (*Server)(nil)
	_ backend.HostLabelSetReader = (*Server)(nil)
)

func (n *Server) Info(ctx context.Context) (backend.Info, error) {
	b, err := n.backend()
	if err != nil {
		return backend.Info{}, err
	}
	return b.Info(ctx)
}

func (n *Server) Namespaces(ctx context.Context) ([]backend.NamespaceSummary, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Namespaces(ctx)
}

func (n *Server) Hosts(ctx context.Context, q backend.HostQuery) ([]backend.HostView, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Hosts(ctx, q)
}

// HostListEach is the engine's (backend.HostListReader): a host list
// without every process's whole status.
func (n *Server) HostListEach(ctx context.Context, q backend.HostQuery, fn func(*backend.HostView)) error {
	e, err := n.ready()
	if err != nil {
		return err
	}
	return e.HostListEach(ctx, q, fn)
}

// HostListSets is the engine's (backend.HostLabelSetReader): a host list
// with each host's labels as the inventory shares them.
func (n *Server) HostListSets(ctx context.Context, q backend.HostQuery, head func([]backend.ProcView, []model.LabelSet), fn func(*backend.HostView, model.LabelSet)) error {
	e, err := n.ready()
	if err != nil {
		return err
	}
	return e.HostListSets(ctx, q, head, fn)
}

func (n *Server) Processes(ctx context.Context, q backend.ProcQuery) ([]model.ProcessDef, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Processes(ctx, q)
}

// LendProcess is the engine's: one definition, lent read only.
func (n *Server) LendProcess(ctx context.Context, key string) (model.ProcessDef, bool, error) {
	e, err := n.ready()
	if err != nil {
		return model.ProcessDef{}, false, err
	}
	return e.LendProcess(ctx, key)
}

func (n *Server) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	b, err := n.backend()
	if err != nil {
		return err
	}
	return b.SaveProcess(ctx, def)
}

func (n *Server) DeleteProcess(ctx context.Context, key string) error {
	b, err := n.backend()
	if err != nil {
		return err
	}
	return b.DeleteProcess(ctx, key)
}

func (n *Server) Operate(ctx context.Context, req backend.OperateRequest) (model.Task, error) {
	b, err := n.backend()
	if err != nil {
		return model.Task{}, err
	}
	return b.Operate(ctx, req)
}

func (n *Server) Task(ctx context.Context, id string) (backend.TaskView, error) {
	b, err := n.backend()
	if err != nil {
		return backend.TaskView{}, err
	}
	return b.Task(ctx, id)
}

// TaskHead is the engine's: a task without its results, when the engine
// holds its run.
func (n *Server) TaskHead(ctx context.Context, id string) (model.Task, bool, error) {
	e, err := n.ready()
	if err != nil {
		return model.Task{}, false, err
	}
	return e.TaskHead(ctx, id)
}

func (n *Server) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Tasks(ctx, limit)
}

func (n *Server) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Watch(ctx, id, after)
}

func (n *Server) ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error) {
	b, err := n.backend()
	if err != nil {
		return model.Task{}, err
	}
	return b.ControlRoll(ctx, id, act)
}

func (n *Server) Cancel(ctx context.Context, id string) error {
	b, err := n.backend()
	if err != nil {
		return err
	}
	return b.Cancel(ctx, id)
}

func (n *Server) Events(ctx context.Context) (<-chan model.Event, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Events(ctx)
}

func (n *Server) RecentEvents(ctx context.Context, k int) ([]model.Event, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.RecentEvents(ctx, k)
}

func (n *Server) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Audit(ctx, q)
}

func (n *Server) Simulate(ctx context.Context, req backend.SimRequest) (model.SimOutcome, error) {
	b, err := n.backend()
	if err != nil {
		return model.SimOutcome{}, err
	}
	return b.Simulate(ctx, req)
}

func (n *Server) SetProcessGroups(ctx context.Context, req backend.GroupRequest) ([]backend.GroupResult, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.SetProcessGroups(ctx, req)
}

func (n *Server) ProcessGroups(ctx context.Context, q backend.GroupQuery) ([]model.ProcessGroup, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.ProcessGroups(ctx, q)
}

// defaultStoreDir is where a server keeps its JetStream state when
// [nats] store_dir is empty: $XDG_STATE_HOME/gseproc/jetstream, or
// ~/.local/state/gseproc/jetstream.
func defaultStoreDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("nats.store_dir: empty and no home directory for the default: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "gseproc", "jetstream"), nil
}

func (n *Server) Logs(ctx context.Context, q backend.LogQuery) (<-chan model.TailChunk, error) {
	b, err := n.backend()
	if err != nil {
		return nil, err
	}
	return b.Logs(ctx, q)
}
