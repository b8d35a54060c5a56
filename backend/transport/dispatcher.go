package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/backend/transport/subjects"
	"gseproc/model"
)

// DispatcherOptions configure the server side.
type DispatcherOptions struct {
	// OfflineAfter is how long after its last heartbeat a host turns
	// offline ([nats] offline_after: its default is the config's, once;
	// NewDispatcher refuses 0 rather than default it again).
	OfflineAfter time.Duration
	// BeatInterval is the shortest heartbeat interval the dispatcher
	// tells agents ([nats] heartbeat_interval) and MaxBeatsPerSecond the
	// heartbeats the whole fleet may send ([nats]
	// max_heartbeats_per_second; 0: no bound): see beat.go. A zero
	// BeatInterval tells no agent anything (each beats at its own).
	BeatInterval      time.Duration
	MaxBeatsPerSecond int
	// StaticHosts are listed before their agents ever report (state unknown).
	StaticHosts []model.HostInfo
	// Labels are added to every agent's labels (the agent's own win), e.g.
	// the biz a demo agent joins.
	Labels map[string]string
	// Events say how the agents' events stream is kept (EventStream).
	Events EventStreamOptions
	Logger *slog.Logger
}

// Dispatcher is the server side of the transport. It implements the
// engine's Dispatcher (ops by request/reply), Inventory (hosts known from
// heartbeats and configuration) and AckedEventSource (the agents' events,
// read from JetStream and acknowledged once stored, plus the
// agent_online/agent_offline it derives from heartbeats).
type Dispatcher struct {
	nc   atomic.Pointer[nats.Conn] // in use; Rebind replaces it
	opts DispatcherOptions
	log  *slog.Logger
	// rule decides the heartbeat interval each agent is told (beat.go);
	// hintsSent counts the hints published.
	rule      beatRule
	hintsSent atomic.Int64
	// fleetStep is the fleet's interval step the sweep logged last
	// (-1: none yet); the sweep's own.
	fleetStep int

	mu    sync.Mutex
	hosts map[model.Host]*hostEntry
	// all are the entries of hosts (never removed) in a slice: the sweep
	// walks 100,000 of them every second, faster than the map. online
	// counts those online (Count, asked every second by the health probe).
	all    []*hostEntry
	online int
	// sorted are the entries of all in the host order (Hosts), kept
	// between listings; nil when an entry was added or its identity (its
	// place in the order) changed since: the next listing sorts again.
	// A listing of 100,000 hosts sorted them at every call (1.7 million
	// comparisons, ~110 ms of CPU).
	sorted []*hostEntry
	// next is where in sorted a listing's next status lookup looks first
	// (listed): the engine asks for each host of a listing in Hosts'
	// order, and the map's lookup of 100,000 hosts (hashing each address,
	// a probe, an entry: each a cache miss) was a tenth of a list's CPU.
	next int
	// epoch is the origin of the entries' times (hostEntry.seen).
	epoch time.Time
	// shared holds one copy of each label set and agent version the
	// hosts report (100,000 hosts have a few thousand label sets): the
	// entries' labels are never changed in place, only replaced.
	shared interned
	// beats are the same entries by a hash of their heartbeat subject
	// (beatSeed): a keepalive (most heartbeats) finds its host without
	// parsing its subject again (beat). Keyed by the subject itself, each
	// host kept the text of its first heartbeat's subject (32 bytes, and
	// 8 more a slot).
	beats    map[uint64]*hostEntry
	beatSeed maphash.Seed
	subs     subscribers[model.Event]
	asubs    subscribers[ackedEvent]
	// consumeWake tells consumeLoop a subscriber of durable events came;
	// rebound that the connection was replaced (Rebind). Both cap 1.
	consumeWake, rebound chan struct{}

	// Replies: each Dispatch waits on its own id under the addressed
	// host's reply subject (one subscription for all, as nats.go's own
	// request mux), kept in replies (locked by parts, not by rmu).
	replies  replyTable
	replyPfx string
	replyN   atomic.Uint64
	// rmu orders the replacements of reconnected and guards the late
	// requests' count and queue (lateN, lateQ).
	rmu sync.Mutex
	// reconnected is closed (and replaced) whenever the connection in use
	// comes back from a disconnection or is replaced (Rebind): an answer
	// published meanwhile may have found no subscription, so every
	// request waiting for one asks again (the agent answers a repeated op
	// id from its ledger, without running it again). Replaced under rmu;
	// a request reads it after it waits and before it publishes.
	reconnected atomic.Pointer[chan struct{}]
	// watchStop ends the status watch of the connection in use.
	watchStop chan struct{}
	// Late answers: a request whose deadline passed stays in replies (late
	// set) for lateWindow, at most lateMax of them, while someone
	// subscribes to late answers (lateSubs).
	lateSubs subscribers[model.LateReply]
	lateN    int // entries of replies that are late
	// lateRefused counts the requests not kept for a late answer since
	// lateMax were last reached (logged when it starts and ends).
	lateRefused int
	// lateQ is the late requests in the order their windows end (each
	// window is lateWindow long from when it was kept): dropLate looks
	// only at its head, not at every request waiting. An entry answered
	// meanwhile is skipped when its window ends, or taken out when the
	// queue reaches lateQMax (compactLate): answered ones would otherwise
	// pile up for a window, however few requests are still late.
	lateQ []lateEntry

	// watches are the contexts async requests were sent under
	// (DispatchAsync), by their Done channel, each with the number of
	// its watch (watchN counts them), under wmu.
	wmu     sync.Mutex
	watches map[<-chan struct{}]uint64
	watchN  uint64

	// words are the replies' texts kept once (decodeReplyIn).
	words wordTable

	// reqBufs are the buffers requests are encoded into (a request is
	// about a kilobyte, one per target of every op): each is published,
	// so copied by NATS, before the Dispatch that encoded it returns.
	reqBufs sync.Pool
	// asyncs are finished async requests, used again (newAsync).
	asyncs sync.Pool

	smu      sync.Mutex // natsSubs
	natsSubs []*nats.Subscription
	// Heartbeats are decoded by hbWorkers goroutines, each host always
	// by the same one (its heartbeats stay in order): 100,000 agents
	// report 20,000 times a second, more than one goroutine decodes.
	hbq    [hbWorkers]chan *nats.Msg
	hbSeed maphash.Seed // picks a subject's worker
	// wg: the heartbeat workers and the reconnect watch.
	wg sync.WaitGroup

	stop    chan struct{}
	done    chan struct{}
	closeMu sync.Once
}

// hbWorkers decode heartbeats; hbQueue is each one's backlog, beyond which
// the subscription's own pending buffer holds them.
const (
	hbWorkers = 4
	hbQueue   = 4096
)

// queueHeartbeat hands m to its host's heartbeat worker.
func (d *Dispatcher) queueHeartbeat(m *nats.Msg) {
	select {
	case d.hbq[maphash.String(d.hbSeed, m.Subject)%hbWorkers] <- m:
	case <-d.stop:
	}
}

func (d *Dispatcher) heartbeatWorker(q <-chan *nats.Msg) {
	defer d.wg.Done()
	for {
		select {
		case m := <-q:
			d.onHeartbeat(m)
		case <-d.stop:
			return
		}
	}
}

type pendingReply struct {
	host model.HostID
	// subject is the reply subject the request named (ReplySubject of
	// host and its id): an answer on exactly it came from host, whose
	// credential alone may publish there.
	subject string
	ch      chan *nats.Msg // buffered 1; nil when late or async
	late    *lateOp
	// async is a request no goroutine waits for (DispatchAsync): its
	// answer is handed to its callback by onReply; nil once a goroutine
	// waits for it after all (escalate: its context ended, or the
	// connection came back).
	async *asyncCall
}

