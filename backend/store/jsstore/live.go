package jsstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An API call's store call left unanswered: outage or slow answer?
//
// An API call is bounded (backend.WithStoreWait): its caller must hear
// 503 with the reason within two seconds when the store is unreachable,
// but a loaded machine's slow answer must not turn into a 503. Failures
// that answer (no responders, a 503 from JetStream) are retried within
// the bound and then reported. A request that stays unanswered is judged
// (judge) by a second, cheap probe shared by every call waiting meanwhile
// (live, checkLive): a PING on the connection (answered by the NATS
// server itself, not by JetStream) and an info of every stream the store
// uses (each answered by that stream's leader: one stream's leader says
// nothing of another's, nor does the meta leader). Positive evidence
// fails the call at once with the reason: the connection down, an info
// refused (no responders, 503, a stream offline), a stream without a
// leader or whose leader has not heard from a quorum of its replicas
// (writes cannot be acknowledged). Every info answered healthy: JetStream
// is alive and the call is only slow: it keeps its attempt
// (attemptTimeout).
//
// Silence is judged by what answers, not by a clock alone (decide): a
// loaded machine is slow everywhere, so the probe's silence is counted in
// time this process was scheduled (checkLive's ticks; a tick that comes
// late counts two ticks at most), and it is an outage only when, for
// silence of that time, one of these holds:
//   - not a byte came back on the connection, not even the PING's PONG:
//     the NATS server is stopped, hung, or cut off without the
//     connection closing (a SIGSTOPped server, a dead link);
//   - the PONG came back but nothing from JetStream (no info, and no
//     other call of the store answered since the probe was sent):
//     JetStream is hung while NATS runs;
//   - some streams' infos came back and others did not, and no other
//     call of the store was answered meanwhile: those have no leader (an
//     election, or their replicas' nodes gone). While other calls are
//     answered, JetStream may be answering a flood of requests in turn:
//     an info not yet answered then proves nothing (a stream without a
//     leader is mostly told by its replicas, or the meta leader, saying
//     so: positive evidence).
//
// A probe still undecided after liveTimeout is no verdict: the call is
// left to its attempt time.

// liveLead is how long before a call's bound the probe is asked;
// liveTimeout bounds the probe; liveFresh is how long its verdict is
// reused; peerSilence is how long a replica may go unheard by its leader
// and still count for the quorum (the leader hears from each at least
// every second while healthy).
//
// silence is how much scheduled time a probe may go unanswered (see
// decide) before it is an outage; liveTick is how often the probe counts
// it. With the server's bound (1.5 s) the probe is asked 0.5 s into a
// call, so a silent store is judged 1.5 s into it on an idle machine.
const (
	liveLead    = time.Second
	liveTimeout = attemptTimeout
	liveFresh   = 500 * time.Millisecond
	peerSilence = 3 * time.Second
	silence     = time.Second
	liveTick    = 25 * time.Millisecond
)

// liveness is the shared probe (see above).
type liveness struct {
	mu   sync.Mutex
	cur  *liveCheck // in flight, or the last one done
	last *liveCheck // the last one with a verdict (Outage)
	// since is when the probes began finding the store unreachable (zero
	// while they find it answering, or only some streams unavailable).
	since time.Time
}

// record sets c's finding f, answered at, and keeps it as the last
// verdict unless it is none (errCheckUnanswered). since follows the
// store's outage (Outage): a verdict on some streams is none, so an
// outage of the whole store that follows one is dated from its own first
// verdict, not from the streams'.
func (l *liveness) record(c *liveCheck, f finding, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.finding, c.at = f, at
	if errors.Is(f.err, errCheckUnanswered) {
		return
	}
	l.last = c
	switch {
	case f.err == nil || errors.Is(f.err, errStreamDown):
		l.since = time.Time{}
	case l.since.IsZero():
		l.since = at
	}
}

type liveCheck struct {
	done chan struct{}
	at   time.Time // when it was answered
	finding
}

