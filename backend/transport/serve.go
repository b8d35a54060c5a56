package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// AgentHandler is one host's agent as the transport serves it. The real
// agent (backend/agent) satisfies it; ServeFleet presents each simulated
// host as one.
type AgentHandler interface {
	Identity() model.HostInfo
	Handle(ctx context.Context, req model.AgentRequest) model.AgentReply
	Statuses() []model.ProcStatus
	// SubscribeEvents calls fn for every event until ctx ends (it may block
	// until then or return at once). fn does not block.
	SubscribeEvents(ctx context.Context, fn func(model.Event))
}

// ServeOptions tune the agent side. HeartbeatInterval is the config's
// ([nats] heartbeat_interval, its default there, once: config.Load fills
// it); serving refuses 0 rather than default it again. The others are not
// in the config: their defaults are here, and only here.
type ServeOptions struct {
	// HeartbeatInterval is how often a heartbeat is sent ([nats]
	// heartbeat_interval) until a server tells another (BeatSubject,
	// taken within takeHint's bounds).
	HeartbeatInterval time.Duration
	// EventBuffer bounds the events kept until JetStream acknowledges
	// them (default 10,000); beyond it the oldest are dropped and counted.
	EventBuffer int
	// EventDir is where the events not acknowledged yet are kept on disk
	// (the agent's data dir's "events"): published again after a restart.
	// Empty: in memory only (a simulated fleet).
	EventDir string
	// MaxConcurrent bounds the ops handled at once (default 256; 4096 for a fleet).
	MaxConcurrent int
	// FullEvery: a heartbeat carries the host's identity and process
	// statuses when they changed since the last full one (a process's
	// state, pid, hosting, restarts, version, command line; the agent's
	// labels, version, id), on (re)connect, on a server's hello and at
	// least every FullEvery beats (default 12: a minute at 5 s, when usage
	// figures are refreshed); the others are keepalives (an empty message).
	FullEvery int
	Logger    *slog.Logger

	// legacySubjects makes an agent subscribe to its op, cancel and evack
	// subjects one by one, as agents from before the inbox did (tests of
	// an old agent against this server).
	legacySubjects bool
}

