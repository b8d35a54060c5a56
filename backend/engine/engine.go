package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/backend"
	"gseproc/backend/config"
	"gseproc/model"
)

var (
	_ backend.Backend            = (*Engine)(nil)
	_ backend.HostLabelSetReader = (*Engine)(nil)
)

// Engine is the embedded backend: registry, tasks and events over a
// Dispatcher, an Inventory and a Store.
type Engine struct {
	cfg      config.EngineConfig
	d        Dispatcher
	inv      Inventory
	st       Store
	log      *slog.Logger
	now      func() time.Time
	readOnly bool
	version  string
	sim      SimControl // nil: the fleet is real agents

	// Leases, when st is a Leaser (a store shared by several engines).
	owner    string
	leaser   Leaser
	leaseTTL time.Duration
	board    CancelBoard  // cancels across engines, when st is one
	fencer   Fencer       // fenced writes, when st is one (and a Leaser)
	creator  TaskCreator  // a new task's writes together, when st is one (and a Leaser)
	ender    TaskEnder    // a finished task's lease release and audit entry together, when st is one (and a Leaser)
	modifier TaskModifier // read-modify-write of a task, when st is one
	rolls    RollBoard    // rolls' controls, when st is one

	ctx    context.Context // ends on Close; every goroutine watches it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu     sync.RWMutex
	runs   map[string]*run       // unfinished tasks
	recent recentRuns            // tasks just stored complete, still in memory
	claims map[string]*leaseHold // leases acquired for tasks being created or taken over
	// statuses are the last known ones, and what the store has, under
	// locks of their own (not mu: every result of a fan-out records a
	// status, and mu is the engine's, taken by every listing and watch).
	statuses lastStatuses
	// statusSeed makes the fingerprints of stored statuses (printStatus).
	statusSeed maphash.Seed
	subs       map[int]chan model.Event
	nextSub    int
	started    bool

	events eventQueue // events waiting to be stored and fanned out (events.go)

	hosts    model.HostIndex // where hosts sit in the definitions' lists
	layouts  hostLayouts     // the last full listings' layouts (hostlayout.go)
	nsCounts nsCounts        // the last namespace summary (registry.go)
	writes   writer          // results and statuses being stored (writer.go)
	running  atomic.Int32    // len(runs), set under mu, read by the writer without it
	blocks   slotBlocks      // room for results handed to writes (slotLocked)
	work     chan func()     // a share of a fan-out for an idle worker (workers.go)
	procJSON procJSONs       // definitions' encodings sent to hosts (procjson.go)
}

// Option configures an Engine.
type Option func(*Engine)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(e *Engine) {
		if l != nil {
			e.log = l
		}
	}
}

// WithReadOnly refuses every change: mutating ops, SaveProcess, DeleteProcess.
func WithReadOnly(ro bool) Option { return func(e *Engine) { e.readOnly = ro } }

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option {
	return func(e *Engine) {
		if now != nil {
			e.now = now
		}
	}
}

// WithOwner sets the id this engine holds task leases under (default:
// host name, pid and a random suffix). It must be unique among the
// engines sharing a store.
func WithOwner(id string) Option {
	return func(e *Engine) {
		if id != "" {
			e.owner = id
		}
	}
}

// WithSimulator lets Simulate drive the simulated fleet sc (without it,
// Simulate refuses: the fleet is real agents).
func WithSimulator(sc SimControl) Option { return func(e *Engine) { e.sim = sc } }

// WithVersion sets the version Info reports.
func WithVersion(v string) Option { return func(e *Engine) { e.version = v } }

// checkConfig refuses the [engine] fields the engine needs set, naming
// each: their defaults are the config's, not the engine's.
func checkConfig(cfg config.EngineConfig) error {
	var errs []error
	if cfg.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("engine: concurrency %d must be >= 1 ([engine] concurrency, filled by config.Load)", cfg.Concurrency))
	}
	if cfg.LeaseTTL.D() <= 0 {
		errs = append(errs, fmt.Errorf("engine: lease TTL %s must be > 0 ([engine] lease_ttl, filled by config.Load)", cfg.LeaseTTL.D()))
	}
	return errors.Join(errs...)
}

