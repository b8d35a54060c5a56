package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"gseproc/model"
)

// Fleet is a simulated fleet (simulator.Fleet satisfies it): it answers for
// many hosts at once.
type Fleet interface {
	Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error)
	Hosts(ctx context.Context) ([]model.HostInfo, error)
	SubscribeEvents(ctx context.Context, fn func(model.Event))
}

// ServeFleet serves every host of f on one connection until ctx ends, as if
// each ran its own agent: one subscription per host, its inbox as an
// agent's (its op subject against a server from before the inboxes; all
// delivered to one channel, so thousands of hosts cost no goroutine each;
// the fleet answers ops and ignores cancels), heartbeats for
// the hosts the fleet says are online, and the fleet's events. A host the
// fleet reports unreachable answers with the unreachable status header; a
// host that does not answer before the request's deadline is not answered.
// Hosts added to the fleet later are picked up at the next heartbeat.
func ServeFleet(ctx context.Context, nc *nats.Conn, f Fleet, opts ServeOptions) error {
	return ServeFleetOn(ctx, FixedLink(nc), f, opts)
}

// ServeFleetOn is ServeFleet on the connections of l: when one is closed
// for good, every host is subscribed again on the next one.
func ServeFleetOn(ctx context.Context, l *Link, f Fleet, opts ServeOptions) error {
	if err := opts.prepare(4096); err != nil {
		return err
	}
	s := newSession(l, opts, opts.Logger)
	fs := newFleetServer(f, s, opts)
	if err := fs.refresh(ctx); err != nil {
		fs.unsubscribeAll()
		return err
	}
	// The fleet's events are acknowledged on its first host's subjects
	// (a sim credential may subscribe to those of every host it serves).
	for _, hi := range fs.infos {
		if id, err := hostID(hi.Host); err == nil {
			s.setAckHost(id)
			break
		}
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); fs.serveOps(hctx, opts.MaxConcurrent) }()

	// Each host beats on its own interval (the configured one, or the one
	// a server told it: servedHost.due), checked every fleetTick.
	tick := fleetTick(opts.HeartbeatInterval)
	s.setInterval(tick)
	// Each host's own plan; their periodic full beats are spread over
	// the period (100,000 hosts started at once do not all send a full
	// one on the same tick). Used by hb only, which runs on one goroutine.
	plans := map[model.HostID]*beatPlan{}
	hb := func(full bool, late, dropped int, leaving bool) {
		fs.mu.Lock()
		infos, served, hints := fs.infos, fs.order, fs.mode == modeInbox
		fs.mu.Unlock()
		now := time.Now()
		forced := full || leaving
		for i, hi := range infos {
			if hi.State != model.AgentOnline && !leaving {
				continue
			}
			sh := served[i]
			if sh == nil {
				continue // no valid identity: refresh did not subscribe it either
			}
			if !sh.due(now, tick, opts.HeartbeatInterval) && !forced {
				continue
			}
			p := sh.plan
			if p == nil {
				if p = plans[sh.id]; p == nil {
					p = newBeatPlan(opts.FullEvery, i)
					plans[sh.id] = p
				}
				sh.plan = p
			}
			if !p.next(full || leaving, heartbeatPrint(hi, nil)) {
				s.publish(sh.hbSubj, nil)
				continue
			}
			s.publishJSON(sh.hbSubj, Heartbeat{Info: hi, Time: now, Interval: sh.interval(opts.HeartbeatInterval), Hints: hints,
				Full: full, Reconnected: late, Dropped: dropped, Leaving: leaving})
		}
	}
	// The hosts' list is read again every configured interval, not at
	// every tick.
	var refreshed time.Time
	// Agent on/offline is what heartbeats say: the fleet's own such events
	// are not forwarded (the server derives them).
	events := func(ctx context.Context, fn func(model.Event)) {
		f.SubscribeEvents(ctx, func(e model.Event) {
			if e.Kind != model.EventAgentOnline && e.Kind != model.EventAgentOffline {
				fn(e)
			}
		})
	}
	err := s.run(ctx, l, events, hb, func() {
		now := time.Now()
		if now.Sub(refreshed) < opts.HeartbeatInterval-tick/2 {
			return
		}
		refreshed = now
		if err := fs.refresh(ctx); err != nil && ctx.Err() == nil {
			opts.Logger.Error("sim: refresh hosts", "err", err)
		}
	}, fs.attach, func() error { return fs.verify(ctx) })
	fs.unsubscribeAll()
	cancel()
	close(fs.done)
	wg.Wait()
	hb(false, 0, 0, true)
	if nc := s.conn(); nc.IsConnected() {
		_ = nc.FlushTimeout(2 * time.Second)
	}
	return err
}