// lateOp is a request whose dispatch gave up waiting at its deadline: an
// answer until `until` still says how the op ended.
type lateOp struct {
	taskID, opID string
	until        time.Time
}

// lateEntry is a late request id whose window ends at until.
type lateEntry struct {
	id    string
	until time.Time
}

// How long, and for how many requests at most, an answer after the
// deadline is still taken (see SubscribeLate).
const (
	lateWindow = 10 * time.Minute
	lateMax    = 100_000
	// lateQMax bounds lateQ: at it, the entries answered meanwhile are
	// taken out, which leaves at most lateMax (the late ones), so a
	// compaction comes at most once per lateQMax-lateMax keeps.
	lateQMax = 2 * lateMax
)

// hostEntry is what the dispatcher keeps of a host: 100,000 of them in
// a 100,000-host fleet, so it holds no field it can derive (its place in
// the host ordering is its identity's, its agent state is online and
// heard), its times are integers (24-byte time.Time values were 48
// bytes an entry) and what hosts share is shared (labels, the agent's
// version and id): 144 bytes an entry (a size class; 176 with the
// version and agent id apart and the grace a Duration).
type hostEntry struct {
	// id is the host's identity: set with the entry's first heartbeat
	// subject, or, for a configured host, from its address when it has one.
	id     model.HostID
	host   model.Host
	meta   *agentMeta // the agent's version and id, shared (interned.meta); nil: neither
	labels labelSet
	// seen is when the host was last heard from, in nanoseconds since the
	// dispatcher's epoch (monotonic: a change of the wall clock moves no
	// host offline); meaningful when heard.
	seen     int64
	statuses []model.ProcStatus
	// fullAt is the time the agent stamped on its last full heartbeat (in
	// Unix nanoseconds, 0 for none) and keepalives how many came since:
	// what names a change of state alike on every server (derivedEventID).
	fullAt     int64
	keepalives int32
	// graceMs is the silence after which the host is offline, in
	// milliseconds (grace, setGrace).
	graceMs int32
	online  bool
	heard   bool // zero: never heard from
	// beat is the heartbeat interval the host reported last, or was told
	// since, as a step of the dispatcher's rule (beatRule.beatCode; 0:
	// the host takes no hints): a keepalive says no interval, and a host
	// beating faster than the fleet may is told so at its keepalive.
	beat uint8
	// pos is the entry's index in Dispatcher.sorted when that was made
	// (listed checks it is still there).
	pos int32
}

// agentMeta is what an agent says of itself besides its host and labels:
// the same for most hosts of a fleet (one version), so kept once.
type agentMeta struct {
	version, agentID string
}

// grace is the silence after which e's host is offline.
func (e *hostEntry) grace() time.Duration { return time.Duration(e.graceMs) * time.Millisecond }

// setGrace makes g (at most 24 days; an agent's interval is its own
// word) the silence after which e's host is offline.
func (e *hostEntry) setGrace(g time.Duration) {
	e.graceMs = int32(min(g.Milliseconds(), math.MaxInt32))
}

// version and agentID are the agent's (empty when it said none).
func (e *hostEntry) version() string {
	if e.meta == nil {
		return ""
	}
	return e.meta.version
}

func (e *hostEntry) agentID() string {
	if e.meta == nil {
		return ""
	}
	return e.meta.agentID
}

// order is the entry's place in the host ordering.
func (e *hostEntry) order() model.HostOrder {
	if e.id.Valid() {
		return e.id.Order()
	}
	return e.host.Order()
}

// info is the entry's host as listed (labels and state apart).
func (e *hostEntry) info() model.HostInfo {
	return model.HostInfo{Host: e.host, Version: e.version(), AgentID: e.agentID()}
}

// staticEntry is the entry of a configured host.
func staticEntry(hi model.HostInfo, labels labelSet, meta *agentMeta) hostEntry {
	e := hostEntry{host: hi.Host, meta: meta, labels: labels}
	if id, err := hi.Host.ID(); err == nil {
		e.id = id
	}
	return e
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// NewDispatcher subscribes to the agents' heartbeats and events on nc and
// asks every agent for a full heartbeat. Close stops it; nc stays open.
func NewDispatcher(nc *nats.Conn, opts DispatcherOptions) (*Dispatcher, error) {
	if opts.OfflineAfter <= 0 {
		return nil, fmt.Errorf("nats dispatcher: OfflineAfter %s must be > 0 ([nats] offline_after, filled by config.Load)", opts.OfflineAfter)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{
		opts: opts, log: opts.Logger,
		rule:        beatRule{min: opts.BeatInterval, rate: opts.MaxBeatsPerSecond},
		fleetStep:   -1,
		hosts:       map[model.Host]*hostEntry{},
		beats:       map[uint64]*hostEntry{},
		beatSeed:    maphash.MakeSeed(),
		hbSeed:      maphash.MakeSeed(),
		replyPfx:    randomSecret()[:12],
		consumeWake: make(chan struct{}, 1), rebound: make(chan struct{}, 1),
		epoch: time.Now(),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	d.reconnected.Store(new(make(chan struct{})))
	for i := range d.hbq {
		d.hbq[i] = make(chan *nats.Msg, hbQueue)
		d.wg.Add(1)
		go d.heartbeatWorker(d.hbq[i])
	}
	for _, hi := range opts.StaticHosts {
		hi.State = model.AgentUnknown
		labels, meta := d.shared.labels(hi.Labels), d.shared.meta(nil, hi.Version, hi.AgentID)
		hi.Labels = nil
		if e := d.hosts[hi.Host]; e != nil { // listed twice: the last one counts
			*e = staticEntry(hi, labels, meta)
			continue
		}
		e := new(staticEntry(hi, labels, meta))
		d.hosts[hi.Host] = e
		d.all = append(d.all, e)
		d.sorted = nil
	}
	if err := d.attach(nc); err != nil {
		close(d.stop)
		d.wg.Wait()
		return nil, err
	}
	go d.sweep()
	d.wg.Add(1)
	go d.consumeLoop()
	return d, nil
}

// Rebind moves the dispatcher onto nc, a new connection (the one it used
// was closed for good; transport.Link dials the new one and calls this):
// it subscribes there and asks every agent for a full heartbeat. Requests
// waiting for a reply are published again on the new connection (those
// with an op id: the agent answers a repeat from its ledger).
func (d *Dispatcher) Rebind(_ context.Context, nc *nats.Conn) error {
	select {
	case <-d.stop:
		return errors.New("dispatcher: closed")
	default:
	}
	if err := d.attach(nc); err != nil {
		return err
	}
	select {
	case d.rebound <- struct{}{}:
	default:
	}
	d.askAgain()
	return nil
}

// askAgain wakes every request waiting for a reply: it publishes its
// request again (an async request with an op id is taken over by a
// goroutine that does).
func (d *Dispatcher) askAgain() {
	d.rmu.Lock()
	old := d.reconnected.Swap(new(make(chan struct{})))
	close(*old)
	d.rmu.Unlock()
	d.askAgainAsync()
}

// watchReconnects calls askAgain each time nc connects again, until stop
// is closed.
func (d *Dispatcher) watchReconnects(nc *nats.Conn, stop <-chan struct{}) {
	st := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(st)
	for {
		select {
		case <-st:
			// The subscriptions are sent again by nats.go before its
			// status says connected; a round trip makes sure the server
			// has them before the requests go out again.
			_ = nc.FlushTimeout(5 * time.Second)
			d.askAgain()
		case <-stop:
			return
		case <-d.stop:
			return
		}
	}
}

// attach subscribes to the agents' heartbeats, events and replies on nc,
// makes nc the connection ops go out on, and says hello.
func (d *Dispatcher) attach(nc *nats.Conn) error {
	var subs []*nats.Subscription
	for subj, cb := range map[string]nats.MsgHandler{AllHeartbeats: d.queueHeartbeat, AllReplies: d.onReply} {
		s, err := nc.Subscribe(subj, cb)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return fmt.Errorf("dispatcher: subscribe %s: %w", subj, err)
		}
		_ = s.SetPendingLimits(1<<20, 256<<20)
		subs = append(subs, s)
	}
	d.unsubscribe() // the old connection's (closed with it, if it is)
	stop := make(chan struct{})
	d.smu.Lock()
	d.natsSubs = subs
	if d.watchStop != nil {
		close(d.watchStop)
	}
	d.watchStop = stop
	d.smu.Unlock()
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.watchReconnects(nc, stop) }()
	d.nc.Store(nc)
	// The subscriptions must be in place before agents answer the hello.
	if err := nc.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionReconnecting) {
		d.log.Warn("dispatcher: flush", "err", err)
	}
	if err := nc.Publish(HelloSubject, nil); err != nil {
		d.log.Warn("dispatcher: hello", "err", err)
	}
	return nil
}