// prepare refuses an unset HeartbeatInterval and fills the defaults of
// the fields the config does not carry (maxConc: MaxConcurrent's).
func (o *ServeOptions) prepare(maxConc int) error {
	if o.HeartbeatInterval <= 0 {
		return fmt.Errorf("serve: HeartbeatInterval %s must be > 0 ([nats] heartbeat_interval, filled by config.Load)", o.HeartbeatInterval)
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 10_000
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = maxConc
	}
	if o.FullEvery <= 0 {
		o.FullEvery = 12
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ServeAgent serves a on nc until ctx ends: it answers ops on the host's op
// subject (each in its own goroutine), publishes a heartbeat every interval
// and the agent's events as they happen. While the server is unreachable it
// never blocks the agent: events are buffered (bounded) and published on
// reconnect, followed by a full heartbeat that says how many were late or
// dropped. On return it has sent a leaving heartbeat (when connected) and
// waited for the ops in flight. It fails when it cannot subscribe, and
// when nc is closed for good (ErrClosed; ServeAgentOn serves on).
func ServeAgent(ctx context.Context, nc *nats.Conn, a AgentHandler, opts ServeOptions) error {
	return ServeAgentOn(ctx, FixedLink(nc), a, opts)
}

// ServeAgentOn is ServeAgent on the connections of l: when one is closed
// for good, it serves on the next one l dials (the op subscription made
// again, events buffered meanwhile, a full heartbeat first).
func ServeAgentOn(ctx context.Context, l *Link, a AgentHandler, opts ServeOptions) error {
	if err := opts.prepare(256); err != nil {
		return err
	}
	info := a.Identity()
	id, err := hostID(info.Host)
	if err != nil {
		return fmt.Errorf("serve agent: %w", err)
	}
	log := opts.Logger.With("host", id.String())
	s := newSession(l, opts, log)
	s.setAckHost(id)
	if opts.EventDir != "" {
		if err := s.openSpool(opts.EventDir, id); err != nil {
			return fmt.Errorf("serve agent %s: %w", id, err)
		}
		defer func() { _ = s.spool.close() }()
	}

	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	// Ops run at most MaxConcurrent at once, and status ops as many apart
	// (looksOnly): a status never waits for a slot behind ops (a start's
	// check takes seconds) and an op never waits in NATS's delivery
	// goroutine, which delivers the subscription's messages one at a time.
	ops, looks := newRunner(opts.MaxConcurrent, &wg), newRunner(opts.MaxConcurrent, &wg)
	inflight := newInflight()
	onOp := func(m *nats.Msg) {
		var req model.AgentRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			respond(m, model.AgentReply{Code: model.CodeIllegalOp, Message: fmt.Sprintf("decode request: %v", err)}, log)
			return
		}
		var octx context.Context
		var done func()
		if req.CancelOp {
			// A cancel sent as a request (by a server that took the task
			// over): the op stops if it runs, or starts cancelled should
			// it still come; the agent answers the op's outcome.
			log.Info("agent: op cancelled by a server that took its task over", "task", req.TaskID, "op_id", req.OpID,
				"running", inflight.cancel(req.OpID))
			octx, done = hctx, func() {}
		} else {
			octx, done = inflight.begin(hctx, req.OpID)
		}
		run := ops
		if looksOnly(req) {
			run = looks
		}
		if !run.submit(func() {
			defer done()
			respond(m, a.Handle(octx, req), log)
		}) {
			// The agent is stopping: it has waited, or is waiting, for the
			// ops it took, and runs no other. Not answered, as one that
			// came after the unsubscribe: NATS was already delivering it.
			done()
			log.Info("agent: op not run: the agent is stopping", "task", req.TaskID, "op_id", req.OpID)
		}
	}
	onCancel := func(m *nats.Msg) {
		var c model.CancelRequest
		if err := json.Unmarshal(m.Data, &c); err != nil || c.OpID == "" {
			log.Warn("agent: cancel request not understood; ignored", "err", err)
			return
		}
		log.Info("agent: op cancelled by the server", "task", c.TaskID, "op_id", c.OpID, "running", inflight.cancel(c.OpID))
	}
	// The interval a server tells the agent (on its inbox, which no
	// credential serving hosts may publish on; another host can steer a
	// JetStream acknowledgement there, refused below) is taken within
	// bounds (takeHint); its next
	// beat then comes after a random part of it, so that a fleet told at
	// once does not beat at once.
	onBeat := func(m *nats.Msg) {
		h, err := decodeBeatHint(m.Data)
		if err != nil {
			log.Warn("agent: heartbeat interval from the server not understood; ignored", "err", err)
			return
		}
		d, ok := takeHint(opts.HeartbeatInterval, h.Interval)
		if !ok {
			log.Warn("agent: heartbeat interval from the server out of bounds; ignored", "interval", h.Interval,
				"min", min(opts.HeartbeatInterval, minBeatHint), "max", max(opts.HeartbeatInterval, maxBeatInterval))
			return
		}
		if s.setInterval(d) {
			log.Info("agent: heartbeat interval set by the server", "interval", d)
			s.rearm(beatPhase(d, rand.Float64()))
		}
	}
	subs := &agentSubs{id: id, pfx: strings.TrimSuffix(InboxSubject(id), ">"), onOp: onOp, onCancel: onCancel,
		onAck: s.onAck, onBeat: onBeat, legacy: opts.legacySubjects, log: log}
	s.ownAcks = true
	if err := subs.subscribe(s.conn()); err != nil {
		subs.unsubscribe()
		return fmt.Errorf("serve agent %s: %w (is this credential bound to host %s?)", id, err, id)
	}
	defer subs.unsubscribe()
	verify := func() error {
		if err := subs.verify(s.conn()); err != nil {
			return fmt.Errorf("serve agent %s: %w (is this credential bound to host %s?)", id, err, id)
		}
		return nil
	}
	// attach subscribes again on a new connection.
	attach := func(_ context.Context, nc *nats.Conn) error {
		if err := subs.subscribe(nc); err != nil {
			return fmt.Errorf("serve agent %s: %w", id, err)
		}
		return nil
	}
	plan := newBeatPlan(opts.FullEvery, 0)
	hb := func(full bool, late, dropped int, leaving bool) {
		// Hints: told only on the inbox (not on the three subjects).
		h := Heartbeat{Info: a.Identity(), Time: time.Now(), Interval: s.interval(), Hints: subs.inbox, Full: full,
			Reconnected: late, Dropped: dropped, Leaving: leaving}
		if !leaving {
			h.Statuses = a.Statuses()
		}
		h.Info.Host = id.Host()
		if !plan.next(full || leaving, heartbeatPrint(h.Info, h.Statuses)) {
			s.publish(HeartbeatSubject(id), nil)
			return
		}
		s.publishJSON(HeartbeatSubject(id), h)
	}
	// The agent's events go out on its own subject: an event naming no host
	// is its own, one naming another host is dropped.
	events := func(ctx context.Context, fn func(model.Event)) {
		a.SubscribeEvents(ctx, func(e model.Event) {
			if e.Host.IP == "" {
				e.Host = id.Host()
			}
			if !sameHost(e.Host, id) {
				log.Warn("agent: event names another host; dropped", "event_host", e.Host.String(), "kind", string(e.Kind))
				return
			}
			fn(e)
		})
	}
	err = s.run(ctx, l, events, hb, nil, attach, verify)
	subs.unsubscribe()
	cancel()
	// NATS may still be in onOp with a message it took before the
	// unsubscribe: the runners refuse it from here, so that wg counts
	// every op that runs before Wait (an Add after or during Wait would
	// run it after ServeAgentOn returned).
	ops.stop()
	looks.stop()
	wg.Wait()
	hb(false, 0, 0, true)
	if nc := s.conn(); nc.IsConnected() {
		_ = nc.FlushTimeout(time.Second)
	}
	return err
}

// agentSubs are the subscriptions an agent serves its host on: one on
// the host's inbox (InboxSubject), or, where NATS refuses it (a server
// from before the inbox, whose credentials grant only the op, cancel and
// evack subjects, or a node of a cluster not upgraded yet), those three
// one by one, as agents did before. Either way the server publishes on
// the same subjects, and both kinds of agent work against either server.
// Used by one goroutine at a time (ServeAgentOn's, then its run's).
type agentSubs struct {
	id                    model.HostID
	pfx                   string // the host's subjects' start: InboxSubject without ">"
	onOp, onCancel, onAck nats.MsgHandler
	onBeat                nats.MsgHandler // the server's heartbeat interval (inbox only)
	legacy                bool            // the three subjects only (ServeOptions.legacySubjects)
	log                   *slog.Logger

	subs  []*nats.Subscription
	inbox bool // subs is the inbox's one
}

// subscribe subscribes on nc (a new connection: the subscriptions of
// the one before went with it): to the inbox, else to the three
// subjects; it fails when NATS refuses those.
func (a *agentSubs) subscribe(nc *nats.Conn) error {
	a.subs, a.inbox = nil, false
	if !a.legacy {
		subj := InboxSubject(a.id)
		sub, err := nc.Subscribe(subj, a.onInbox)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		if refused(nc, subj) == nil {
			a.subs, a.inbox = []*nats.Subscription{sub}, true
			return nil
		}
		_ = sub.Unsubscribe()
		a.log.Info("agent: NATS does not grant the host's inbox (a server from before it); serving on its op, cancel and evack subjects", "inbox", subj)
	}
	return a.subscribeEach(nc)
}

// subscribeEach subscribes to the op, cancel and evack subjects, each
// checked before the next: NATS keeps only the last refusal, which would
// hide the one of the op subject (what a credential bound to another
// host is told).
func (a *agentSubs) subscribeEach(nc *nats.Conn) error {
	for _, s := range []struct {
		subj string
		fn   nats.MsgHandler
	}{{OpSubject(a.id), a.onOp}, {CancelSubject(a.id), a.onCancel}, {eventAckPattern(a.id), a.onAck}} {
		sub, err := nc.Subscribe(s.subj, s.fn)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", s.subj, err)
		}
		a.subs = append(a.subs, sub)
		if err := refused(nc, s.subj); err != nil {
			return err
		}
	}
	return nil
}