// finding is what a probe found (checkLive).
type finding struct {
	err error // nil: JetStream answers; else why it does not
	// streams are the streams found unavailable when err is an
	// errStreamDown (the others answer): sorted.
	streams []string
	// lag is the most operations a replica of the store's streams is
	// behind its leader, behind the replicas not current (of the streams
	// answered).
	lag    uint64
	behind int
}

// live returns the check in flight, the last one when fresh, or a new one.
func (s *Store) live() *liveCheck {
	l := &s.liveness
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.cur; c != nil {
		select {
		case <-c.done:
			if time.Since(c.at) < liveFresh {
				return c
			}
		default:
			return c
		}
	}
	c := &liveCheck{done: make(chan struct{})}
	// Added under s.mu unless closed, so Close's Wait counts it.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.err, c.at = errClosed, time.Now()
		close(c.done)
		return c
	}
	s.wg.Add(1)
	s.mu.Unlock()
	l.cur = c
	go func() {
		defer s.wg.Done()
		l.record(c, s.checkLive(), time.Now())
		close(c.done)
	}()
	return c
}

// down says whether c is answered and found JetStream unreachable (an
// unanswered check is no verdict: see judge).
func (c *liveCheck) down() bool {
	select {
	case <-c.done:
		return c.err != nil && !errors.Is(c.err, errCheckUnanswered)
	default:
		return false
	}
}

// downFor says whether c is answered and found unreachable JetStream, or
// a stream of on (the streams a call waits on; none: unknown, any), so
// that a verdict on some streams fails only the calls that wait on them.
func (c *liveCheck) downFor(on []string) bool {
	return c.down() && affects(c.finding, on)
}

// affects says whether a verdict f (an outage) concerns a call waiting on
// the streams on: a verdict on the whole store concerns every call, one
// on some streams the calls on them, and those that do not say which
// they wait on (none, or "").
func affects(f finding, on []string) bool {
	if !errors.Is(f.err, errStreamDown) || len(on) == 0 || slices.Contains(on, "") {
		return true
	}
	for _, n := range on {
		if slices.Contains(f.streams, n) {
			return true
		}
	}
	return false
}

// ErrNATSSilent marks an Outage in which the NATS server answers nothing
// on the connection, not even a PING (stopped or cut off while the
// connection stays open), as opposed to JetStream alone not answering.
var ErrNATSSilent = errors.New("NATS answers nothing")

// Outage is the store's own finding that it cannot reach JetStream, with
// the reason and since when: the verdict of its last probe (an API call's
// that waited, see judge) when that found NATS or the whole of JetStream
// silent or refusing. nil: the last probe found it answering, or found
// some streams only unavailable (their calls fail with that reason), or
// the store has been answered since. It never waits on NATS: a
// finding older than liveFresh is probed again in the background, so that
// repeated readings (a readiness prober's, every API call's) follow the
// outage and its end. errors.Is(err, ErrNATSSilent) tells a NATS server
// that answers nothing from a JetStream that does not.
func (s *Store) Outage() (since time.Time, err error) {
	l := &s.liveness
	l.mu.Lock()
	c, since := l.last, l.since
	l.mu.Unlock()
	if c == nil || c.err == nil || errors.Is(c.err, errStreamDown) {
		// A verdict on some streams (no leader, no quorum, refused) is the
		// calls' that wait on them, not the server's: a stream's leader
		// election after a node died must not make the server unready.
		return time.Time{}, nil
	}
	if s.lastAnswer.Load() > c.at.UnixNano() {
		return time.Time{}, nil // silent then, answering since
	}
	if time.Since(c.at) >= liveFresh {
		s.live()
	}
	return since, fmt.Errorf("%w: %w", errDown, c.err)
}