// New returns an engine; call Start before using it and Close when done.
// The engine does not own st: its creator closes it after Close.
//
// cfg's defaults are the [engine] section's, applied once (config.Default,
// filled by config.Load): Start refuses a zero Concurrency or LeaseTTL
// instead of defaulting it a second time.
func New(cfg config.EngineConfig, d Dispatcher, inv Inventory, st Store, opts ...Option) *Engine {
	e := &Engine{
		cfg: cfg, d: d, inv: inv, st: st,
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:        time.Now,
		runs:       make(map[string]*run),
		claims:     make(map[string]*leaseHold),
		statusSeed: maphash.MakeSeed(),
		subs:       make(map[int]chan model.Event),
		work:       make(chan func()),
	}
	e.leaseTTL = cfg.LeaseTTL.D()
	_, keeps := st.(StatusKeeper)
	e.writes.init(!keeps) // statuses kept in memory cost nothing to hold back
	e.statuses.init()
	e.events.init()
	e.leaser, _ = st.(Leaser)
	e.board, _ = st.(CancelBoard)
	e.rolls, _ = st.(RollBoard)
	e.modifier, _ = st.(TaskModifier)
	if e.leaser != nil {
		e.fencer, _ = st.(Fencer)
		e.creator, _ = st.(TaskCreator)
		e.ender, _ = st.(TaskEnder)
	}
	e.owner = ownerID()
	for _, o := range opts {
		o(e)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// Start loads the last known statuses, resumes the tasks the store says are
// unfinished (their non-final targets are dispatched again) and subscribes
// to the dispatcher's and inventory's events when they are EventSources.
func (e *Engine) Start(ctx context.Context) error {
	if err := checkConfig(e.cfg); err != nil {
		return err
	}
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("engine: already started")
	}
	e.started = true
	e.mu.Unlock()

	// Watched before they are loaded, so that none another engine stores
	// meanwhile is missed.
	var stored <-chan HostStatus
	if w, ok := e.st.(StatusWatcher); ok {
		var err error
		if stored, err = w.WatchProcStatuses(e.ctx); err != nil {
			return fmt.Errorf("engine start: watch statuses: %w", err)
		}
	}
	sts, err := e.st.ProcStatuses(ctx)
	if err != nil {
		return fmt.Errorf("engine start: load statuses: %w", err)
	}
	for h, l := range sts {
		sh := e.statuses.shard(h)
		sh.mu.Lock()
		for i := range l {
			s := &l[i]
			sh.put(h, knownStatus{st: s, stored: printStatus(e.statusSeed, s)})
		}
		sh.mu.Unlock()
	}

	e.wg.Add(2)
	go e.writeLoop()
	go e.eventLoop()
	if stored != nil {
		e.track(func() {
			for hs := range stored {
				e.statusStored(hs)
			}
		})
	}
	// Subscribed before Start returns, so no event emitted afterwards is lost.
	for _, src := range e.eventSources() {
		if a, ok := src.(AckedEventSource); ok {
			a.SubscribeAckedEvents(e.ctx, e.onAckedEvent)
			continue
		}
		src.SubscribeEvents(e.ctx, e.onEvent)
	}
	e.subscribeLate()

	if e.board != nil {
		// Watched before resuming, so that no cancel recorded after a
		// resumed task's check is missed.
		ids, err := e.board.WatchCancels(e.ctx)
		if err != nil {
			return fmt.Errorf("engine start: watch cancels: %w", err)
		}
		e.track(func() { e.cancelLoop(ids) })
	}
	if e.rolls != nil {
		// Watched before resuming, like the cancels.
		ids, err := e.rolls.WatchRollControls(e.ctx)
		if err != nil {
			return fmt.Errorf("engine start: watch roll controls: %w", err)
		}
		e.track(func() { e.rollLoop(ids) })
	}
	if e.leaser != nil {
		// Before resuming: a lease taken early in a long resume is renewed
		// while the later tasks are resumed (they are claimed meanwhile).
		e.track(e.leaseLoop)
	}
	if err := e.resume(ctx); err != nil {
		return fmt.Errorf("engine start: %w", err)
	}
	return nil
}

// ownerID is a lease owner id unique to this engine: host, pid, random.
func ownerID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Owner is the id this engine holds task leases under.
func (e *Engine) Owner() string { return e.owner }

// eventSources returns the distinct EventSources among d and inv.
func (e *Engine) eventSources() []EventSource {
	var out []EventSource
	ds, dok := e.d.(EventSource)
	is, iok := e.inv.(EventSource)
	if dok {
		out = append(out, ds)
	}
	if iok && !(dok && sameValue(ds, is)) {
		out = append(out, is)
	}
	return out
}

func sameValue(a, b any) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}