// verify checks, after every (re)connection, that NATS took the
// subscriptions; an inbox a node refuses (one of a cluster not upgraded
// yet) is replaced by the three subjects.
func (a *agentSubs) verify(nc *nats.Conn) error {
	if a.inbox {
		if refused(nc, InboxSubject(a.id)) == nil {
			return nil
		}
		a.unsubscribe()
		a.log.Info("agent: this NATS node does not grant the host's inbox; serving on its op, cancel and evack subjects")
		return a.subscribeEach(nc)
	}
	return refused(nc, OpSubject(a.id), CancelSubject(a.id), eventAckPattern(a.id))
}

func (a *agentSubs) unsubscribe() {
	for _, sub := range a.subs {
		_ = sub.Unsubscribe()
	}
	a.subs, a.inbox = nil, false
}

// onInbox hands a message of the inbox to its subject's handler; the
// agent's own publishes (echoed by a connection without NoEcho) are
// not for it.
func (a *agentSubs) onInbox(m *nats.Msg) {
	switch inboxKind(a.pfx, m.Subject) {
	case inboxOp:
		a.onOp(m)
	case inboxCancel:
		a.onCancel(m)
	case inboxAck:
		a.onAck(m)
	case inboxBeat:
		a.onBeat(m)
	}
}

// looksOnly reports whether req only reads the process's state: a status
// op (the agent answers it from what it has published, without its lock
// or the process's op slot).
func looksOnly(req model.AgentRequest) bool {
	return req.Op == model.OpStatus && !req.CancelOp && req.Group == nil && req.Tail == nil
}

