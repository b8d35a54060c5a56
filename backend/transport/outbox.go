package transport

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"gseproc/model"
)

// session is the publishing side shared by ServeAgent and ServeFleet:
// heartbeats, the agent's events until JetStream has them, and reconnect
// handling.
//
// Events: each gets an id when pushed (kept with it on disk and on every
// retry) and waits in pend until JetStream acknowledges it on the
// session's acknowledgement subject (EventAckSubject of ackHost). A
// session with a spool writes each event there before publishing it and
// replays what it holds when it starts. Unacknowledged events are
// published again pubAckWait after each try (at most eventWindow at a
// time, oldest first); one that the stream refused (no stream yet: no
// server ever ran) waits out a backoff. Beyond EventBuffer pending events
// the oldest is dropped and counted.
type session struct {
	nc    atomic.Pointer[nats.Conn] // the link's connection in use
	opts  ServeOptions
	log   *slog.Logger
	ids   *eventIDs
	spool *spool // nil: pending events are kept in memory only

	// ackHost's acknowledgement subjects are the session's (the agent's
	// host; a fleet's first host): set before run, then read only.
	ackHost model.HostID
	hasAck  bool
	ackSub  *nats.Subscription // used by the run goroutine only
	// ownAcks: the session's owner subscribes to its acknowledgements
	// itself (an agent's inbox) and hands them to onAck.
	ownAcks bool

	// retry fires when an unacknowledged event is due again; used by the
	// run goroutine only.
	retry *time.Timer

	mu     sync.Mutex
	pend   []*outEvent // not acknowledged yet, oldest first (acked ones go at the next flush)
	byID   map[string]*outEvent
	nAcked int      // entries of pend acknowledged or dropped, to remove
	gone   []string // ids acknowledged or dropped since the spool last heard
	// late counts events published after the server had been unreachable
	// and dropped those lost to the bounded buffer, both not reported yet:
	// the next heartbeat says so, whichever path (reconnect, hello, tick)
	// happens to send it first.
	late, dropped int
	refusedAt     time.Time // when the last refusal by the stream was logged
	refusals      int       // refusals in a row: the backoff's step
	blocked       time.Time // no event is published before (the stream refused one)
	blockedAt     time.Time // when blocked was set
	notify        chan struct{}
	hello         chan struct{}

	// every is how often run beats (an agent's heartbeat interval, which
	// a server may change; a fleet's tick, its hosts each on their own
	// interval), in nanoseconds; phase (cap 1) moves the next beat (an
	// agent told a new interval beats first after a random part of it).
	every atomic.Int64
	phase chan time.Duration
}

// outEvent is an event waiting for JetStream's acknowledgement.
type outEvent struct {
	ev      model.Event // ID: the session's id for it
	data    []byte      // ev encoded, once
	late    bool        // waited while the connection was down; not counted yet
	written bool        // in the spool
	done    bool        // acknowledged or dropped
	tries   int
	sent    time.Time // last published
	next    time.Time // not published again before
}

// pubAckWait is how long a published event waits for its acknowledgement
// before it is published again; eventWindow bounds the events published
// and not acknowledged at once.
const (
	pubAckWait  = 5 * time.Second
	eventWindow = 256
)

// refusedBackoff spaces the tries of an event the stream refused.
var refusedBackoff = model.Backoff{Base: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: 0.2}

func newSession(l *Link, opts ServeOptions, log *slog.Logger) *session {
	s := &session{opts: opts, log: log, ids: newEventIDs(), byID: map[string]*outEvent{},
		notify: make(chan struct{}, 1), hello: make(chan struct{}, 1), phase: make(chan time.Duration, 1)}
	s.nc.Store(l.Conn())
	s.every.Store(int64(opts.HeartbeatInterval))
	return s
}

// interval is how often run beats.
func (s *session) interval() time.Duration { return time.Duration(s.every.Load()) }

// setInterval makes run beat every d from its next beat on; it reports
// whether d is new.
func (s *session) setInterval(d time.Duration) bool { return s.every.Swap(int64(d)) != int64(d) }

// rearm makes run's next beat come d from now (the last d asked wins).
func (s *session) rearm(d time.Duration) {
	for {
		select {
		case s.phase <- d:
			return
		default:
		}
		select {
		case <-s.phase:
		default:
		}
	}
}

// setAckHost makes h's acknowledgement subjects the session's.
func (s *session) setAckHost(h model.HostID) { s.ackHost, s.hasAck = h, true }