// Seed puts the definitions that are not in the registry yet (by key):
// the simulated fleet's, at start. What it added (or failed to add) is
// recorded in the audit trail, as one entry naming every key added.
func (e *Engine) Seed(ctx context.Context, defs []model.ProcessDef) error {
	have, err := e.st.Processes(ctx)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	keys := make(map[string]bool, len(have))
	for _, d := range have {
		keys[d.Process.Key()] = true
	}
	var added, nss []string
	for _, d := range defs {
		if keys[d.Process.Key()] {
			continue
		}
		d.Rev = 0
		if d.Updated == 0 {
			d.Updated = e.now().Unix()
		}
		if err = e.st.PutProcess(ctx, d); err != nil {
			err = fmt.Errorf("seed %s: %w", d.Process.Key(), err)
			break
		}
		keys[d.Process.Key()] = true
		added = append(added, d.Process.Key())
		nss = append(nss, d.Process.Meta.Namespace)
	}
	if len(added) > 0 || err != nil {
		en := model.AuditEntry{Actor: actor(ctx, "", "seed"), Action: model.AuditSeed, Namespaces: nss,
			Targets: added, TargetCount: len(added)}
		en.Result, _ = outcome(err)
		en.Summary = fmt.Sprintf("%d definitions of the simulated fleet added (%d were present)", len(added), len(have))
		if err != nil {
			en.Summary += "; then: " + err.Error()
		}
		if rerr := e.record(ctx, en); rerr != nil && err == nil {
			err = fmt.Errorf("seed: added %d definitions, but %w", len(added), rerr)
		}
	}
	if err != nil {
		return err
	}
	e.log.Info("registry seeded", "added", len(added), "present", len(have))
	return nil
}

// Close stops every task's fan-out and every subscription and waits for
// their goroutines. Targets in flight stay unfinished in the store, so a
// durable store resumes them on the next Start.
func (e *Engine) Close() error {
	e.once.Do(func() {
		// Cancel under mu: every goroutine added after a ctx check under mu
		// (launch, track, Events) is then either refused or counted before Wait.
		e.mu.Lock()
		e.cancel()
		e.mu.Unlock()
		e.wg.Wait()
		e.releaseLeases()
	})
	return nil
}

// Info describes the engine.
func (e *Engine) Info(ctx context.Context) (backend.Info, error) {
	total, online, err := e.hostCounts(ctx)
	if err != nil {
		return backend.Info{}, fmt.Errorf("info: hosts: %w", err)
	}
	defs, err := e.definitions(ctx)
	if err != nil {
		return backend.Info{}, fmt.Errorf("info: processes: %w", err)
	}
	info := backend.Info{Mode: "embedded", ReadOnly: e.readOnly, Hosts: total, Online: online, Processes: len(defs), Version: e.version}
	// A run is forgotten a little after it completes (its task stored,
	// its lease released); complete runs are not counted, so a watcher
	// that saw its task end never reads it as still running.
	e.mu.RLock()
	for _, r := range e.runs {
		r.mu.Lock()
		if !r.done && !r.lost {
			info.Running++
		}
		r.mu.Unlock()
	}
	e.mu.RUnlock()
	return info, nil
}

// hostCounts is the number of hosts and of those online: counted by the
// inventory when it can (HostCounter), else from its listing.
func (e *Engine) hostCounts(ctx context.Context) (total, online int, err error) {
	if c, ok := e.inv.(HostCounter); ok {
		return c.HostCounts(ctx)
	}
	hosts, err := e.inv.Hosts(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, h := range hosts {
		if h.State == model.AgentOnline {
			online++
		}
	}
	return len(hosts), online, nil
}

// Runs is the number of unfinished tasks this engine runs (holds the
// lease of, on a shared store). It touches nothing but memory.
func (e *Engine) Runs() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.runs)
}