// runner runs at most max functions at once, in the order they were
// submitted; those beyond wait in its queue, not in the submitter (NATS's
// delivery goroutine, which would hold back every message behind them),
// until maxQueued wait: then submit waits for room, as NATS would have
// buffered them. wg counts what was submitted and has not returned yet;
// after stop, submit takes nothing more, so that a Wait on wg after stop
// waits for everything the runner will ever run.
type runner struct {
	max     int
	wg      *sync.WaitGroup
	mu      sync.Mutex
	room    *sync.Cond
	busy    int
	queue   []func()
	head    int  // queue[head:] wait
	stopped bool // by stop: submit refuses
}

// maxQueued bounds the functions a runner keeps waiting.
const maxQueued = 65536

func newRunner(max int, wg *sync.WaitGroup) *runner {
	r := &runner{max: max, wg: wg}
	r.room = sync.NewCond(&r.mu)
	return r
}

// submit runs f, or queues it; false, f not run, once stop was called.
func (r *runner) submit(f func()) bool {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return false
	}
	// Added under mu: before stop takes it, hence before the Wait after
	// stop, which a WaitGroup needs of an Add from zero.
	r.wg.Add(1)
	if r.busy < r.max {
		r.busy++
		r.mu.Unlock()
		go r.work(f)
		return true
	}
	for len(r.queue)-r.head >= maxQueued {
		r.room.Wait() // counted already: queued and run even if stop comes meanwhile
	}
	r.queue = append(r.queue, f)
	r.mu.Unlock()
	return true
}