// openSpool keeps the session's events in dir and takes back the events
// a previous run left there (each published again, counted late); those
// of another host than only (when valid) are dropped.
func (s *session) openSpool(dir string, only model.HostID) error {
	sp, pending, err := openSpool(dir)
	if err != nil {
		return err
	}
	s.spool = sp
	var foreign []string
	s.mu.Lock()
	for _, e := range pending {
		if only.Valid() && !sameHost(e.Host, only) {
			foreign = append(foreign, e.ID)
			continue
		}
		if _, dup := s.byID[e.ID]; dup {
			continue
		}
		o := &outEvent{ev: e, late: true, written: true}
		s.pend = append(s.pend, o)
		s.byID[e.ID] = o
	}
	s.gone = append(s.gone, foreign...)
	n := len(s.pend)
	s.mu.Unlock()
	if len(foreign) > 0 {
		s.log.Warn("agent: events of another host in the spool; dropped", "n", len(foreign), "dir", dir)
	}
	if n > 0 {
		s.log.Info("agent: events not acknowledged before the last stop are published again", "n", n)
	}
	return nil
}

// conn is the connection the session publishes on.
func (s *session) conn() *nats.Conn { return s.nc.Load() }

// push keeps e for publishing (giving it an id when it has none); it
// never blocks.
func (s *session) push(e model.Event) {
	if e.ID == "" {
		e.ID = s.ids.next()
	}
	e = fitEvent(e)
	late := !s.conn().IsConnected()
	s.mu.Lock()
	if _, dup := s.byID[e.ID]; dup {
		s.mu.Unlock()
		return
	}
	if len(s.byID) >= s.opts.EventBuffer {
		for _, o := range s.pend {
			if !o.done {
				s.forget(o)
				s.dropped++
				break
			}
		}
	}
	o := &outEvent{ev: e, late: late}
	s.pend = append(s.pend, o)
	s.byID[e.ID] = o
	s.mu.Unlock()
	s.wake()
}

func (s *session) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// maxEventData bounds an event's JSON as published: EventStream refuses a
// message over maxEventSize (its headers counted), and the spool's lines
// are read up to spoolMaxLine.
const maxEventData = maxEventSize - 1024

// fitEvent is e with its message cut (at a character, marked) until its
// JSON fits maxEventData: an event the stream refuses would be published
// again forever and never stored (a restart's failure quotes the
// command's output, up to the agent's output_limit).
func fitEvent(e model.Event) model.Event {
	const mark = " [cut]"
	for range 64 {
		data, err := json.Marshal(e)
		if err != nil || len(data) <= maxEventData || e.Message == "" {
			return e
		}
		n := max(len(e.Message)-(len(data)-maxEventData)-len(mark), len(e.Message)/2)
		for n > 0 && !utf8.RuneStart(e.Message[n]) {
			n--
		}
		e.Message = e.Message[:n] + mark
		if n == 0 {
			e.Message = ""
		}
	}
	return e
}

// forget marks o acknowledged or dropped; s.mu is held.
func (s *session) forget(o *outEvent) {
	o.done = true
	delete(s.byID, o.ev.ID)
	s.nAcked++
	s.gone = append(s.gone, o.ev.ID)
}

// onAck takes JetStream's answer to a published event: acknowledged, it
// is done; refused (no stream, an error), it is tried again after a
// backoff.
func (s *session) onAck(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var a struct {
		Stream string `json:"stream"`
		Error  *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	var why string
	switch {
	case noResponders(m):
		why = "no stream takes the agents' events yet (no gseproc server has run on this NATS)"
	case json.Unmarshal(m.Data, &a) != nil:
		why = "acknowledgement not understood"
	case a.Error != nil:
		why = fmt.Sprintf("refused by JetStream: %s (%d)", a.Error.Description, a.Error.Code)
	case a.Stream != EventStream:
		why = fmt.Sprintf("acknowledged by stream %q, not %s", a.Stream, EventStream)
	}
	s.mu.Lock()
	o := s.byID[id]
	if o == nil {
		s.mu.Unlock()
		return // acknowledged already (a repeat), or dropped
	}
	logIt := false
	if why == "" {
		s.forget(o)
		s.refusals = 0
	} else if now := time.Now(); !o.sent.Before(s.blockedAt) {
		// (A refusal of an event sent before the last block is of the
		// same round: that block holds it already.)
		// Every pending event waits out the backoff and goes again in
		// order (one refused, the others are refused too): the stream
		// stores them in the order they happened.
		until := now.Add(refusedBackoff.Delay(s.refusals, rand.Float64()))
		s.refusals++
		for _, p := range s.pend {
			if !p.done && p.tries > 0 {
				p.next = until
			}
		}
		s.blocked, s.blockedAt = until, now
		if now.Sub(s.refusedAt) > 30*time.Second {
			s.refusedAt, logIt = now, true
		}
	}
	s.mu.Unlock()
	if logIt {
		s.log.Warn("agent: event not stored yet; kept and tried again", "reason", why)
	}
	s.wake()
}

// subscribeAcks subscribes to the session's acknowledgements on nc and
// checks that NATS took the subscription.
func (s *session) subscribeAcks(nc *nats.Conn) error {
	if !s.hasAck || s.ownAcks {
		return nil
	}
	subj := eventAckPattern(s.ackHost)
	sub, err := nc.Subscribe(subj, s.onAck)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subj, err)
	}
	if err := refused(nc, subj); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("%w (the credential must allow subscribing to its host's evack subjects: see backend/transport/natsembed/permissions.go)", err)
	}
	s.ackSub = sub
	return nil
}

