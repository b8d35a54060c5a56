//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"gseproc/backend/config"
	"gseproc/backend/opledger"
	"gseproc/model"
)

// Version is reported in the agent's identity.
const Version = "gseproc-agent/1"

// Agent hosts the processes of one host.
type Agent struct {
	cfg     config.AgentConfig
	log     *slog.Logger
	host    model.Host
	agentID string // GSE 2.0 agent id, kept in the data dir
	m       machine
	regPath string
	// ops runs each op id once and answers repeats (OpsFile in DataDir).
	ops *opledger.Ledger

	// ctx lives from New to Close; watchers, retries, periodic schedules
	// and the sampler run under it and Close waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the state in memory (view.go: what a status op reads is
	// published under it and read without it).
	mu    agentLock
	procs map[string]*entry
	// maxProcs bounds the definitions procs takes (model.MaxHostProcs, a
	// server's bound on a heartbeat's statuses; opsem.Admit decides).
	maxProcs int
	// index is procs for readers without mu (a status op); entries are
	// added under mu, never removed.
	index sync.Map
	// groups are the process groups (namespace -> pool limits), kept in
	// groupsPath; poolBreaches counts each pool's samples over in a row.
	groups       map[string]model.GroupResource
	groupsPath   string
	groupsMu     sync.Mutex // one groups file write at a time (setGroup)
	poolBreaches map[string]int
	subs         map[*subscriber]struct{}

	// The registry writer (persist.go): regWant counts the changes made,
	// regDone those on disk; regFlushed is closed (and replaced) at every
	// write, regErr is its error. flushMu keeps writes one at a time.
	regKick    chan struct{}
	regLazy    chan struct{} // a supervisor's change (persistSupervisedLocked)
	regLazyDue bool          // regLazy sent since the last flush took the records
	regWant    uint64
	regDone    uint64
	regFlushed chan struct{}
	regErr     error
	regWrites  uint64 // attempted, for tests
	flushMu    sync.Mutex
	regEnc     regEncoder // the registry's encoding, record by record (flushMu)

	// stopReaper ends this agent's use of the orphan reaper (reaper.go),
	// when it runs one.
	stopReaper func()

	// tails bounds the log tails served at once (maxTails).
	tails chan struct{}

	started bool
	closed  bool
	dropped int
}

// entry is one process definition known to the agent.
type entry struct {
	key          string
	p            model.Process
	pGen         uint64         // a new one at every p set (procGen): the registry's encoder compares it
	pReg         *model.Process // p as set (a copy never changed): what hostedLocked takes
	hosted       bool
	registerTime int64
	lastOp       model.OpType
	units        []*unit
	op           chan struct{} // serializes operations and supervisor actions
	stopPeriodic context.CancelFunc
	logDir       string // captureDir(key), once rotateLogs needed it (a.mu)
	// view is what a status op reads (view.go), published under a.mu at
	// every change of what it shows.
	view atomic.Pointer[entryView]
}