// stop makes submit refuse from now on; what it took before still runs.
func (r *runner) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// work runs f, then what waits, until nothing does.
func (r *runner) work(f func()) {
	for f != nil {
		f()
		r.wg.Done()
		r.mu.Lock()
		f = nil
		if r.head < len(r.queue) {
			f, r.queue[r.head] = r.queue[r.head], nil
			r.head++
			if r.head == len(r.queue) {
				r.queue, r.head = r.queue[:0], 0
			} else if r.head >= 1024 && 2*r.head >= len(r.queue) {
				n := copy(r.queue, r.queue[r.head:]) // what ran, dropped
				clear(r.queue[n:])
				r.queue, r.head = r.queue[:n], 0
			}
			r.room.Signal()
		} else {
			r.busy--
		}
		r.mu.Unlock()
	}
}

// inflight are the ops an agent is running, by op id, so that a cancel
// ends the right one. A cancel may overtake its op (two subscriptions,
// two goroutines): it is remembered a while, and the op, when it comes,
// starts cancelled.
type inflight struct {
	mu        sync.Mutex
	ops       map[string]context.CancelCauseFunc
	cancelled map[string]time.Time // op ids cancelled before they began
}

// cancelMemory is how long a cancel that came before its op is kept, and
// cancelsKept how many at most.
const (
	cancelMemory = time.Minute
	cancelsKept  = 4096
)

func newInflight() *inflight {
	return &inflight{ops: map[string]context.CancelCauseFunc{}, cancelled: map[string]time.Time{}}
}