// flush writes the new events to the spool, records those done there, and
// publishes those due (oldest first, at most eventWindow waiting at once);
// it arms the retry timer for the next one due. Run by the run goroutine.
func (s *session) flush() {
	s.mu.Lock()
	if s.nAcked > 0 {
		keep := s.pend[:0]
		for _, o := range s.pend {
			if !o.done {
				keep = append(keep, o)
			}
		}
		clear(s.pend[len(keep):])
		s.pend, s.nAcked = keep, 0
	}
	var fresh []model.Event
	var freshOut []*outEvent
	for _, o := range s.pend {
		if !o.written {
			o.written = true
			fresh = append(fresh, o.ev)
			freshOut = append(freshOut, o)
		}
	}
	gone := s.gone
	s.gone = nil
	s.mu.Unlock()
	if s.spool != nil {
		if err := s.spool.writeEvents(fresh); err != nil {
			s.log.Error("agent: events not kept on disk (published all the same; written again at the next flush)", "err", err)
			// Not on disk: the next flush tries again (a line written
			// twice is replayed under its id, kept once).
			s.mu.Lock()
			for _, o := range freshOut {
				if !o.done {
					o.written = false
				}
			}
			s.mu.Unlock()
		}
		if err := s.spool.done(gone, !s.anyWritten(), s.written); err != nil {
			s.log.Error("agent: event spool", "err", err)
		}
	}

	nc := s.conn()
	if !nc.IsConnected() || !s.hasAck {
		s.mu.Lock()
		for _, o := range s.pend {
			o.late = true
		}
		s.mu.Unlock()
		return
	}
	now := time.Now()
	var due []*outEvent
	var msgs []*nats.Msg
	var wake time.Time
	waiting := 0
	s.mu.Lock()
	if now.Before(s.blocked) {
		s.mu.Unlock()
		s.arm(s.blocked.Sub(now))
		return
	}
	for _, o := range s.pend {
		if o.done {
			continue
		}
		if o.tries > 0 && now.Before(o.next) {
			waiting++
			if wake.IsZero() || o.next.Before(wake) {
				wake = o.next
			}
			continue
		}
		if waiting >= eventWindow {
			break
		}
		m, err := s.eventMsg(o)
		if err != nil {
			s.log.Warn("agent: event dropped", "err", err)
			s.forget(o)
			continue
		}
		o.tries++
		o.sent, o.next = now, now.Add(pubAckWait)
		if wake.IsZero() || o.next.Before(wake) {
			wake = o.next
		}
		if o.late {
			o.late = false
			s.late++
		}
		waiting++
		due = append(due, o)
		msgs = append(msgs, m)
	}
	s.mu.Unlock()
	for i, m := range msgs {
		if err := nc.PublishMsg(m); err != nil {
			s.log.Warn("agent: publish event", "err", err)
			s.mu.Lock()
			for _, o := range due[i:] {
				o.next = now // tried again at the next flush
			}
			s.mu.Unlock()
			break
		}
	}
	if !wake.IsZero() {
		s.arm(time.Until(wake))
	}
}

// eventMsg is o as published; s.mu is held.
func (s *session) eventMsg(o *outEvent) (*nats.Msg, error) {
	id, err := hostID(o.ev.Host)
	if err != nil {
		return nil, err
	}
	if o.data == nil {
		if o.data, err = json.Marshal(o.ev); err != nil {
			return nil, fmt.Errorf("encode event: %w", err)
		}
	}
	return &nats.Msg{Subject: EventSubject(id), Reply: EventAckSubject(s.ackHost, o.ev.ID), Data: o.data,
		Header: nats.Header{jetstream.MsgIDHeader: []string{o.ev.ID}}}, nil
}

// anyWritten reports whether an event in the spool is still pending.
func (s *session) anyWritten() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.pend {
		if o.written && !o.done {
			return true
		}
	}
	return false
}

// written is the events in the spool and not done.
func (s *session) written() []model.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []model.Event
	for _, o := range s.pend {
		if o.written && !o.done {
			out = append(out, o.ev)
		}
	}
	return out
}

// arm sets the retry timer to fire in d (at least 10 ms).
func (s *session) arm(d time.Duration) {
	if s.retry == nil {
		return
	}
	s.retry.Stop()
	s.retry.Reset(max(d, 10*time.Millisecond))
}

// pending counts the events not acknowledged yet.
func (s *session) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// takeCounts returns and resets the late and dropped counts not reported
// yet.
func (s *session) takeCounts() (late, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	late, dropped = s.late, s.dropped
	s.late, s.dropped = 0, 0
	return late, dropped
}