// Health is what the store's probe found (Check): NATS, JetStream and
// each of the store's streams.
type Health struct {
	// At is when the probe was answered.
	At time.Time
	// Err is nil when NATS and every stream of the store answer, each
	// stream's leader hearing from a quorum of its replicas; else why not.
	// errors.Is(Err, ErrNATSSilent): NATS answers nothing, not even a
	// PING.
	Err error
	// Streams, when Err is about some streams only (the others answer:
	// their calls go on, as a server's readiness should), are their names.
	Streams []string
	// Unanswered: the probe came to no verdict within its time (3 s
	// counted by the clock; a loaded machine, or evidence either way):
	// Err says so; it is no finding of an outage.
	Unanswered bool
	// Lag is the most operations any replica of the store's streams is
	// behind its leader; Behind counts the replicas not current.
	Lag    uint64
	Behind int
}

// Check probes the store now, as an API call waiting on it does (see the
// top of this file), for a readiness prober: it joins the probe in flight,
// or takes one answered within liveFresh, else starts one; every caller
// shares it (no probe per caller). It waits for the probe's verdict
// (bounded by liveTimeout) or ctx. Its verdict is also the store's Outage
// and fails API calls waiting on the store (judge), as theirs would.
func (s *Store) Check(ctx context.Context) Health {
	c := s.live()
	select {
	case <-c.done:
	case <-ctx.Done():
		return Health{At: time.Now(), Err: ctx.Err(), Unanswered: true}
	}
	return Health{At: c.at, Err: c.err, Streams: c.streams, Unanswered: errors.Is(c.err, errCheckUnanswered),
		Lag: c.lag, Behind: c.behind}
}

// errStreamDown marks a verdict about some of the store's streams (the
// others answer).
var errStreamDown = errors.New("stream unavailable")

// errClosed is a call or probe of a closed store.
var errClosed = errors.New("jsstore: closed")

// checkLive probes JetStream for the store (see above): a nil err when
// it answers, else why not (errCheckUnanswered: no verdict within
// liveTimeout). Every stream's info is awaited (or judged by silence), so
// that a verdict on some streams names each of them.
func (s *Store) checkLive() (f finding) {
	b := s.on()
	nc := b.js.Conn()
	if !nc.IsConnected() {
		f.err = fmt.Errorf("the NATS connection is %s", strings.ToLower(nc.Status().String()))
		return f
	}
	ctx, cancel := context.WithTimeout(s.ctx, liveTimeout)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	sent := time.Now()
	in0 := nc.Stats().InMsgs
	type answer struct {
		stream string
		info   *jetstream.StreamInfo
		err    error
	}
	names := s.streams.all()
	answers := make(chan answer, len(names))
	pong := make(chan error, 1)
	wg.Go(func() { pong <- nc.FlushWithContext(ctx) })
	for _, name := range names {
		wg.Go(func() {
			st, err := b.js.Stream(ctx, name)
			a := answer{stream: name, err: err}
			if err == nil {
				a.info = st.CachedInfo()
			}
			answers <- a
		})
	}
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	bad := map[string]error{} // streams found unavailable, and why
	tick := time.NewTicker(liveTick)
	defer tick.Stop()
	e := evidence{}
	last := sent
	for {
		select {
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				f.err = errClosed
				return f
			}
			if len(bad) > 0 {
				f.err, f.streams = streamsDown(bad, len(names))
				return f
			}
			f.err = fmt.Errorf("%w: %w", errCheckUnanswered, ctx.Err())
			return f
		case err := <-pong:
			e.pong = err == nil
		case now := <-tick.C:
			// A tick that comes late (the machine busy) counts two at most:
			// silence is counted in time this process was scheduled.
			e.quiet += min(now.Sub(last), 2*liveTick)
			last = now
		case a := <-answers:
			if errors.Is(a.err, context.DeadlineExceeded) || errors.Is(a.err, context.Canceled) {
				continue // unanswered: ctx.Done says so
			}
			delete(pending, a.stream)
			switch {
			case a.err == nil:
				s.lastAnswer.Store(time.Now().UnixNano())
				e.answered++
				if err := quorum(a.info); err != nil {
					bad[a.stream] = err
				} else if c := a.info.Cluster; c != nil {
					for _, r := range c.Replicas {
						f.lag = max(f.lag, r.Lag)
						if !r.Current {
							f.behind++
						}
					}
				}
			case refused(a.err):
				bad[a.stream] = fmt.Errorf("JetStream refuses its info: %w", a.err)
			default:
				s.lastAnswer.Store(time.Now().UnixNano())
				e.answered++ // an answer, if not the one hoped for: JetStream is there
			}
			if len(pending) == 0 {
				if len(bad) > 0 {
					f.err, f.streams = streamsDown(bad, len(names))
				}
				return f
			}
		}
		e.inMoved = nc.Stats().InMsgs != in0
		e.jsAnswered = s.lastCall.Load() > sent.UnixNano()
		e.pending = e.pending[:0]
		for n := range pending {
			e.pending = append(e.pending, n)
		}
		if err := decide(e); err != nil {
			if !errors.Is(err, errStreamDown) {
				f.err = err
				return f
			}
			for _, n := range e.pending {
				bad[n] = fmt.Errorf("unanswered for %s while the store's other streams answer (no leader)", e.quiet.Round(time.Millisecond))
			}
		}
		if len(bad) > 0 && e.quiet >= silence {
			// The others still unanswered after silence are left unjudged
			// (JetStream may be answering a flood in turn).
			f.err, f.streams = streamsDown(bad, len(names))
			return f
		}
		if !nc.IsConnected() {
			f.err = fmt.Errorf("the NATS connection is %s", strings.ToLower(nc.Status().String()))
			return f
		}
	}
}