// runsChangedLocked is told that e.runs changed (e.mu held for writing):
// the writer holds statuses back while a run is in flight, and stores them
// once none is.
func (e *Engine) runsChangedLocked() {
	e.running.Store(int32(len(e.runs)))
	if len(e.runs) == 0 {
		e.writes.poke()
	}
}

// runningRuns is how many runs are in flight, without e.mu.
func (e *Engine) runningRuns() int { return int(e.running.Load()) }

// Backlog is how many host events and how many writes (results, last
// known statuses) this engine has queued or is storing now: both 0 once
// what it was handed is stored. A benchmark waits on it for start-up's
// events (100,000 agents coming online) to be stored before it measures
// an op, and /metrics exports it. It touches nothing but memory.
func (e *Engine) Backlog() (events, writes int) {
	return e.events.backlog(), e.writes.backlog()
}

func (e *Engine) refuseReadOnly(what string) error {
	if e.readOnly {
		return fmt.Errorf("%s: %w", what, model.ErrReadOnly)
	}
	return nil
}

// recordStatus updates the last known status of a process on a host; the
// writer stores it when storeStatus says the stored copy is out of date.
// st is kept, not copied: no one changes it after (a status op's result
// shares it).
func (e *Engine) recordStatus(h model.Host, st *model.ProcStatus) {
	// Printed before the lock: every result of a fan-out records a status,
	// and the print (a hash of the whole status) held the lock for most
	// of its time (58% of the mutex delay of an op over 10,000 hosts).
	p := printStatus(e.statusSeed, st)
	sh := e.statuses.shard(h)
	sh.mu.Lock()
	k, had := sh.get(h, st.ProcKey)
	store := !had || storeStatus(k.stored, p)
	if had {
		shareTexts(st, k.st)
	}
	k.st = st
	if store {
		k.stored = p
	}
	sh.put(h, k)
	sh.mu.Unlock()
	if store {
		e.enqueue(write{status: st, host: h})
	}
}

// shareTexts makes st's texts that say what was's say was's: a host's
// status, reported again and again by every op, keeps one copy of its
// version and command line, not one per report.
func shareTexts(st, was *model.ProcStatus) {
	if st.ProcName == was.ProcName {
		st.ProcName = was.ProcName
	}
	if st.Version == was.Version {
		st.Version = was.Version
	}
	if st.Cmdline == was.Cmdline {
		st.Cmdline = was.Cmdline
	}
	if st.Message == was.Message {
		st.Message = was.Message
	}
}