// untilFleet is a fleet that bounds a request by its deadline itself
// (simulator.Fleet): no context with a timer is made per request.
type untilFleet interface {
	DispatchUntil(ctx context.Context, deadline time.Time, host model.Host, req model.AgentRequest) (model.AgentReply, error)
}

// newFleetServer is a server of f's hosts on s, serving none yet
// (refresh subscribes them).
func newFleetServer(f Fleet, s *session, opts ServeOptions) *fleetServer {
	return &fleetServer{f: f, s: s, subs: map[string]*servedHost{}, served: map[model.Host]*servedHost{}, legacy: opts.legacySubjects,
		msgs: make(chan *nats.Msg, 1<<16), done: make(chan struct{})}
}

type fleetServer struct {
	f Fleet
	s *session

	mu    sync.Mutex
	subs  map[string]*servedHost // op subject -> the (first) host subscribed to it
	nsubs []*nats.Subscription
	// mode is how the hosts are subscribed on the connection in use:
	// each host's inbox, or (a server from before it refused the first
	// host's) each host's op subject; decided at the first subscription.
	mode   subMode
	legacy bool // ServeOptions.legacySubjects: op subjects only
	infos  []model.HostInfo
	// served are the hosts subscribed on the connection in use, by host;
	// order is infos' (nil for a host without a valid identity).
	served map[model.Host]*servedHost
	order  []*servedHost
	msgs   chan *nats.Msg
	done   chan struct{} // closed when ServeFleet stops serving ops
	procs  procCache
	// refusedHints counts the heartbeat intervals refused (onBeat).
	refusedHints atomic.Int64
	// replyBufs are the buffers replies are encoded into, one reply per
	// request of every op (a new one each was a fifth of the bytes a
	// simulated fleet allocated in an op).
	replyBufs sync.Pool
}

// maxPooledReply bounds the reply buffers kept for reuse.
const maxPooledReply = 16 << 10

// respond answers m with rep, encoded into a buffer used again.
func (fs *fleetServer) respond(m *nats.Msg, rep model.AgentReply) {
	buf, _ := fs.replyBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	*buf = respondInto(*buf, m, rep, fs.s.log)
	if cap(*buf) <= maxPooledReply {
		fs.replyBufs.Put(buf)
	}
}

// servedHost is a host the fleet serves: its identity and heartbeat
// subject, made once when it is subscribed (every heartbeat round and
// every refresh parsed each of 100,000 addresses and built its subjects
// again: ~12% of a simulator's CPU), and its heartbeat plan (nil until
// its first beat; read and written by the heartbeat goroutine only).
type servedHost struct {
	host model.Host
	id   model.HostID
	// at is the host's place in the fleet's listing (a labelFleet's,
	// DispatchLaterTo's), -1 for another fleet's; read and written
	// under fleetServer.mu.
	at     int
	hbSubj string
	plan   *beatPlan
	labels map[string]string // made once, of a labelFleet
	// told is the interval a server told the host (0: none), set by
	// serveOps (takeHint's bounds checked); every and next are the
	// interval the host beats at (0: the configured one) and when its
	// next periodic beat is due, the heartbeat goroutine's.
	told  atomic.Int64
	every time.Duration
	next  time.Time
}