// streamsDown is the verdict on the streams of bad (of the store's all):
// an errStreamDown naming each and why (sorted), or, when every stream
// of the store is unavailable, the whole store's outage.
func streamsDown(bad map[string]error, all int) (error, []string) {
	names := slices.Sorted(maps.Keys(bad))
	var why []string
	for _, n := range names {
		why = append(why, "stream "+n+": "+bad[n].Error())
	}
	if len(names) == all {
		return fmt.Errorf("none of the store's %d streams can serve: %s", all, strings.Join(why, "; ")), nil
	}
	return fmt.Errorf("%w: %s", errStreamDown, strings.Join(why, "; ")), names
}

// evidence is what a probe has heard (checkLive), for decide.
type evidence struct {
	quiet      time.Duration // scheduled time since the probe was sent
	pong       bool          // the probe's PING was answered
	inMoved    bool          // a message came in on the connection since it was sent
	jsAnswered bool          // JetStream answered another call of the store since
	answered   int           // stream infos answered
	pending    []string      // streams whose info is unanswered
}

// decide says whether a probe's silence is an outage, and why (nil: not
// yet, or not at all): see the comment at the top.
func decide(e evidence) error {
	if e.quiet < silence || len(e.pending) == 0 {
		return nil
	}
	switch {
	case !e.pong && !e.inMoved && !e.jsAnswered && e.answered == 0:
		return fmt.Errorf("%w on the connection, not even a PING, for %s (the NATS server stopped or cut off)", ErrNATSSilent, e.quiet.Round(time.Millisecond))
	case e.pong && !e.jsAnswered && e.answered == 0:
		return fmt.Errorf("NATS answers a PING but JetStream answers nothing for %s (JetStream hung, or no meta leader)", e.quiet.Round(time.Millisecond))
	case e.answered > 0 && !e.jsAnswered:
		p := slices.Clone(e.pending)
		slices.Sort(p)
		return fmt.Errorf("%w: stream %s unanswered for %s while the store's other streams answer (no leader)", errStreamDown, strings.Join(p, ", "), e.quiet.Round(time.Millisecond))
	}
	return nil
}

// refused says err is JetStream refusing a stream's info: no responders,
// 503 (no leader, no quorum) or the stream offline (every replica's node
// gone: the meta leader says so).
func refused(err error) bool {
	const streamOffline = 10118 // nats-server JSStreamOfflineErr
	var apiErr *jetstream.APIError
	return transient(err) || errors.As(err, &apiErr) && apiErr.ErrorCode == streamOffline
}