// begin registers op id's context; done forgets it.
func (f *inflight) begin(ctx context.Context, id string) (context.Context, func()) {
	octx, stop := context.WithCancelCause(ctx)
	if id == "" {
		return octx, func() { stop(nil) }
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cancelled[id]; ok {
		delete(f.cancelled, id)
		stop(model.ErrCancelled)
	}
	f.ops[id] = stop
	return octx, func() {
		f.mu.Lock()
		delete(f.ops, id)
		f.mu.Unlock()
		stop(nil)
	}
}

// cancel ends op id's context with model.ErrCancelled; it reports whether
// the op was running (else the cancel waits for it a while).
func (f *inflight) cancel(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if stop, ok := f.ops[id]; ok {
		stop(model.ErrCancelled)
		return true
	}
	now := time.Now()
	for k, at := range f.cancelled {
		if now.Sub(at) > cancelMemory {
			delete(f.cancelled, k)
		}
	}
	if len(f.cancelled) < cancelsKept {
		f.cancelled[id] = now
	}
	return false
}

// closedError says why a connection closed for good (a protocol error
// from the server, credentials refused twice, or closed by the process
// itself); it wraps ErrClosed.
func closedError(nc *nats.Conn) error {
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return ErrClosed
}

// ErrRefused marks a subscription NATS refused: the credential's
// permissions do not cover the subject. Retrying does not help.
var ErrRefused = errors.New("refused by NATS permissions")

// refused reports whether NATS refused the subscription to one of
// subjects: after a round trip the server's permission error, if any, has
// arrived. A connection not up yet is not checked (its subscriptions are
// sent, and refusals logged, when it connects).
func refused(nc *nats.Conn, subjects ...string) error {
	if !nc.IsConnected() || nc.FlushTimeout(5*time.Second) != nil {
		return nil
	}
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	for _, s := range subjects {
		if strings.Contains(err.Error(), `"`+s+`"`) {
			return fmt.Errorf("subscribe %s: %w: %v", s, ErrRefused, err)
		}
	}
	return nil
}

func respond(m *nats.Msg, rep model.AgentReply, log *slog.Logger) {
	respondInto(make([]byte, 0, 512), m, rep, log)
}

// respondInto is respond encoding the reply into buf (from its start),
// which it returns: NATS copies what is published, so the caller may use
// it again at once.
func respondInto(buf []byte, m *nats.Msg, rep model.AgentReply, log *slog.Logger) []byte {
	data, err := model.AppendReplyJSON(buf[:0], &rep)
	if err != nil {
		log.Error("agent: encode reply", "err", err)
		return buf
	}
	if err := m.Respond(data); err != nil {
		log.Warn("agent: reply lost", "subject", m.Subject, "err", err)
	}
	return data
}

func (s *session) publishJSON(subj string, v any) {
	if !s.conn().IsConnected() {
		return // a stale heartbeat is worthless; a full one follows the reconnect
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.log.Error("agent: encode", "subject", subj, "err", err)
		return
	}
	s.publish(subj, data)
}

func (s *session) publish(subj string, data []byte) {
	if !s.conn().IsConnected() {
		return
	}
	if err := s.conn().Publish(subj, data); err != nil {
		s.log.Warn("agent: publish", "subject", subj, "err", err)
	}
}

// beatPlan decides, for one host, whether its next heartbeat is full or
// a keepalive (see ServeOptions.FullEvery). It is pure: no clock, no I/O.
// The periodic full beats keep their own schedule, shifted by the host's
// phase, whatever other full beats (changes, hellos) happen: a fleet
// started at once, or asked by a restarted server, spreads them over the
// period instead of sending them all on the same tick.
type beatPlan struct {
	every, phase int
	n            int    // beats so far
	last         uint64 // fingerprint of what the last full beat said
	sent         bool   // a full beat has been sent
}

func newBeatPlan(every, phase int) *beatPlan {
	every = max(every, 1)
	return &beatPlan{every: every, phase: phase % every}
}

// next reports whether the beat whose content has fingerprint fp is
// full; force asks for a full one (connect, hello, late or dropped
// events, leaving).
func (p *beatPlan) next(force bool, fp uint64) bool {
	p.n++
	full := force || !p.sent || fp != p.last || (p.n+p.phase)%p.every == 0
	if full {
		p.last, p.sent = fp, true
	}
	return full
}

// heartbeatPrint is the fingerprint of what a full heartbeat says that a
// keepalive may leave out only while it is unchanged: the host's identity
// and each process's state, not its usage figures (cpu, memory, threads,
// report time), which a full beat refreshes every FullEvery beats.
//
// It makes nothing on the heap: a simulated fleet computes it for every
// host at every beat (20,000 a second at 100,000 hosts), and the host's
// text, its sorted label keys and each number's text made for it were
// 17% of the simulator's CPU. The labels are summed by pair, so their
// order does not count and needs no sorting.
func heartbeatPrint(hi model.HostInfo, sts []model.ProcStatus) uint64 {
	h := fnvStr(fnvOffset, hi.Host.IP)
	h = fnvInt(h, int64(hi.Host.CloudID))
	h = fnvStr(fnvStr(fnvStr(h, string(hi.State)), hi.Version), hi.AgentID)
	var labels uint64
	for k, v := range hi.Labels {
		labels += fnvMix(fnvStr(fnvStr(fnvOffset, k), v))
	}
	h = fnvInt(h, int64(labels))
	h = fnvInt(h, int64(len(hi.Labels)))
	for i := range sts {
		st := &sts[i]
		zone, offset := st.StartTime.Zone()
		h = fnvStr(h, "\x01")
		h = fnvStr(fnvStr(fnvStr(h, st.ProcKey), st.ProcName), string(st.State))
		h = fnvInt(fnvInt(h, int64(st.PID)), boolInt(st.Hosted))
		h = fnvInt(fnvStr(fnvInt(h, st.StartTime.UnixNano()), zone), int64(offset))
		h = fnvInt(fnvInt(h, st.RegisterTime), st.LastStartTime)
		h = fnvInt(fnvInt(h, int64(st.Restarts)), int64(st.ExitStatus))
		h = fnvStr(fnvStr(fnvStr(h, st.Version), st.Cmdline), st.Message)
	}
	return h
}

// FNV-1a, 64 bits, over the fields of heartbeatPrint, each followed by a
// zero byte (a field's end: "ab","c" and "a","bc" differ).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvStr(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h * fnvPrime // ^ 0
}