// labelFleet is a fleet that makes its hosts' labels on demand and never
// changes them (simulator.Fleet): HostsUnlabelled lists the hosts without
// labels, HostLabelsInto sets m to those of the host at place i. A served
// host's labels are made once, not at every refresh (each heartbeat
// interval): the simulator's Hosts makes a map for each host of a
// listing, ~100 ms for 100,000 hosts.
type labelFleet interface {
	HostsUnlabelled(ctx context.Context) ([]model.HostInfo, error)
	HostLabelsInto(i int, m map[string]string)
}

// fleetTick is how often a fleet looks for the hosts due to beat: their
// configured interval, at most a second (an interval a server tells a
// host is a second or more, or the configured one).
func fleetTick(configured time.Duration) time.Duration { return min(configured, time.Second) }

// interval is the host's heartbeat interval.
func (sh *servedHost) interval(configured time.Duration) time.Duration {
	if sh.every > 0 {
		return sh.every
	}
	return configured
}

// due reports whether the host's periodic beat is due at now (the tick
// nearest its time), and if so schedules the next one. A host told a
// new interval since its last beat takes it: its next beat then comes
// after a random part of it (beatPhase), as an agent's. Called by the
// heartbeat goroutine only.
func (sh *servedHost) due(now time.Time, tick, configured time.Duration) bool {
	if told := time.Duration(sh.told.Load()); told > 0 && told != sh.every {
		sh.every = told
		sh.next = now.Add(beatPhase(told, rand.Float64()))
	}
	if now.Before(sh.next.Add(-tick / 2)) {
		return false
	}
	every := sh.interval(configured)
	if now.Sub(sh.next) > every { // first beat, or far behind: from now
		sh.next = now
	}
	sh.next = sh.next.Add(every)
	return true
}

// fleetRequest is an AgentRequest with its process left undecoded (the
// outer field wins over the embedded one of the same name).
type fleetRequest struct {
	model.AgentRequest
	Process json.RawMessage `json:"process"`
}

// procCache decodes requests for a fleet: the hosts of one task receive
// the same process, decoded once for all of them (by reflection, it was
// most of a simulated fleet's work per request), and shared: a fleet
// reads a request's process, never changes it.
type procCache struct {
	mu sync.Mutex               // held by decodeInto, for all the rest
	m  map[string]model.Process // by encoding
	// last is the encoding found last, lastP its process: the requests
	// of an op name the same process, found by comparing their bytes
	// with it, without first finding where the object ends (objectEnd
	// was 9% of a simulated fleet's instructions).
	last  string
	lastP model.Process
	// lastTask is the task id read last (taskID).
	lastTask string
	// dl is the deadline read last (deadline).
	dl deadlineCache
}

// procCacheMax bounds the processes kept; beyond it the cache starts over.
const procCacheMax = 256

// decodeInto decodes a request into *req, whatever it held (the zero
// request on error), as json.Unmarshal into a zero model.AgentRequest
// does (FuzzFleetDecode), but for a request naming its process twice,
// which it takes the last of, whole. Into the caller's: a request is 560
// bytes, copied at each return. The cache's lock is taken once (four
// times a request, it was a tenth of decoding one).
func (c *procCache) decodeInto(data []byte, req *model.AgentRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*req = model.AgentRequest{} // fastRequest fills a zero request
	if c.fastRequest(data, req) {
		return nil
	}
	*req = model.AgentRequest{}
	var w fleetRequest
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*req = w.AgentRequest
	if len(w.Process) == 0 {
		return nil
	}
	if p, ok := c.m[string(w.Process)]; ok {
		req.Process = p
		return nil
	}
	// Into a process of its own: &req.Process handed to encoding/json
	// would move every request of serveOps to the heap.
	p := new(model.Process)
	if err := json.Unmarshal(w.Process, p); err != nil {
		*req = model.AgentRequest{}
		return err
	}
	req.Process = *p
	if c.m == nil || len(c.m) >= procCacheMax {
		c.m = map[string]model.Process{}
		c.last, c.lastP = "", model.Process{}
	}
	c.m[string(w.Process)] = req.Process
	return nil
}