// Close stops the dispatcher and waits for its goroutine.
func (d *Dispatcher) Close() error {
	d.closeMu.Do(func() {
		close(d.stop)
		<-d.done
		d.wg.Wait()
		d.unsubscribe()
	})
	return nil
}

func (d *Dispatcher) unsubscribe() {
	d.smu.Lock()
	defer d.smu.Unlock()
	for _, s := range d.natsSubs {
		_ = s.Unsubscribe()
	}
	d.natsSubs = nil
}

// Dispatch sends req to host's agent and waits for its reply until ctx
// ends. No agent listening: an error wrapping model.ErrUnreachable, at once.
// ctx done first: an error wrapping ctx.Err().
func (d *Dispatcher) Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error) {
	if req.Deadline.IsZero() {
		if dl, ok := ctx.Deadline(); ok {
			req.Deadline = dl
		}
	}
	id, err := hostID(host)
	if err != nil {
		return model.AgentReply{}, fmt.Errorf("dispatch: %w", err)
	}
	buf := d.getBuf()
	data, err := model.AppendRequestJSON((*buf)[:0], &req)
	if err != nil {
		d.reqBufs.Put(buf)
		return model.AgentReply{}, fmt.Errorf("dispatch %s: encode request: %w", host, err)
	}
	msg, err := d.request(ctx, id, req.OpID, req.TaskID, data)
	// NATS copied data at each publish: the buffer serves the next request.
	d.putBuf(buf, data)
	return d.answer(ctx, host, msg, err)
}

// getBuf is a buffer to encode a request in (putBuf gives it back).
func (d *Dispatcher) getBuf() *[]byte {
	if buf, _ := d.reqBufs.Get().(*[]byte); buf != nil {
		return buf
	}
	return new([]byte)
}

// putBuf keeps buf, now holding data (published: NATS copied it), for
// the next request.
func (d *Dispatcher) putBuf(buf *[]byte, data []byte) {
	if cap(data) <= maxPooledRequest {
		*buf = data
		d.reqBufs.Put(buf)
	}
}

// answer is Dispatch's outcome for the request to host made under ctx
// that ended with msg or err.
func (d *Dispatcher) answer(ctx context.Context, host model.Host, msg *nats.Msg, err error) (model.AgentReply, error) {
	switch {
	case err != nil && errors.Is(err, model.ErrCancelled):
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w", host, err)
	case err != nil && ctx.Err() != nil:
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w", host, ctx.Err())
	case err != nil:
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w", host, err)
	}
	if noResponders(msg) {
		// NATS: nobody subscribes to the host's op subject.
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w: no agent listening", host, model.ErrUnreachable)
	}
	if msg.Header.Get(StatusHeader) == statusUnreachable {
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w: %s", host, model.ErrUnreachable, string(msg.Data))
	}
	rep, err := decodeReplyIn(msg.Data, &d.words)
	if err != nil {
		return model.AgentReply{}, fmt.Errorf("dispatch %s: decode reply: %w", host, err)
	}
	d.boundReply(msg.Subject, &rep)
	return rep, nil
}

// boundReply bounds an agent's reply (received on subject) at the
// entrance, by model.BoundReply: an agent is untrusted, and its output
// was kept up to the NATS payload for every target. What was changed is
// logged.
func (d *Dispatcher) boundReply(subject string, rep *model.AgentReply) {
	if f := model.BoundReply(rep); f != "" {
		d.log.Warn("dispatcher: reply clipped (output and message at most model.MaxOutput bytes, the status's texts plain and clipped) or its log tail chunk refused (past model.MaxTailChunk)",
			"subject", subject, "first", f, "max_output", model.MaxOutput, "max_tail_chunk", model.MaxTailChunk)
	}
}

// maxPooledRequest bounds the buffers kept for reuse.
const maxPooledRequest = 64 << 10

// noResponders reports whether m is NATS's answer that nobody subscribes
// to the request's subject.
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// askAgainAfter is how long a request asked again after a reconnection
// waits before asking once more when its agent was not there yet.
const askAgainAfter = 250 * time.Millisecond

// CancelGrace is how long a dispatch cancelled by the operator
// (model.ErrCancelled) still waits for the agent's answer to the cancel.
const CancelGrace = 5 * time.Second

// request publishes data on host's op subject with the host's own reply
// subject and waits for the answer (or NATS's no-responders status) until
// ctx ends. When ctx ends with model.ErrCancelled, the agent is told to
// stop op opID, and its answer is awaited up to CancelGrace more.
func (d *Dispatcher) request(ctx context.Context, host model.HostID, opID, taskID string, data []byte) (*nats.Msg, error) {
	c := d.newCall(host, opID, taskID, data)
	ch := make(chan *nats.Msg, 1)
	d.replies.put(c.id, pendingReply{host: host, subject: c.reply, ch: ch})
	// Read after the request waits and before it is published: a
	// reconnection after this is seen, one before needs nothing asked again.
	again := *d.reconnected.Load()
	if err := d.publish(&c); err != nil {
		d.replies.del(c.id)
		return nil, fmt.Errorf("publish request: %w", err)
	}
	return d.await(ctx, &c, ch, again, false)
}

// call is a request as published: its id (the reply subject's last
// token), its subjects and its payload (data, or made again from rec at
// each publish when data is nil), kept to be published again.
type call struct {
	host         model.HostID
	opID, taskID string
	id           string
	opSubj       string
	reply        string
	data         []byte
	rec          recipe
}

// recipe is what a request of a process whose encoding is made already
// (AgentRequest.ProcessJSON) is encoded from again: an async request in
// flight keeps it, not its encoding (a kilobyte each, 2,048 at once, let
// go only once answered: the buffers' pool could not serve them and an
// op over 100,000 hosts allocated ~175 MB of them).
type recipe struct {
	deadline    time.Time
	processJSON []byte // shared by every target of the run
	op          model.OpType
	cancelOp    bool
}