func fnvInt(h uint64, n int64) uint64 {
	for range 8 {
		h = (h ^ uint64(n&0xff)) * fnvPrime
		n >>= 8
	}
	return h * fnvPrime
}

// fnvMix spreads a pair's hash over every bit before it is summed with
// the others' (FNV's low bits mix poorly into a sum).
func fnvMix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// run drives heartbeats and events until ctx ends. subscribe registers the
// event callback; hb publishes heartbeats; tick (optional) runs before each
// periodic heartbeat; attach subscribes the caller's own subjects on a new
// connection of the link (the old one was closed for good); verify checks
// after every (re)connection that NATS took the subscriptions.
func (s *session) run(ctx context.Context, l *Link, subscribe func(context.Context, func(model.Event)),
	hb func(full bool, late, dropped int, leaving bool), tick func(), attach func(context.Context, *nats.Conn) error, verify func() error) error {
	nc := s.conn()
	status := nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	onHello := func(*nats.Msg) {
		select {
		case s.hello <- struct{}{}:
		default:
		}
	}
	helloSub, err := nc.Subscribe(HelloSubject, onHello)
	if err != nil {
		nc.RemoveStatusListener(status)
		return fmt.Errorf("subscribe %s: %w", HelloSubject, err)
	}
	if err := s.subscribeAcks(nc); err != nil {
		_ = helloSub.Unsubscribe()
		nc.RemoveStatusListener(status)
		return err
	}
	s.retry = time.NewTimer(time.Hour)
	s.retry.Stop()
	defer func() {
		_ = helloSub.Unsubscribe()
		if s.ackSub != nil {
			_ = s.ackSub.Unsubscribe()
		}
		s.conn().RemoveStatusListener(status)
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	evCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); subscribe(evCtx, s.push) }()

	// Every heartbeat follows a flush and carries the counts not reported
	// yet: which of the reconnect status, a hello, the ticker or an event
	// notices a reconnect first is up to the scheduler, and the server
	// reports the counts only with the first heartbeat it sees.
	beat := func(full bool) {
		if !s.conn().IsConnected() {
			return
		}
		s.flush()
		late, dropped := s.takeCounts()
		hb(full || late > 0 || dropped > 0, late, dropped, false)
	}
	// renew moves the session onto the link's next connection once the
	// one in use was closed for good: everything subscribed again, events
	// kept in the buffer meanwhile.
	renew := func() error {
		old := s.conn()
		s.log.Warn("agent: nats connection closed for good; waiting for a new one", "err", closedError(old))
		fresh, err := l.Next(ctx, old)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		old.RemoveStatusListener(status)
		status = fresh.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
		s.nc.Store(fresh)
		if helloSub, err = fresh.Subscribe(HelloSubject, onHello); err != nil {
			return fmt.Errorf("subscribe %s: %w", HelloSubject, err)
		}
		if err := s.subscribeAcks(fresh); err != nil {
			return err
		}
		if err := attach(ctx, fresh); err != nil {
			return err
		}
		if err := verify(); err != nil {
			return err
		}
		s.log.Info("agent: serving on a new nats connection")
		beat(true)
		return nil
	}
	if s.conn().IsClosed() {
		if err := renew(); err != nil || ctx.Err() != nil {
			return err
		}
	} else {
		beat(true)
	}
	t := time.NewTimer(s.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush()
			return nil
		case st := <-status:
			switch st {
			case nats.CONNECTED:
				// Subscriptions are sent again on every connection: a
				// node with other permissions may refuse them.
				if err := verify(); err != nil {
					return err
				}
				beat(true)
			case nats.CLOSED:
				if err := renew(); err != nil || ctx.Err() != nil {
					return err
				}
			}
		case <-s.hello:
			beat(true)
		case <-s.notify:
			s.flush()
		case <-s.retry.C:
			s.flush()
		case d := <-s.phase:
			t.Reset(d)
		case <-t.C:
			if tick != nil {
				tick()
			}
			beat(false)
			t.Reset(s.interval())
		}
	}
}