// subMode is how a fleet's hosts are subscribed on a connection.
type subMode int

const (
	modeUndecided subMode = iota
	modeInbox             // InboxSubject: one subscription a host, as an agent
	modeOp                // OpSubject: a server from before the inbox
)

// subject is what host id is subscribed to in mode m.
func (m subMode) subject(id model.HostID) string {
	if m == modeInbox {
		return InboxSubject(id)
	}
	return OpSubject(id)
}

// decide picks fs.mode on a new connection: the inbox, unless NATS
// refuses the one of the first host to subscribe (id). It returns that
// host's inbox subscription when it was taken (nil otherwise, and once
// the mode is decided). fs.mu is held.
func (fs *fleetServer) decide(id model.HostID) *nats.Subscription {
	if fs.mode != modeUndecided {
		return nil
	}
	fs.mode = modeOp
	if fs.legacy {
		return nil
	}
	nc := fs.s.conn()
	subj := InboxSubject(id)
	sub, err := nc.ChanSubscribe(subj, fs.msgs)
	if err != nil {
		return nil
	}
	if refused(nc, subj) != nil {
		fs.s.log.Info("sim fleet: NATS does not grant the hosts' inboxes (a server from before them); serving on their op subjects")
		_ = sub.Unsubscribe()
		return nil
	}
	fs.mode = modeInbox
	return sub
}

// refresh subscribes the hosts new to the fleet (one subscription each,
// as an agent: the inbox, or the op subject).
func (fs *fleetServer) refresh(ctx context.Context) error {
	lf, making := fs.f.(labelFleet)
	var infos []model.HostInfo
	var err error
	if making {
		infos, err = lf.HostsUnlabelled(ctx)
	} else {
		infos, err = fs.f.Hosts(ctx)
	}
	if err != nil {
		return fmt.Errorf("sim fleet hosts: %w", err)
	}
	order := make([]*servedHost, len(infos))
	fs.mu.Lock()
	var added []string
	var serr error // a subscription failed: the hosts new since are not served
	for i, hi := range infos {
		if sh := fs.served[hi.Host]; sh != nil {
			order[i] = sh
			if making {
				infos[i].Labels = sh.labels
				sh.at = i
			}
			continue
		}
		if serr != nil {
			continue
		}
		id, err := hostID(hi.Host)
		if err != nil {
			fs.s.log.Warn("sim fleet: host without a valid identity; not served", "err", err)
			continue
		}
		sh := &servedHost{host: hi.Host, id: id, hbSubj: HeartbeatSubject(id), at: -1}
		opSubj := OpSubject(id)
		if _, ok := fs.subs[opSubj]; !ok {
			sub := fs.decide(id) // the first host's inbox, taken already
			subj := fs.mode.subject(id)
			if sub == nil {
				if sub, err = fs.s.conn().ChanSubscribe(subj, fs.msgs); err != nil {
					serr = fmt.Errorf("sim fleet: subscribe %s: %w", subj, err)
					continue
				}
			}
			fs.subs[opSubj] = sh
			fs.nsubs = append(fs.nsubs, sub)
			added = append(added, subj)
		}
		if making {
			sh.at = i
			sh.labels = map[string]string{}
			if lf.HostLabelsInto(i, sh.labels); len(sh.labels) == 0 {
				sh.labels = nil
			}
			infos[i].Labels = sh.labels
		}
		fs.served[hi.Host] = sh
		order[i] = sh
	}
	fs.infos, fs.order = infos, order
	fs.mu.Unlock()
	if serr != nil {
		return serr
	}
	if err := refused(fs.s.conn(), added...); err != nil {
		return fmt.Errorf("sim fleet: %w (does this credential's role sim declare every host of the fleet?)", err)
	}
	return nil
}