// acquire takes e's op slot, waiting until ctx ends; false when it ended
// first. release gives the slot back.
func (e *entry) acquire(ctx context.Context) bool {
	select {
	case e.op <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (e *entry) release() { <-e.op }

// unit is one instance of a process.
type unit struct {
	e          *entry
	idx        int // 1-based
	pidPath    string
	state      model.ProcState
	pid        int
	tick       uint64 // start time of pid, ticks after boot
	lastStart  int64
	upSince    time.Time
	restarts   int
	attempts   int // consecutive restarts that did not stay up
	exitStatus int
	held       string // why it is not restarted: limit exceeded, given up
	done       bool   // one-shot finished cleanly
	msg        string
	gen        uint64 // bumped whenever what is watched changes
	stopWatch  context.CancelFunc
	own        *child // the agent's own child behind pid, if it is one

	lastTicks  uint64
	lastSample time.Time
	cpu, mem   float64
	rss        uint64
	threads    int
	breaches   int

	rot [2]rotLook // when rotateLogs looks next at its stdout, stderr
}

type subscriber struct {
	ch chan model.Event
}

// New builds an agent from cfg and loads its hosting registry from
// cfg.DataDir (created when missing). Supervision of what was hosted
// resumes with Run.
func New(cfg config.AgentConfig, log *slog.Logger) (*Agent, error) {
	return newBounded(cfg, log, model.MaxHostProcs)
}

// newBounded is New with at most maxProcs process definitions (a test's
// lower bound).
func newBounded(cfg config.AgentConfig, log *slog.Logger, maxProcs int) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent data_dir: %w", err)
	}
	host, err := cfg.Host()
	if err != nil {
		return nil, err
	}
	agentID, aerr := loadAgentID(cfg.DataDir)
	if aerr != nil {
		return nil, aerr
	}
	a := &Agent{
		cfg: cfg, host: host, agentID: agentID, m: readMachine(),
		log:          log.With("agent", host.AgentID()),
		regPath:      filepath.Join(cfg.DataDir, RegistryFile),
		procs:        map[string]*entry{},
		maxProcs:     maxProcs,
		groupsPath:   filepath.Join(cfg.DataDir, GroupsFile),
		poolBreaches: map[string]int{},
		subs:         map[*subscriber]struct{}{},
		regKick:      make(chan struct{}, 1),
		regLazy:      make(chan struct{}, 1),
		regFlushed:   make(chan struct{}),
		tails:        make(chan struct{}, maxTails),
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	recs, err := loadRegistry(a.regPath)
	if err != nil {
		a.cancel()
		return nil, err
	}
	if a.ops, err = opledger.Open(filepath.Join(cfg.DataDir, OpsFile), opledger.DefaultKeep); err != nil {
		a.cancel()
		return nil, err
	}
	if a.groups, err = loadGroups(a.groupsPath); err != nil {
		a.cancel()
		return nil, err
	}
	for _, r := range recs {
		if r.GSEProc == nil {
			a.log.Warn("registry entry without gseproc record skipped", "valuekey", r.ValueKey)
			continue
		}
		p := normalize(r.GSEProc.Process)
		e := a.entryLocked(p)
		e.hosted = true
		e.registerTime = r.GSEProc.RegisterTime
		e.lastOp = model.OpType(r.OperateType)
		for i, ir := range r.GSEProc.Instances {
			if i >= len(e.units) {
				break
			}
			u := e.units[i]
			u.pid, u.tick, u.held, u.done, u.restarts = ir.PID, ir.StartTick, ir.Held, ir.Done, ir.Restarts
			// Unknown until Run re-adopts it (an op before that settles it).
			u.state = model.ProcUnknown
			if u.held != "" || u.done {
				u.state = ir.State
				if u.state == "" || u.state.Up() {
					u.state = model.ProcStopped
				}
			}
		}
		publishLocked(e)
	}
	if n := len(a.procs); n > a.maxProcs {
		// An older agent stored more: all stay hosted and supervised (a
		// process is never dropped unsupervised), but a server keeps the
		// statuses of the first model.MaxHostProcs of them only, and no
		// new definition is taken (opsem.Admit) until fewer are known.
		a.log.Error("hosting registry holds more process definitions than an agent hosts: all are supervised, but a server shows the first ones only and no new definition is taken",
			"definitions", n, "max", a.maxProcs, "registry", a.regPath)
	}
	a.wg.Add(1)
	go a.persister()
	a.log.Info("agent ready", "agent_id", a.agentID, "hosted", len(recs), "registry", a.regPath, "cpus", a.m.ncpu, "mem_total", a.m.memTotal)
	return a, nil
}

// Identity is the host this agent serves, with its labels.
func (a *Agent) Identity() model.HostInfo {
	return model.HostInfo{Host: a.host, Labels: maps.Clone(a.cfg.Labels), State: model.AgentOnline,
		LastSeen: time.Now().Unix(), Version: Version, AgentID: a.agentID}
}

// Run re-adopts the hosted processes of the registry (by pid file and
// process start time; a dead or reused pid is restarted under the retry
// rules), samples resource usage and supervises until ctx ends. It never
// kills hosted processes on its way out.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errors.New("agent closed")
	}
	if a.started {
		a.mu.Unlock()
		return errors.New("agent already running")
	}
	a.started = true
	if a.cfg.Subreaper {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			a.log.Warn("agent.subreaper: cannot become a subreaper", "err", err)
		}
	}
	if shouldReap() {
		a.stopReaper = children.use()
		a.log.Info("reaping orphans: the agent is pid 1 or a subreaper")
	}
	var periodic []*entry
	for _, e := range a.sortedEntries() {
		if !e.hosted {
			continue
		}
		if e.p.Spec.Policy.AutoType == model.AutoPeriodic {
			periodic = append(periodic, e)
			continue
		}
		for _, u := range e.units {
			a.adoptLocked(u)
		}
	}
	for _, e := range periodic {
		for _, u := range e.units {
			a.adoptLocked(u)
		}
		if e.units[0].held == "" {
			a.startPeriodicLocked(e, false)
		}
	}
	a.persistLocked()
	a.wg.Add(1)
	a.mu.Unlock()
	go a.sampler()

	select {
	case <-ctx.Done():
	case <-a.ctx.Done():
	}
	return a.Close()
}