// recipeOf is req's recipe; ok false when req is not encoded from one
// (no ProcessJSON, a group or a tail request).
func recipeOf(req *model.AgentRequest) (r recipe, ok bool) {
	if req.ProcessJSON == nil || req.Group != nil || req.Tail != nil {
		return r, false
	}
	return recipe{deadline: req.Deadline, processJSON: req.ProcessJSON, op: req.Op, cancelOp: req.CancelOp}, true
}

// request is the request c's recipe makes.
func (c *call) request() model.AgentRequest {
	return model.AgentRequest{TaskID: c.taskID, OpID: c.opID, Op: c.rec.op, Deadline: c.rec.deadline, CancelOp: c.rec.cancelOp,
		ProcessJSON: c.rec.processJSON}
}

// newCall names a new request of data to host: its op and reply
// subjects, from one rendering of the host's token and in one string
// (the op subject then the reply subject): one allocation, not two.
func (d *Dispatcher) newCall(host model.HostID, opID, taskID string, data []byte) call {
	var buf [2 * MaxSubject]byte
	b := append(buf[:0], subjectPrefix...)
	b = subjects.AppendHostToken(b, host)
	n := len(b)
	b = append(b, ".op"...)
	op := len(b)
	b = append(b, b[:n]...)
	b = append(append(b, ".reply."...), d.replyPfx...)
	b = strconv.AppendUint(b, d.replyN.Add(1), 36)
	both := string(b)
	reply := both[op:]
	return call{host: host, opID: opID, taskID: taskID, opSubj: both[:op], reply: reply,
		id: reply[n+len(".reply."):], data: data}
}

// publish publishes c's request on the connection in use.
func (d *Dispatcher) publish(c *call) error {
	if c.data != nil {
		return d.nc.Load().PublishRequest(c.opSubj, c.reply, c.data)
	}
	buf := d.getBuf()
	req := c.request()
	data, err := model.AppendRequestJSON((*buf)[:0], &req)
	if err == nil {
		err = d.nc.Load().PublishRequest(c.opSubj, c.reply, data)
	}
	d.putBuf(buf, data) // NATS copied data
	return err
}

// await waits for the answer to c, published already (and published
// again at once when reask: a reconnection came since), handed on ch
// (onReply), until ctx ends; again is the reconnection signal read
// before c was published. c is forgotten when await returns, unless it
// is kept for a late answer.
func (d *Dispatcher) await(ctx context.Context, c *call, ch chan *nats.Msg, again <-chan struct{}, reask bool) (*nats.Msg, error) {
	late := false // kept for a late answer
	defer func() {
		if !late {
			d.replies.del(c.id)
		}
	}()
	// A request with an op id is asked again after a reconnection (the
	// answer may have been published while nobody subscribed); the agent
	// answers the repeat from its ledger. While asked again, "no
	// responders" means the agent has not reconnected yet: asked once
	// more a moment later, until the deadline.
	var retry <-chan time.Time
	reasked := false
	if reask {
		reasked = true
		if err := d.publish(c); err != nil {
			retry = time.After(askAgainAfter)
		}
	}
wait:
	for {
		select {
		case m := <-ch:
			if !reasked || !noResponders(m) {
				return m, nil
			}
			retry = time.After(askAgainAfter)
		case <-again:
			again = *d.reconnected.Load()
			if c.opID == "" {
				continue
			}
			reasked, retry = true, nil
			if err := d.publish(c); err != nil {
				retry = time.After(askAgainAfter)
			}
		case <-retry:
			retry = nil
			if err := d.publish(c); err != nil {
				retry = time.After(askAgainAfter)
			}
		case <-ctx.Done():
			break wait
		}
	}
	if c.opID != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		late = d.keepLate(c.id, c.host, c.reply, c.taskID, c.opID, ch)
	}
	if c.opID == "" || !errors.Is(context.Cause(ctx), model.ErrCancelled) {
		return nil, ctx.Err()
	}
	cancel, _ := json.Marshal(model.CancelRequest{TaskID: c.taskID, OpID: c.opID})
	if err := d.nc.Load().Publish(CancelSubject(c.host), cancel); err != nil {
		return nil, fmt.Errorf("%w; telling the agent to stop: %v", context.Cause(ctx), err)
	}
	t := time.NewTimer(CancelGrace)
	defer t.Stop()
	select {
	case m := <-ch:
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("%w; the agent did not answer the cancel within %s", context.Cause(ctx), CancelGrace)
	case <-d.stop:
		return nil, ctx.Err()
	}
}

// keepLate keeps request id, whose deadline passed, waiting for a late
// answer (when anyone subscribes to them and fewer than lateMax wait).
// An answer that came after the deadline and before it was kept went to
// the request's channel (ch), which nobody reads any more: it is handed
// on as a late answer, once (onReply takes the late request away). It is
// in ch by the time the request is made late (replyTable.take hands it
// over under the lock put takes).
func (d *Dispatcher) keepLate(id string, host model.HostID, subject, taskID, opID string, ch <-chan *nats.Msg) bool {
	d.rmu.Lock()
	if d.lateSubs.empty() {
		d.rmu.Unlock()
		return false
	}
	if d.lateN >= lateMax {
		if d.lateRefused++; d.lateRefused == 1 {
			d.log.Warn("dispatcher: late answers: as many requests wait for one as are kept; more are not kept, their timeouts stand", "max", lateMax, "window", lateWindow)
		}
		d.rmu.Unlock()
		return false
	}
	if d.lateRefused > 0 {
		d.log.Warn("dispatcher: late answers: kept again", "not_kept", d.lateRefused)
		d.lateRefused = 0
	}
	if len(d.lateQ) >= lateQMax {
		d.compactLate()
	}
	until := time.Now().Add(lateWindow)
	d.replies.put(id, pendingReply{host: host, subject: subject, late: &lateOp{taskID: taskID, opID: opID, until: until}})
	d.lateN++
	d.lateQ = append(d.lateQ, lateEntry{id: id, until: until})
	d.rmu.Unlock()
	select {
	case m := <-ch:
		d.onReply(m)
	default:
	}
	return true
}

// SubscribeLate calls fn, until ctx ends, with every answer that comes
// after its dispatch gave up at the deadline (within 10 minutes of it):
// the op's real outcome, which the timeout recorded for it can be
// corrected with. Each late answer is delivered once. fn must not block.
func (d *Dispatcher) SubscribeLate(ctx context.Context, fn func(model.LateReply)) {
	d.lateSubs.add(ctx, fn)
}

// onLate hands a late answer m of request p to the late subscribers.
func (d *Dispatcher) onLate(p pendingReply, m *nats.Msg) {
	if noResponders(m) || m.Header.Get(StatusHeader) == statusUnreachable {
		return
	}
	rep, err := decodeReplyIn(m.Data, &d.words)
	if err != nil {
		d.log.Warn("dispatcher: late reply: decode", "subject", m.Subject, "err", err)
		return
	}
	d.boundReply(m.Subject, &rep)
	lr := model.LateReply{Host: p.host.Host(), TaskID: p.late.taskID, OpID: p.late.opID, Reply: rep}
	for _, fn := range d.lateSubs.list() {
		fn(lr)
	}
}

// compactLate takes out of lateQ the entries no longer late (answered
// meanwhile), keeping the others in order. Called with rmu held.
func (d *Dispatcher) compactLate() {
	q := d.lateQ[:0]
	for _, e := range d.lateQ {
		if d.replies.isLate(e.id) {
			q = append(q, e)
		}
	}
	clear(d.lateQ[len(q):])
	d.lateQ = q
}