// errCheckUnanswered is a check left unanswered for liveTimeout.
var errCheckUnanswered = errors.New("a stream info was not answered either")

// quorum says why the stream's leader, which answered info, cannot
// acknowledge writes (nil: it can): it has not heard from a quorum of
// its replicas within peerSilence.
func quorum(info *jetstream.StreamInfo) error {
	if c := info.Cluster; c != nil && len(c.Replicas) > 0 {
		if c.Leader == "" {
			return fmt.Errorf("no leader (its replicas answer, electing one or without a quorum): writes cannot be acknowledged")
		}
		heard := 1 // the leader, which answered
		for _, r := range c.Replicas {
			if r != nil && !r.Offline && r.Active < peerSilence {
				heard++
			}
		}
		if size := len(c.Replicas) + 1; heard < size/2+1 {
			return fmt.Errorf("the store's stream leader %s hears from %d of %d replicas: no quorum to acknowledge writes", c.Leader, heard-1, size-1)
		}
	}
	return nil
}

// errDown marks the verdict that JetStream is unreachable (judge).
var errDown = errors.New("JetStream unreachable")

// judge watches an attempt of a call made at start and bounded by bound
// (do), waiting on the streams on: from liveLead before the bound (and a third of the way to it; at
// once when the call is made past its bound) it fails the attempt at once
// when the store's last probe found the whole of JetStream silent and
// nothing was answered since (Outage), else asks the shared probe, and
// aborts the attempt with the reason (an errDown) as soon as the probe
// finds JetStream unreachable (see the top of this file). When the probe
// finds JetStream answering, or has no verdict within liveTimeout (its
// silence counted in scheduled time: a machine too busy to run it, or
// evidence either way), the attempt is left to its own time
// (attemptTimeout): silence by the clock alone is no verdict, as a loaded
// machine is slow everywhere. A verdict on some streams (the others
// answering) aborts the attempts waiting on those streams (affects); an
// attempt on another stream is left to its own time, as when JetStream
// answers. stop ends the watch (call it once the attempt returned).
//
// The watch is a timer until it is due: an attempt answered before then
// (every call of a store that answers) costs no goroutine.
func (s *Store) judge(start, bound time.Time, on []string, abort context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	// Not before a third of the bound: a connection that drops and comes
	// back at once (a node restarted) is ridden over. A call made past
	// its bound (a stream's, minutes in) asks at once.
	ask := maxTime(maxTime(bound.Add(-liveLead), start.Add(bound.Sub(start)/3)), start)
	wg.Add(1)
	lead := time.AfterFunc(time.Until(ask), func() {
		defer wg.Done()
		select {
		case <-done:
			return
		default:
		}
		// The store found silent by the last probe, and answered nothing
		// since: this call is not answered either, and fails at once (a
		// verdict on some streams is no Outage: asked below, by stream).
		if _, err := s.Outage(); err != nil {
			abort(err)
			return
		}
		for c := s.live(); ; c = s.live() {
			select {
			case <-done:
				return
			case <-c.done:
			}
			switch {
			case c.downFor(on):
				abort(fmt.Errorf("%w: %w", errDown, c.err))
				return
			case c.err == nil, c.down():
				return // JetStream answers (or only for other streams not): the attempt is only slow
			}
			// No verdict: a new probe once this one is stale.
			select {
			case <-done:
				return
			case <-time.After(liveFresh - time.Since(c.at)):
			}
		}
	})
	return func() {
		close(done)
		if lead.Stop() {
			wg.Done() // never ran
		}
		wg.Wait()
	}
}

// answered records that JetStream answered a call of the store now (an
// answer, not a transient failure nor silence).
func (s *Store) answered() {
	now := time.Now().UnixNano()
	s.lastAnswer.Store(now)
	s.lastCall.Store(now)
}