// statusNotStored is told of a status whose write failed: the store does
// not have it, so the next status of that process is stored whatever it
// says (else a change written during a store outage stayed unwritten
// while only its readings changed).
func (e *Engine) statusNotStored(hs HostStatus) {
	p := printStatus(e.statusSeed, &hs.Status)
	sh := e.statuses.shard(hs.Host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if k, ok := sh.get(hs.Host, hs.Status.ProcKey); ok && k.stored == p {
		k.stored = statusPrint{}
		sh.put(hs.Host, k)
	}
}

// statusStored is told of a status the store now holds, written by this
// engine or another (StatusWatcher): it is what the store has, so the
// next status is compared with it; it is the last known status unless a
// newer report is known here.
func (e *Engine) statusStored(hs HostStatus) {
	p := printStatus(e.statusSeed, &hs.Status)
	sh := e.statuses.shard(hs.Host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k, had := sh.get(hs.Host, hs.Status.ProcKey)
	// The status this engine holds already (its own write, read back)
	// stays the one held: not a second copy of every status stored (nor
	// a copy made before the look: ~19 MB of allocations for the first
	// op over 100,000 hosts, each status read back).
	if !had || (hs.Status.ReportTime >= k.st.ReportTime && *k.st != hs.Status) {
		st := hs.Status
		k.st = &st
	}
	k.stored = p
	sh.put(hs.Host, k)
}

// lastStatuses are the last known statuses by host, in shards each under
// a lock of its own: every result of a fan-out records one, and its 2,048
// workers queued on one lock (recordStatus was 40% of the mutex delay of
// a status op over 10,000 hosts at load 30, the lock handed from one
// waiter to the next).
type lastStatuses struct {
	seed   maphash.Seed
	shards [statusShards]statusShard
}

type statusShard struct {
	mu sync.RWMutex
	// m holds a host's known statuses in a short slice: a map keyed by
	// (host, process) was 25.7 MB for the 228,000 processes of 100,000
	// hosts, a host's few processes are found by a scan.
	m map[model.Host][]knownStatus
}

// get is the known status of process key on h. The shard's lock must be held.
func (s *statusShard) get(h model.Host, key string) (knownStatus, bool) {
	for _, k := range s.m[h] {
		if k.st.ProcKey == key {
			return k, true
		}
	}
	return knownStatus{}, false
}

// put makes k the known status of process k.st.ProcKey on h. The shard's
// lock must be held for writing.
func (s *statusShard) put(h model.Host, k knownStatus) {
	l := s.m[h]
	for i := range l {
		if l[i].st.ProcKey == k.st.ProcKey {
			l[i] = k
			return
		}
	}
	s.m[h] = append(l, k)
}

const statusShards = 64

func (x *lastStatuses) init() {
	x.seed = maphash.MakeSeed()
	for i := range x.shards {
		x.shards[i].m = make(map[model.Host][]knownStatus)
	}
}

// shard is h's shard.
func (x *lastStatuses) shard(h model.Host) *statusShard {
	return &x.shards[(maphash.String(x.seed, h.IP)+uint64(h.CloudID))%statusShards]
}

// knownStatus is a process's last known status on a host (st) and the
// fingerprint of the one last handed to the store (stored; its zero: the
// store may not have it).
type knownStatus struct {
	st     *model.ProcStatus // never nil; replaced whole, never changed
	stored statusPrint
}

// statusPrint stands for a stored status (a full copy per process doubled
// the memory of the last known statuses): a fingerprint of what it says
// (said, never 0), and its report time.
type statusPrint struct {
	said uint64
	at   int64
}

// printStatus is st's statusPrint. What a status says is everything but
// its readings (cpu, memory, threads) and report time; its start time
// counts as the instant it names, whatever its zone.
//
// Each field is written by hand (TestPrintStatusFields checks every field
// of model.ProcStatus is, or is a reading): maphash.WriteComparable of the
// whole status copied it to the heap and walked it by its type, ~0.5 us
// and an allocation for every result of every op.
func printStatus(seed maphash.Seed, st *model.ProcStatus) statusPrint {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	num := func(n int64) {
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		_, _ = h.Write(b[:])
	}
	str := func(s string) { // its length first: "ab"+"c" is not "a"+"bc"
		num(int64(len(s)))
		_, _ = h.WriteString(s)
	}
	str(st.ProcKey)
	str(st.ProcName)
	str(string(st.State))
	num(int64(st.PID))
	if st.Hosted {
		num(1)
	} else {
		num(0)
	}
	num(st.StartTime.Unix())
	num(int64(st.StartTime.Nanosecond()))
	num(st.RegisterTime)
	num(st.LastStartTime)
	num(int64(st.Restarts))
	num(int64(st.ExitStatus))
	str(st.Version)
	str(st.Cmdline)
	str(st.Message)
	return statusPrint{said: max(h.Sum64(), 1), at: st.ReportTime}
}

// statusRefresh is how old (by report time) the stored copy of a last
// known status gets while only its readings change (usage, report time)
// before it is stored again.
const statusRefresh = 5 * 60 // seconds

// storeStatus reports whether a status (st, its print) is to be stored
// over the one the store has (stored): when what it says changed (state,
// pid, start, restarts, exit status, version ... everything but the
// readings: cpu, memory, threads and report time), when stored is
// statusRefresh old, or when the store may not have it. A status op over
// a fleet whose processes did not change then stores no status: each
// result stores the status it read, and the hosts' heartbeats carry the
// current readings.
func storeStatus(stored, st statusPrint) bool {
	if stored.said == 0 || st.at-stored.at >= statusRefresh || st.at < stored.at {
		return true
	}
	return st.said != stored.said
}

// status returns the last known status of key on h.
func (e *Engine) status(h model.Host, key string) (model.ProcStatus, bool) {
	sh := e.statuses.shard(h)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	k, ok := sh.get(h, key)
	if !ok {
		return model.ProcStatus{}, false
	}
	return *k.st, true
}