// dropLate forgets the late requests whose window passed at now.
func (d *Dispatcher) dropLate(now time.Time) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	n := 0
	for _, q := range d.lateQ {
		if !now.After(q.until) {
			break
		}
		n++
		if d.replies.dropLate(q.id) {
			d.lateN--
		}
	}
	if n > 0 {
		clear(d.lateQ[:n])
		d.lateQ = d.lateQ[n:]
	}
}

// onReply delivers a reply to the Dispatch waiting for it, only when it
// arrived on the reply subject of the host that Dispatch addressed: NATS
// lets only that host's credential publish there, so an answer for
// another host (whatever its payload says) is ignored.
func (d *Dispatcher) onReply(m *nats.Msg) {
	// The request id is the subject's last token; the answer counts only
	// on the very subject its request named (the addressed host's), which
	// is compared whole rather than parsed: any other subject is parsed
	// only to say what it was.
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	p, ok, same := d.replies.take(id, m) // a late answer counts once: taken away; an answer in time handed over
	if same && p.async != nil {
		p.async.finish(m, nil)
		return
	}
	if same && p.late != nil {
		d.rmu.Lock()
		d.lateN--
		d.rmu.Unlock()
	}
	if !same {
		from, _, err := replyFromSubject(m.Subject)
		switch {
		case err != nil:
			d.log.Warn("dispatcher: reply", "err", err)
		case !ok:
			d.log.Debug("dispatcher: reply nobody waits for (late, or answered twice)", "subject", m.Subject)
		default:
			d.log.Warn("dispatcher: reply from another host than the one addressed; ignored", "addressed", p.host.String(), "from", from.String())
		}
		return
	}
	if p.late != nil {
		d.onLate(p, m)
	}
}

// Hosts lists every host heard from or configured, by cloud then IP.
func (d *Dispatcher) Hosts(ctx context.Context) ([]model.HostInfo, error) {
	var out []model.HostInfo
	d.list(func(n int) { out = make([]model.HostInfo, 0, n) }, func(e *hostEntry, hi model.HostInfo) {
		hi.Labels = d.labels(e.labels)
		out = append(out, hi)
	})
	return out, nil
}

// HostLabelSets is Hosts with each host's labels apart, as the
// dispatcher keeps them: sets[i] is hosts[i]'s, shared with every host of
// the same labels (engine.LabelSetInventory). A host list made a map of
// each host's set (Hosts), ~30 MB for 100,000 hosts, for the list form's
// writer to take apart again.
func (d *Dispatcher) HostLabelSets(ctx context.Context) (hosts []model.HostInfo, sets []model.LabelSet, err error) {
	// With labels of its own, the dispatcher's set joined to an agent's
	// is made once a listing for each distinct agent set.
	var joined map[*string]model.LabelSet
	var own model.LabelSet // the dispatcher's labels alone, for a host with none
	if len(d.opts.Labels) > 0 {
		joined, own = map[*string]model.LabelSet{}, model.MakeLabelSet(d.opts.Labels)
	}
	d.list(func(n int) {
		hosts, sets = make([]model.HostInfo, 0, n), make([]model.LabelSet, 0, n)
	}, func(e *hostEntry, hi model.HostInfo) {
		set := model.LabelSet(e.labels)
		switch {
		case joined == nil:
		case len(set) == 0:
			set = own
		default:
			j, ok := joined[&set[0]]
			if !ok {
				j = model.MakeLabelSet(d.labels(e.labels))
				joined[&set[0]] = j
			}
			set = j
		}
		hosts, sets = append(hosts, hi), append(sets, set)
	})
	return hosts, sets, nil
}

// list passes every host heard from or configured to each, by cloud then
// IP, as Hosts lists it without its labels (e's), after start is told
// how many there are. Called without d.mu, each called with it held.
func (d *Dispatcher) list(start func(n int), each func(e *hostEntry, hi model.HostInfo)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sorted == nil {
		// Sorted by the order each entry keeps, not by parsing two
		// addresses per comparison, and kept until an entry is added or
		// changes identity (entry).
		d.sorted = slices.Clone(d.all)
		slices.SortFunc(d.sorted, func(a, b *hostEntry) int { return a.order().Compare(b.order()) })
		for i, e := range d.sorted {
			e.pos = int32(i)
		}
	}
	d.next = 0 // a listing's lookups follow (listed)
	start(len(d.sorted))
	for _, e := range d.sorted {
		hi := e.info()
		switch {
		case !e.heard:
			hi.State = model.AgentUnknown
		case e.online:
			hi.State = model.AgentOnline
		default:
			hi.State = model.AgentOffline
		}
		if e.heard {
			hi.LastSeen = d.epoch.Add(time.Duration(e.seen)).Unix()
		}
		each(e, hi)
	}
}

// Count returns how many hosts are online and how many are known, without
// listing them (a health probe asks every second).
func (d *Dispatcher) Count() (online, known int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.online, len(d.hosts)
}

// HostCounts is the number of hosts Hosts lists and of those online
// (engine.HostCounter), without listing them: an Info over 100,000 hosts
// copied every host and its labels to count them.
func (d *Dispatcher) HostCounts(context.Context) (total, online int, err error) {
	online, total = d.Count()
	return total, online, nil
}

// Online reports whether host's agent is heartbeating.
func (d *Dispatcher) Online(host model.Host) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.hosts[host]
	return e != nil && e.online
}

// Statuses returns the process statuses of host's last heartbeat.
func (d *Dispatcher) Statuses(host model.Host) []model.ProcStatus {
	return d.AppendStatuses(nil, host)
}

// AppendStatuses appends what Statuses(host) returns to dst
// (engine.StatusAppender): a listing of 100,000 hosts reuses one buffer
// instead of copying each host's statuses into a slice of its own.
func (d *Dispatcher) AppendStatuses(dst []model.ProcStatus, host model.Host) []model.ProcStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.listed(host); e != nil {
		if dst == nil {
			return slices.Clone(e.statuses)
		}
		return append(dst, e.statuses...)
	}
	return dst
}

// AppendListStatuses appends to dst, in the order Statuses(host) has
// them, the statuses of host's last heartbeat whose process keys names,
// each holding only ProcKey, State, PID, Hosted and ReportTime
// (engine.ListStatusAppender): a host list shows no more, and copying
// each whole status (seven strings and a time, under the write barrier
// while a collection runs) was a quarter of a 100,000-host listing's CPU.
func (d *Dispatcher) AppendListStatuses(dst []model.ProcStatus, host model.Host, keys []string) []model.ProcStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.listed(host)
	if e == nil {
		return dst
	}
	return appendListStatuses(dst, e.statuses, keys)
}

// appendListStatuses appends to dst, in their order, the statuses of sts
// whose process keys names, each holding only what a host list shows
// (engine.ListStatusAppender).
func appendListStatuses(dst, sts []model.ProcStatus, keys []string) []model.ProcStatus {
	for i := range sts {
		s := &sts[i]
		// A host has a few processes: a scan beats a set. Every status
		// of a key asked is kept, duplicates too, as AppendStatuses
		// would give them: the engine chooses among them.
		if slices.Contains(keys, s.ProcKey) {
			dst = append(dst, model.ProcStatus{ProcKey: s.ProcKey, State: s.State, PID: s.PID, Hosted: s.Hosted, ReportTime: s.ReportTime})
		}
	}
	return dst
}