// verify checks, after a (re)connection, that NATS took every host's
// subscription. Inboxes a node refuses (one of a cluster not upgraded
// yet) are replaced by op subjects.
func (fs *fleetServer) verify(ctx context.Context) error {
	fs.mu.Lock()
	mode := fs.mode
	subjects := make([]string, 0, len(fs.served))
	for _, sh := range fs.served {
		subjects = append(subjects, mode.subject(sh.id))
	}
	fs.mu.Unlock()
	err := refused(fs.s.conn(), subjects...)
	if err != nil && mode == modeInbox {
		fs.s.log.Info("sim fleet: this NATS node does not grant the hosts' inboxes; serving on their op subjects")
		fs.unsubscribeAll()
		fs.mu.Lock()
		fs.subs, fs.served, fs.mode = map[string]*servedHost{}, map[model.Host]*servedHost{}, modeOp
		fs.mu.Unlock()
		err = fs.refresh(ctx)
	}
	if err != nil {
		return fmt.Errorf("sim fleet: %w (does this credential's role sim declare every host of the fleet?)", err)
	}
	return nil
}

// attach subscribes every host again on a new connection (the session
// already uses it).
func (fs *fleetServer) attach(ctx context.Context, _ *nats.Conn) error {
	fs.mu.Lock()
	fs.subs, fs.nsubs, fs.served, fs.mode = map[string]*servedHost{}, nil, map[model.Host]*servedHost{}, modeUndecided
	fs.mu.Unlock()
	return fs.refresh(ctx)
}

func (fs *fleetServer) unsubscribeAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, s := range fs.nsubs {
		_ = s.Unsubscribe()
	}
	fs.nsubs = nil
}

// serveOps answers the requests of every host. A fleet that answers
// later (laterToFleet: the simulator) is handed each request here, decoded
// on this goroutine, and answers it when its host's latency has passed
// without a goroutine waiting for it (by the host's place in its listing,
// to one answering function); what it does not take, and
// every request of any other fleet, is answered on a goroutine of its
// own, at most maxConc at once.
func (fs *fleetServer) serveOps(ctx context.Context, maxConc int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxConc)
	stop := fs.done
	ltf, _ := fs.f.(laterToFleet)
	// to answers a request of ltf, its message the token: one function
	// for every request, not a closure made for each.
	to := func(tok any, rep model.AgentReply, err error) {
		m := tok.(*nats.Msg)
		fs.answer(ctx, model.Host{}, m, rep, err, errors.Is(err, context.DeadlineExceeded))
	}
	for n := 1; ; n++ {
		var m *nats.Msg
		// A message waiting is taken without a select: while an op's
		// requests come, most are (a select each was 5% of a simulated
		// fleet's CPU per request). The stop is looked at every 256
		// messages too: a fleet stopping with thousands queued stops
		// within a few hundred, not after the last.
		if n%256 == 0 {
			select {
			case <-stop:
				return
			default:
			}
		}
		select {
		case m = <-fs.msgs:
		default:
			select {
			case <-stop:
				return
			case m = <-fs.msgs:
			}
		}
		if strings.HasSuffix(m.Subject, ".beat") {
			fs.onBeat(m)
			continue
		}
		if !strings.HasSuffix(m.Subject, ".op") {
			continue // a cancel or acknowledgement on a host's inbox: not served by a fleet
		}
		fs.mu.Lock()
		sh := fs.subs[m.Subject]
		var at int
		if sh != nil {
			at = sh.at
		}
		fs.mu.Unlock()
		if sh == nil {
			continue
		}
		host := sh.host
		var req model.AgentRequest
		if err := fs.procs.decodeInto(m.Data, &req); err != nil {
			fs.respond(m, model.AgentReply{Code: model.CodeIllegalOp, Message: fmt.Sprintf("decode request: %v", err)})
			continue
		}
		if ltf != nil && at >= 0 && ltf.DispatchLaterTo(ctx, req.Deadline, at, req, to, m) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-stop:
			return
		}
		wg.Add(1)
		// req by argument: captured, it was moved to the heap for every
		// request, those DispatchLaterTo takes too.
		go func(req model.AgentRequest) {
			defer wg.Done()
			defer func() { <-sem }()
			fs.handle(ctx, host, m, req)
		}(req)
	}
}