// adoptLocked re-attaches u to its process after an agent restart.
func (a *Agent) adoptLocked(u *unit) {
	if u.state != model.ProcUnknown {
		return // held or done on record, or an op settled it before Run
	}
	recorded := u.tick
	for _, pid := range []int{pidFromFile(u.pidPath), u.pid} {
		st, live := alive(pid)
		if !live || (recorded != 0 && st.StartTick != recorded && !a.missedRestart(u, pid, st, recorded)) {
			continue
		}
		if recorded == 0 { // no start time on record: the pid file's own age must fit
			if p, _, ok := a.probeLocked(u); !ok || p != pid {
				continue
			}
		}
		u.pid, u.tick, u.upSince = pid, st.StartTick, time.Now()
		a.setStateLocked(u, model.ProcRunning, "re-adopted at agent start, pid "+strconv.Itoa(pid))
		a.watchLocked(u)
		return
	}
	if u.e.p.Spec.Policy.AutoType == model.AutoPeriodic {
		a.setStateLocked(u, model.ProcExited, "no run alive at agent start")
		return
	}
	reason := "not running at agent start"
	if pid := pidFromFile(u.pidPath); pid > 0 && recorded != 0 {
		if st, live := alive(pid); live && st.StartTick != recorded {
			reason = fmt.Sprintf("pid %d was reused by another process (start time differs): not adopted", pid)
		}
	}
	u.pid, u.tick = -1, 0
	a.afterExitLocked(u, -1, reason)
}

// missedRestart reports whether pid, named by the pid file of u and not
// the process on record (started at tick recorded), is a restart the
// registry had not recorded yet when the agent stopped (registry writes
// are coalesced): the pid file was written after the recorded process
// started, by a process started later than it and no later than the
// write, that carries u's own environment (GSEPROC_AGENT_ID, GSEPROC_PROC,
// GSEPROC_INSTANCE: an agent's command for u started it). A stranger that
// took the pid, or that the file names, is refused.
func (a *Agent) missedRestart(u *unit, pid int, st procStat, recorded uint64) bool {
	filePid, mtime, err := readPidFile(u.pidPath)
	if err != nil || filePid != pid || st.StartTick <= recorded {
		return false
	}
	if !mtime.After(tickTime(recorded)) || tickTime(st.StartTick).After(mtime.Add(time.Second)) {
		return false
	}
	return hasEnv(pid, "GSEPROC_AGENT_ID="+a.host.AgentID(), "GSEPROC_PROC="+u.e.key,
		"GSEPROC_INSTANCE="+strconv.Itoa(u.idx))
}

func pidFromFile(path string) int {
	pid, _, err := readPidFile(path)
	if err != nil {
		return 0
	}
	return pid
}