// listed is host's entry (nil for none), looked up for a listing that
// asks for its hosts in Hosts' order: the entry after the one found last
// is tried first, the map only when it is not host's. d.mu is held.
// Entries are never removed and never change host, so an entry of
// sorted, even one made before entries were added, is host's entry when
// it has host's address.
func (d *Dispatcher) listed(host model.Host) *hostEntry {
	if i := d.next; i < len(d.sorted) {
		if e := d.sorted[i]; e.host == host {
			d.next = i + 1
			return e
		}
	}
	e := d.hosts[host]
	if e != nil {
		if i := int(e.pos); i < len(d.sorted) && d.sorted[i] == e {
			d.next = i + 1 // a host skipped (a listing of some hosts): back in step
		}
	}
	return e
}

// labels is a host's labels as listed: the dispatcher's (DispatcherOptions.Labels)
// and its agent's, which win.
func (d *Dispatcher) labels(agent labelSet) map[string]string {
	if len(d.opts.Labels) == 0 && agent == nil {
		return nil
	}
	m := make(map[string]string, len(d.opts.Labels)+len(agent)/2)
	maps.Copy(m, d.opts.Labels)
	agent.addTo(m)
	return m
}

// SubscribeEvents calls fn for every event until ctx ends; it returns at
// once. fn must not block. It sees the agents' events only while someone
// stores them (SubscribeAckedEvents: the engine), as they are read.
func (d *Dispatcher) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	d.subs.add(ctx, fn)
}

// emit hands the events the dispatcher derives to every subscriber.
func (d *Dispatcher) emit(evs ...model.Event) {
	if len(evs) == 0 {
		return
	}
	fns, afns := d.subs.list(), d.asubs.list()
	for _, e := range evs {
		for _, fn := range fns {
			fn(e)
		}
		for _, fn := range afns {
			fn(ackedEvent{ev: e})
		}
	}
}

// checkLabels checks a heartbeat's host labels by the label rule
// (model.Validator.CheckLabel, CheckLabelCount), as the agent's
// configuration does: an agent is untrusted, and its labels reach
// selectors, the store and operators' terminals. It returns labels itself
// when every one passes (no allocation), else the ones that pass, at most
// model.MaxLabels (the first by key: the same ones at every heartbeat),
// and why the others were left out (the first refusedNamed by key, each
// named by its key, clipped; then how many more).
func checkLabels(labels map[string]string) (map[string]string, error) {
	var v model.Validator
	v.CheckLabelCount("labels", len(labels))
	for k, val := range labels {
		v.CheckLabel("labels", k, val)
	}
	if v.Err() == nil {
		return labels, nil
	}
	kept := make(map[string]string, min(len(labels), model.MaxLabels))
	var why model.Validator
	refused, over := 0, 0
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		val := labels[k]
		var one model.Validator
		if one.CheckLabel("labels", k, val); one.Err() == nil {
			if len(kept) < model.MaxLabels {
				kept[k] = val
			} else {
				over++
			}
			continue
		}
		if refused++; refused > refusedNamed {
			continue
		}
		name := k
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		why.CheckLabel("labels["+strconv.Quote(name)+"]", k, val)
	}
	if refused > refusedNamed {
		why.Addf("labels", "%d more refused by the label rule", refused-refusedNamed)
	}
	if over > 0 {
		why.Addf("labels", "%d labels, more than %d: the %d after the first %d by key left out", len(labels)-refused, model.MaxLabels, over, model.MaxLabels)
	}
	return kept, why.Err()
}

// checkStatuses bounds what an agent (untrusted) reports of its
// processes, as the heartbeat's decode began (at most model.MaxHostProcs
// statuses, the others left out): each status's texts plain and clipped
// (model.PlainStatus), and the agent's version too (model.PlainText,
// model.MaxStatusText), so no escape sequence reaches an operator's
// terminal and no text of megabytes is kept for the host. The host is
// taken; what was changed is logged once a heartbeat (the first status
// changed, named, and how many). A usual heartbeat is changed in nothing
// and costs no allocation.
func checkStatuses(log *slog.Logger, subject string, hb *Heartbeat) {
	if hb.left > 0 {
		log.Warn("dispatcher: heartbeat with more process statuses than a host may report; the rest are left out",
			"subject", subject, "kept", len(hb.Statuses), "left_out", hb.left, "max", model.MaxHostProcs)
	}
	if v := model.ClipText(model.PlainText(hb.Info.Version), model.MaxStatusText); v != hb.Info.Version {
		hb.Info.Version = v
		log.Warn("dispatcher: heartbeat's agent version cleaned (escape sequences and control characters out, clipped)",
			"subject", subject, "max", model.MaxStatusText)
	}
	changed, first, field := 0, "", ""
	for i := range hb.Statuses {
		if f := model.PlainStatus(&hb.Statuses[i]); f != "" {
			if changed++; changed == 1 {
				first, field = hb.Statuses[i].ProcKey, f
			}
		}
	}
	if changed > 0 {
		log.Warn("dispatcher: heartbeat with process statuses cleaned (escape sequences and control characters out, texts clipped)",
			"subject", subject, "statuses", changed, "first", first, "field", field, "cmdline_max", model.MaxCmdline, "max", model.MaxStatusText)
	}
}

// refusedNamed is how many refused labels checkLabels names: a heartbeat
// may carry thousands, and the reason is logged.
const refusedNamed = 8

func (d *Dispatcher) onHeartbeat(m *nats.Msg) {
	if len(m.Data) == 0 {
		d.onKeepalive(m.Subject)
		return
	}
	subjHost, err := d.beatHost(m.Subject)
	if err != nil {
		d.log.Warn("dispatcher: heartbeat", "err", err)
		return
	}
	hb, err := decodeHeartbeat(m.Data)
	if err != nil {
		d.log.Warn("dispatcher: heartbeat: decode", "subject", m.Subject, "err", err)
		return
	}
	if !sameHost(hb.Info.Host, subjHost) {
		d.log.Warn("dispatcher: heartbeat names another host than its subject; dropped", "subject", m.Subject, "host", hb.Info.Host.String())
		return
	}
	if hb.Info.AgentID != "" {
		id, err := model.CheckAgentID(hb.Info.AgentID)
		if err != nil {
			d.log.Warn("dispatcher: heartbeat with an invalid agent id; the id is ignored", "subject", m.Subject, "err", err)
		}
		hb.Info.AgentID = id
	}
	if kept, err := checkLabels(hb.Info.Labels); err != nil {
		d.log.Warn("dispatcher: heartbeat with labels the label rule refuses; they are left out", "subject", m.Subject, "err", err)
		hb.Info.Labels = kept
	}
	checkStatuses(d.log, m.Subject, &hb)
	now := time.Now()
	var ev []model.Event
	d.mu.Lock()
	e := d.entry(subjHost, m.Subject)
	// (e.host is subjHost's already: entry.)
	e.labels, e.meta = d.shared.labels(hb.Info.Labels), d.shared.meta(e.meta, hb.Info.Version, hb.Info.AgentID)
	e.statuses = d.shared.statuses(e.statuses, hb.Statuses)
	d.heard(e, now)
	e.fullAt, e.keepalives = unixNano(hb.Time), 0
	switch {
	case hb.Leaving && e.online:
		e.online = false
		d.online--
		ev = append(ev, model.Event{ID: derivedEventID(e.host, model.EventAgentOffline, unixNano(hb.Time), 0),
			Time: now, Host: e.host, Kind: model.EventAgentOffline, Message: "agent stopped"})
	case !hb.Leaving && !e.online:
		e.online = true
		d.online++
		msg := "agent online"
		if hb.Reconnected > 0 || hb.Dropped > 0 {
			msg = fmt.Sprintf("agent back online; %d events reported late, %d dropped while the server was unreachable", hb.Reconnected, hb.Dropped)
		}
		ev = append(ev, model.Event{ID: derivedEventID(e.host, model.EventAgentOnline, unixNano(hb.Time), 0),
			Time: now, Host: e.host, Kind: model.EventAgentOnline, Message: msg})
	}
	// The host gets three of its own intervals of silence (at least
	// OfflineAfter); told a new one, three of the longer of the two
	// until it is heard at it.
	var told time.Duration
	if e.beat = d.rule.beatCode(hb.Interval, hb.Hints); !hb.Leaving {
		told = d.tell(e, now)
	}
	e.setGrace(beatGrace(d.opts.OfflineAfter, hb.Interval, told))
	d.mu.Unlock()
	d.emit(ev...)
	d.sendHint(subjHost, told)
}