// onBeat takes the heartbeat interval a server tells one host (on its
// inbox) as an agent does (takeHint); what is refused is counted and
// logged once in a while, not for each of 100,000 hosts.
func (fs *fleetServer) onBeat(m *nats.Msg) {
	opSubj := strings.TrimSuffix(m.Subject, ".beat") + ".op"
	fs.mu.Lock()
	sh := fs.subs[opSubj]
	fs.mu.Unlock()
	if sh == nil {
		return
	}
	host := sh.host
	h, err := decodeBeatHint(m.Data)
	if err == nil {
		var ok bool
		if h.Interval, ok = takeHint(fs.s.opts.HeartbeatInterval, h.Interval); !ok {
			err = errors.New("out of bounds")
		}
	}
	if err != nil {
		if fs.refusedHints.Add(1)%1000 == 1 {
			fs.s.log.Warn("sim fleet: heartbeat interval from the server refused (every 1,000th logged)", "host", host.String(), "err", err)
		}
		return
	}
	sh.told.Store(int64(h.Interval))
}

// laterToFleet is a fleet that answers a request when it is due, without
// a goroutine waiting for it (simulator.Fleet): it takes a host by its
// place in its listing (labelFleet.HostsUnlabelled's) and answers
// to(tok, ...), the reply's Status valid until to returns; false when it
// does not take the request (handle answers it).
type laterToFleet interface {
	DispatchLaterTo(ctx context.Context, deadline time.Time, at int, req model.AgentRequest, to func(tok any, rep model.AgentReply, err error), tok any) bool
}

// handle answers req, the request m, on the calling goroutine.
func (fs *fleetServer) handle(ctx context.Context, host model.Host, m *nats.Msg, req model.AgentRequest) {
	var rep model.AgentReply
	var err error
	var late bool // the request's deadline came before the answer
	if uf, ok := fs.f.(untilFleet); ok {
		rep, err = uf.DispatchUntil(ctx, req.Deadline, host, req)
		late = errors.Is(err, context.DeadlineExceeded)
	} else {
		dctx := ctx
		if !req.Deadline.IsZero() {
			var cancel context.CancelFunc
			dctx, cancel = context.WithDeadline(ctx, req.Deadline)
			defer cancel()
		}
		rep, err = fs.f.Dispatch(dctx, host, req)
		late = dctx.Err() != nil
	}
	fs.answer(ctx, host, m, rep, err, late)
}

// answer replies to m with what the fleet answered: rep, or err (late:
// the request's deadline came first). host names the host in a log (the
// zero one: m's, looked up).
func (fs *fleetServer) answer(ctx context.Context, host model.Host, m *nats.Msg, rep model.AgentReply, err error, late bool) {
	switch {
	case errors.Is(err, model.ErrUnreachable):
		out := nats.NewMsg(m.Reply)
		out.Header.Set(StatusHeader, statusUnreachable)
		out.Data = []byte(err.Error())
		if err := m.RespondMsg(out); err != nil {
			if host == (model.Host{}) {
				host = fs.hostOf(m.Subject)
			}
			fs.s.log.Warn("sim: reply lost", "host", host.String(), "err", err)
		}
	case err != nil && (late || ctx.Err() != nil):
		// The host did not answer in time: neither do we.
	case err != nil:
		fs.respond(m, model.AgentReply{Code: model.CodeCommandFailed, Message: err.Error()})
	default:
		fs.respond(m, rep)
	}
}

// hostOf is the host served on op subject subj (the zero host when none).
func (fs *fleetServer) hostOf(subj string) model.Host {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if sh := fs.subs[subj]; sh != nil {
		return sh.host
	}
	return model.Host{}
}