// Close stops supervising (watchers, retries, schedules, subscribers) and
// waits for them. Hosted processes keep running.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		a.wg.Wait()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	stopReaper := a.stopReaper
	a.stopReaper = nil
	a.mu.Unlock()
	if stopReaper != nil {
		stopReaper()
	}
	if err := a.flush(); err != nil {
		a.log.Error("hosting registry not written at close", "err", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.procs {
		for _, u := range e.units {
			if u.own != nil {
				u.own.close()
			}
		}
	}
	if err := a.ops.Close(); err != nil {
		a.log.Warn("close op ledger", "err", err)
	}
	a.log.Info("agent closed; hosted processes keep running")
	return nil
}

// normalize fills what an op cannot do without. The server sends every
// definition with its policy defaults filled (the engine's registry is the
// one place they are applied); the agent uses the policy it receives as it
// is and only guards what no op can run without.
func normalize(p model.Process) model.Process {
	p = p.Clone()
	if p.Spec.Policy.OpTimeout <= 0 {
		p.Spec.Policy.OpTimeout = model.DefaultOpTimeout
	}
	if p.Spec.Policy.InstanceNum <= 0 || p.Spec.Policy.AutoType != model.AutoResident {
		p.Spec.Policy.InstanceNum = 1
	}
	if p.Spec.Control.ShellExt == "" {
		p.Spec.Control.ShellExt = "sh"
	}
	return p
}

// pidPathOf names instance idx's pid file.
func pidPathOf(p model.Process, idx int) string {
	if idx <= 1 {
		return p.Spec.Identity.PidPath
	}
	return p.Spec.Identity.PidPath + "." + strconv.Itoa(idx)
}

// entryLocked returns the entry for p, creating it, and brings its
// definition and instances up to date.
func (a *Agent) entryLocked(p model.Process) *entry {
	key := p.Key()
	e, ok := a.procs[key]
	if !ok {
		e = &entry{key: key, op: make(chan struct{}, 1)}
		a.procs[key] = e
		a.index.Store(key, e)
	}
	updateEntry(e, p)
	publishLocked(e)
	return e
}

// transientEntry describes p without making it known (a status query of
// a process the agent never operated on).
func transientEntry(p model.Process) *entry {
	e := &entry{key: p.Key(), op: make(chan struct{}, 1)}
	updateEntry(e, p)
	publishLocked(e) // not shared: no lock needed
	return e
}

// procGen numbers the definitions entries are given, process-wide, so
// that no two are ever alike (an entry forgotten and made again).
var procGen atomic.Uint64

func updateEntry(e *entry, p model.Process) {
	e.p = p
	e.pGen = procGen.Add(1)
	e.pReg = &p // a copy of its own, which the registry writer shares
	n := p.Spec.Policy.InstanceNum
	for len(e.units) < n {
		i := len(e.units) + 1
		e.units = append(e.units, &unit{e: e, idx: i, state: model.ProcStopped, pid: -1})
	}
	for len(e.units) > n && !e.units[len(e.units)-1].state.Up() {
		e.units = e.units[:len(e.units)-1]
	}
	for _, u := range e.units {
		u.pidPath = pidPathOf(p, u.idx)
	}
}

func (a *Agent) sortedEntries() []*entry {
	out := make([]*entry, 0, len(a.procs))
	for _, e := range a.procs {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// setStateLocked moves u to state, logging the transition, and publishes
// it with whatever else of u changed in the same critical section.
func (a *Agent) setStateLocked(u *unit, to model.ProcState, reason string) {
	from := u.state
	u.state = to
	defer publishLocked(u.e)
	if from == to && u.msg == reason {
		return
	}
	u.msg = reason
	a.log.Info("process state", "proc", u.e.key, "instance", u.idx, "from", string(from), "to", string(to),
		"pid", u.pid, "reason", reason)
}

// SubscribeEvents calls fn for every event until ctx ends or the agent
// closes. Events are queued per subscriber (event_buffer); when fn falls
// behind, the oldest are dropped, never the agent blocked.
func (a *Agent) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	s := &subscriber{ch: make(chan model.Event, a.cfg.EventBuffer)}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.subs[s] = struct{}{}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.subs, s)
			a.mu.Unlock()
		}()
		for {
			select {
			case ev := <-s.ch:
				fn(ev)
			case <-ctx.Done():
				return
			case <-a.ctx.Done():
				return
			}
		}
	}()
}

// emitLocked publishes an event to every subscriber without blocking.
func (a *Agent) emitLocked(u *unit, kind model.EventKind, msg string, value float64) {
	ev := model.Event{Time: time.Now(), Host: a.host, ProcKey: u.e.key, Kind: kind, Message: msg, Value: value}
	a.log.Info("event", "proc", u.e.key, "instance", u.idx, "kind", string(kind), "message", msg, "value", value)
	for s := range a.subs {
		for {
			select {
			case s.ch <- ev:
			default:
				select {
				case <-s.ch: // drop the oldest
					a.dropped++
					a.log.Warn("event subscriber behind: oldest event dropped", "dropped_total", a.dropped)
				default:
				}
				continue
			}
			break
		}
	}
}