// tell decides whether e's host is told another heartbeat interval
// (beatRule.hint, the fleet being the hosts online), and returns it (0:
// not told). The host is taken to beat at it from now on: told again
// only when a full heartbeat of it says otherwise. d.mu is held.
func (d *Dispatcher) tell(e *hostEntry, now time.Time) time.Duration {
	k, ok := d.rule.hint(e.beat, d.online, now.Sub(d.epoch))
	if !ok {
		return 0
	}
	e.beat = uint8(2 + k)
	return d.rule.interval(k)
}

// sendHint tells host id's agent to heartbeat every iv (0: nothing to
// tell), on its own subject (BeatSubject), which only a server may
// publish on.
func (d *Dispatcher) sendHint(id model.HostID, iv time.Duration) {
	if iv <= 0 {
		return
	}
	data, err := json.Marshal(BeatHint{Interval: iv})
	if err != nil {
		d.log.Error("dispatcher: encode heartbeat interval", "err", err)
		return
	}
	if err := d.nc.Load().Publish(BeatSubject(id), data); err != nil {
		d.log.Debug("dispatcher: heartbeat interval not sent", "host", id.String(), "err", err)
		return
	}
	d.hintsSent.Add(1)
}

// onKeepalive records a heartbeat (on subject subj) that says nothing
// changed since the host's last full one: the host is alive; what it said
// last still holds. Its subject is parsed only when the dispatcher does
// not know it yet: a host whose full beat was missed is then listed by
// its address until its next full beat (at most ServeOptions.FullEvery
// beats).
func (d *Dispatcher) onKeepalive(subj string) {
	d.mu.Lock()
	e := d.beat(subj)
	if e == nil {
		d.mu.Unlock()
		id, err := hostFromSubject(subj)
		if err != nil {
			d.log.Warn("dispatcher: heartbeat", "err", err)
			return
		}
		d.mu.Lock()
		e = d.entry(id, subj)
	}
	now := time.Now()
	var ev []model.Event
	d.heard(e, now)
	e.keepalives++
	if !e.online {
		e.online = true
		d.online++
		ev = append(ev, model.Event{ID: derivedEventID(e.host, model.EventAgentOnline, e.fullAt, e.keepalives),
			Time: now, Host: e.host, Kind: model.EventAgentOnline, Message: "agent online"})
	}
	// The interval the host may beat at: once a full beat was heard, the
	// one it said (in its grace already: 0 here). With none heard (this
	// server or its dispatcher is new, its hello missed) the host beats
	// at whatever a server told it before, as slow as beatDownSteps past
	// this fleet's step (the host counted) before it would be told down.
	// Kept at offline_after, a host of a fleet whose interval passed it
	// (~84,000 hosts by default) went offline and online at every beat
	// until its next full one.
	var iv time.Duration
	if e.fullAt == 0 {
		r := d.rule
		iv = r.interval(min(r.want(d.online)+beatDownSteps, r.maxStep()))
	}
	// A host beating faster than the fleet now may (it grew) is told at
	// its keepalive, not only at its next full beat, up to FullEvery
	// beats later. Its grace only grows (a full beat set it, at least
	// offline_after): the rule of a full beat's (beatGrace), with iv.
	told := d.tell(e, now)
	e.setGrace(max(e.grace(), beatGrace(d.opts.OfflineAfter, iv, told)))
	id := e.id
	d.mu.Unlock()
	d.emit(ev...)
	d.sendHint(id, told)
}

// entry is host id's entry (a new one knows only the host), known from
// now on by its heartbeat subject subj too. d.mu is held; subj is id's.
func (d *Dispatcher) entry(id model.HostID, subj string) *hostEntry {
	// Known by its subject: found without making its address's text
	// (an allocation at every full heartbeat).
	if e := d.beat(subj); e != nil && e.id == id {
		return e
	}
	host := id.Host()
	e := d.hosts[host]
	if e == nil {
		e = &hostEntry{host: host}
		e.setGrace(d.opts.OfflineAfter)
		d.hosts[host] = e
		d.all = append(d.all, e)
		d.sorted = nil
	}
	if e.id != id { // its place in the order may move
		d.sorted = nil
	}
	e.id = id
	if isHeartbeatSubject(id, subj) {
		d.beats[maphash.String(d.beatSeed, subj)] = e
	}
	return e
}

// beat is the entry known by heartbeat subject subj (nil for none): the
// one under its hash whose host's heartbeat subject it is. d.mu is held.
func (d *Dispatcher) beat(subj string) *hostEntry {
	e := d.beats[maphash.String(d.beatSeed, subj)]
	if e == nil || !isHeartbeatSubject(e.id, subj) {
		return nil
	}
	return e
}

// isHeartbeatSubject reports whether subj is id's heartbeat subject,
// made on the stack (a keepalive's path allocates nothing).
func isHeartbeatSubject(id model.HostID, subj string) bool {
	if !id.Valid() || len(subj) > MaxSubject {
		return false
	}
	var buf [MaxSubject]byte
	b := append(buf[:0], subjectPrefix...)
	b = subjects.AppendHostToken(b, id)
	b = append(b, ".hb"...)
	return string(b) == subj
}

// heard records that e's host was heard from at now. d.mu is held.
func (d *Dispatcher) heard(e *hostEntry, now time.Time) {
	e.seen, e.heard = int64(now.Sub(d.epoch)), true
}

// silent is how long e's host has not been heard from at now (e.heard).
func (d *Dispatcher) silent(e *hostEntry, now time.Time) time.Duration {
	return now.Sub(d.epoch) - time.Duration(e.seen)
}

// beatHost is the host of heartbeat subject subj: the one its entry
// names when a heartbeat came on it before (parsed once, not at every
// full heartbeat), else parsed.
func (d *Dispatcher) beatHost(subj string) (model.HostID, error) {
	d.mu.Lock()
	e := d.beat(subj)
	d.mu.Unlock()
	if e != nil {
		return e.id, nil
	}
	return hostFromSubject(subj)
}

// sweep turns hosts offline when their heartbeats stop.
func (d *Dispatcher) sweep() {
	defer close(d.done)
	tick := min(d.opts.OfflineAfter/4, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			d.dropLate(now)
			// Heartbeats received but not yet recorded (a loaded server
			// behind on 20,000 a second) may be the silent hosts' own:
			// meanwhile a host is judged silent only after twice its
			// grace, else every host flaps offline and online again, and
			// the storm of events loads the server more.
			behind := d.backlog() >= hbBehind
			var ev []model.Event
			d.mu.Lock()
			for _, e := range d.all {
				if !e.online {
					continue
				}
				if quiet := d.silent(e, now); quiet > e.grace() && (!behind || quiet > 2*e.grace()) {
					e.online = false
					d.online--
					ev = append(ev, model.Event{ID: derivedEventID(e.host, model.EventAgentOffline, e.fullAt, e.keepalives),
						Time: now, Host: e.host, Kind: model.EventAgentOffline,
						Message: fmt.Sprintf("no heartbeat for %s", quiet.Round(time.Second))})
				}
			}
			online := d.online
			d.mu.Unlock()
			d.emit(ev...)
			d.logFleetInterval(online)
		}
	}
}

// logFleetInterval says when the interval the fleet is told changes
// (the hosts online passed a step of the rule).
func (d *Dispatcher) logFleetInterval(online int) {
	if d.rule.min <= 0 {
		return
	}
	k := d.rule.want(online)
	if k == d.fleetStep {
		return
	}
	d.fleetStep = k
	d.log.Info("dispatcher: heartbeat interval of the fleet", "interval", d.rule.interval(k), "online", online,
		"max_heartbeats_per_second", d.rule.rate, "told", d.hintsSent.Load())
}

// hbBehind is the heartbeat backlog beyond which the sweep takes the
// server to be behind (see sweep).
const hbBehind = 1024

// backlog is the number of heartbeats received and not yet recorded: in
// the workers' queues and the subscription's pending buffer.
func (d *Dispatcher) backlog() int {
	n := 0
	for _, q := range d.hbq {
		n += len(q)
	}
	d.smu.Lock()
	defer d.smu.Unlock()
	for _, s := range d.natsSubs {
		if s.Subject == AllHeartbeats {
			if p, _, err := s.Pending(); err == nil {
				n += p
			}
		}
	}
	return n
}

// subscribers is a set of callbacks, each held until the context it was
// added with ends (SubscribeEvents, SubscribeLate). The zero value is
// empty and ready.
type subscribers[T any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(T)
}

// add holds fn until ctx ends.
func (s *subscribers[T]) add(ctx context.Context, fn func(T)) {
	s.mu.Lock()
	if s.fns == nil {
		s.fns = map[int]func(T){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	})
}

// list is the callbacks held now.
func (s *subscribers[T]) list() []func(T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.fns))
}

// empty reports whether no callback is held.
func (s *subscribers[T]) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fns) == 0
}

// interned keeps one copy of each label set and text the hosts report,
// at most internMax of each and internMaxBytes of their keys, values and
// texts (then it starts again: hostile or churning labels cost memory
// only up to the bound; a count alone let one agent, heartbeating a new
// label set of megabytes each time, have 65,536 of them kept). A set is
// kept under a hash of its pairs (16 bytes an entry, whether hosts share
// sets or not) and compared whole before it is shared. The zero value is
// ready. Guarded by Dispatcher.mu.
type interned struct {
	seed      maphash.Seed
	sets      map[uint64]labelSet
	texts     map[string]string
	metas     map[string]*agentMeta // of a version without an agent id
	setBytes  int                   // of the keys and values in sets
	textBytes int                   // of the texts
	metaBytes int                   // of the metas' texts
}

const (
	internMax      = 1 << 16
	internMaxBytes = 16 << 20
)

// labelSet is a host's labels as the dispatcher keeps them: keys and
// values in turn, by key, their words shared with other hosts' (word).
// The simulator's 100,000 hosts carry 62,002 distinct sets of five
// labels: a map a host (its group of eight slots) and its own keys were
// ~380 bytes of the ~740 a host kept; a set is ~190. Never changed once
// made: hosts with equal sets hold the same one.
type labelSet []string

// addTo adds the set's labels to m.
func (l labelSet) addTo(m map[string]string) {
	for i := 0; i+1 < len(l); i += 2 {
		m[l[i]] = l[i+1]
	}
}

// equal reports whether l holds exactly m's labels.
func (l labelSet) equal(m map[string]string) bool {
	if len(l) != 2*len(m) {
		return false
	}
	for i := 0; i+1 < len(l); i += 2 {
		if v, ok := m[l[i]]; !ok || v != l[i+1] {
			return false
		}
	}
	return true
}

// labels is the kept set of m's labels (nil when m has none): the one
// kept already when an equal set was, else a new one, kept.
func (x *interned) labels(m map[string]string) labelSet {
	if len(m) == 0 {
		return nil
	}
	if x.sets == nil {
		x.seed = maphash.MakeSeed()
		x.sets = map[uint64]labelSet{}
	}
	// The pairs' hashes summed: the same for any order of the map.
	var h uint64
	size := 0
	for k, v := range m {
		h += maphash.String(x.seed, k) ^ maphash.String(x.seed, v)*0x9e3779b97f4a7c15
		size += len(k) + len(v)
	}
	kept, ok := x.sets[h]
	if ok && kept.equal(m) {
		return kept
	}
	set := make(labelSet, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		set = append(set, x.word(k), x.word(m[k]))
	}
	if ok { // another set under the same hash: set is not kept
		return set
	}
	if len(x.sets) >= internMax || x.setBytes+size > internMaxBytes {
		x.sets, x.setBytes = map[uint64]labelSet{}, 0
	}
	x.sets[h] = set
	x.setBytes += size
	return set
}

// statuses is the statuses a host reported (sts) as kept: was, the ones
// kept from before, when they are equal, else sts at its length with its
// words shared (process keys and names, states, versions, command lines:
// the same on many hosts).
func (x *interned) statuses(was, sts []model.ProcStatus) []model.ProcStatus {
	if slices.Equal(was, sts) {
		return was
	}
	if len(sts) == 0 {
		return nil
	}
	if cap(sts) > len(sts) {
		sts = slices.Clone(sts)
	}
	for i := range sts {
		s := &sts[i]
		s.ProcKey, s.ProcName, s.Version = x.word(s.ProcKey), x.word(s.ProcName), x.word(s.Version)
		s.State, s.Cmdline, s.Message = model.ProcState(x.word(string(s.State))), x.word(s.Cmdline), x.word(s.Message)
	}
	return sts
}

// meta is the agentMeta of version and agentID as kept (nil for
// neither): was (a host's, from before) when it says the same, else the
// one kept for a version without an agent id (hosts share it), else a
// new one (an agent id is a host's own: keeping it here too would only
// cost the table's memory).
func (x *interned) meta(was *agentMeta, version, agentID string) *agentMeta {
	switch {
	case was != nil && was.version == version && was.agentID == agentID:
		return was
	case version == "" && agentID == "":
		return nil
	case agentID != "":
		return &agentMeta{version: x.text(version), agentID: agentID}
	}
	if m, ok := x.metas[version]; ok {
		return m
	}
	if x.metas == nil || len(x.metas) >= internMax || x.metaBytes+len(version) > internMaxBytes {
		x.metas, x.metaBytes = map[string]*agentMeta{}, 0
	}
	m := &agentMeta{version: x.text(version)}
	x.metas[m.version] = m
	x.metaBytes += len(version)
	return m
}

// word is the kept copy of s when s is short (internWord at most), else
// s: a long text (a hostile label of megabytes) does not empty the table
// of the words every host shares.
func (x *interned) word(s string) string {
	if len(s) > internWord {
		return s
	}
	return x.text(s)
}

// internWord bounds the texts word keeps.
const internWord = 256

// text is the kept copy of s.
func (x *interned) text(s string) string {
	if s == "" {
		return s
	}
	if kept, ok := x.texts[s]; ok {
		return kept
	}
	if x.texts == nil || len(x.texts) >= internMax || x.textBytes+len(s) > internMaxBytes {
		x.texts, x.textBytes = map[string]string{}, 0
	}
	x.texts[s] = s
	x.textBytes += len(s)
	return s
}
