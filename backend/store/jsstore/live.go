package jsstore

import (
	"context"
	"errors"
	"fmt"
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
// (judge) by a second, cheap one shared by every call waiting meanwhile
// (live): the store's task stream's info, which only its leader answers.
// When the connection is down, the info is refused, or the leader has
// not heard from a quorum of its replicas (writes cannot be
// acknowledged), the store is unreachable: the call fails with that
// reason, at once. When the leader answers with its quorum, JetStream is
// alive and the call is only slow: it is given its full attempt
// (attemptTimeout). Silence proves nothing by itself (a loaded machine is
// slow everywhere): at its bound the call fails as unanswered only when
// JetStream has answered nothing the store asked for silentFor, the
// check included.

// liveLead is how long before a call's bound the check is asked;
// liveTimeout bounds the check; liveFresh is how long its verdict is
// reused; peerSilence is how long a replica may go unheard by its leader
// and still count for the quorum (the leader hears from each at least
// every second while healthy).
//
// silentFor is how long JetStream must have answered nothing the store
// asked for silence to be an outage (an attempt's time, as before): a
// request that began answered on a loaded machine (its first steps) and
// then waits is slow, not cut off.
const (
	silentFor   = attemptTimeout
	liveLead    = time.Second
	liveTimeout = attemptTimeout
	liveFresh   = 500 * time.Millisecond
	peerSilence = 3 * time.Second
)

// liveness is the shared check (see above).
type liveness struct {
	mu  sync.Mutex
	cur *liveCheck // in flight, or the last one done
}

type liveCheck struct {
	done chan struct{}
	at   time.Time // when it was answered
	err  error     // nil: JetStream answers; else why it does not
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
		c.err, c.at = errors.New("jsstore: closed"), time.Now()
		close(c.done)
		return c
	}
	s.wg.Add(1)
	s.mu.Unlock()
	l.cur = c
	go func() {
		defer s.wg.Done()
		c.err = s.checkLive()
		c.at = time.Now()
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

// checkLive says why JetStream does not answer for the store (nil: it does).
func (s *Store) checkLive() error {
	b := s.on()
	nc := b.js.Conn()
	if !nc.IsConnected() {
		return fmt.Errorf("the NATS connection is %s", strings.ToLower(nc.Status().String()))
	}
	ctx, cancel := context.WithTimeout(s.ctx, liveTimeout)
	defer cancel()
	st, err := s.kvStream(ctx, b.tasks)
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = st.Info(ctx); err == nil {
			s.answered()
			return quorum(info)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", errCheckUnanswered, err)
	case transient(err):
		return fmt.Errorf("JetStream refuses a stream info: %w", err)
	}
	s.answered() // an answer, if not the one hoped for: JetStream is there
	return nil
}

// errCheckUnanswered is a check left unanswered for liveTimeout.
var errCheckUnanswered = errors.New("a stream info was not answered either")

// quorum says why the stream's leader, which answered info, cannot
// acknowledge writes (nil: it can): it has not heard from a quorum of
// its replicas within peerSilence.
func quorum(info *jetstream.StreamInfo) error {
	if c := info.Cluster; c != nil && len(c.Replicas) > 0 {
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
// (do): from liveLead before the bound (and a third of the way to it;
// at once when the call is made past its bound) it asks the shared check, and aborts the
// attempt with the reason (an errDown) as soon as the check finds JetStream
// unreachable (the connection down, the stream info refused, the leader
// without its quorum). A check left unanswered, like the attempt, is no
// verdict by itself: on a loaded machine both may be slow. So at the
// bound (or liveLead after the check was asked, if later), an attempt without a verdict is aborted only when no call of the
// store at all was answered within silentFor; otherwise it is left to
// its attempt time, and aborted later only if the check then finds
// JetStream unreachable. When the check finds JetStream answering, the
// attempt is left alone. stop ends the watch (call it once the attempt
// returned).
func (s *Store) judge(start, bound time.Time, abort context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Not before a third of the bound: a connection that drops and
		// comes back at once (a node restarted) is ridden over. A call
		// made past its bound (a stream's, minutes in) asks at once.
		ask := maxTime(maxTime(bound.Add(-liveLead), start.Add(bound.Sub(start)/3)), start)
		lead := time.NewTimer(time.Until(ask))
		defer lead.Stop()
		select {
		case <-done:
			return
		case <-lead.C:
		}
		c := s.live()
		// Silence is judged at the bound, and never before the check has
		// had liveLead to answer: a call made past its bound on an idle
		// store (nothing answered within silentFor) would otherwise be
		// failed at once, its check not yet asked.
		at := time.NewTimer(time.Until(maxTime(bound, ask.Add(liveLead))))
		defer at.Stop()
		atBound := false
		silent := func() bool {
			if s.answeredWithin(silentFor) {
				return false
			}
			abort(fmt.Errorf("%w: unanswered, and so is a stream info, and nothing else the store asked was answered within %s (NATS or JetStream unreachable, or a leader election)", errDown, silentFor))
			return true
		}
		for {
			select {
			case <-done:
				return
			case <-c.done:
				switch {
				case c.err == nil:
					return // JetStream answers: the attempt is only slow
				case !errors.Is(c.err, errCheckUnanswered):
					abort(fmt.Errorf("%w: %w", errDown, c.err))
					return
				}
				if !atBound {
					select {
					case <-done:
						return
					case <-at.C:
					}
				}
				silent()
				return
			case <-at.C:
				atBound = true
				if silent() {
					return
				}
				// Others are answered: wait for the check's verdict.
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// answered records that JetStream answered a call of the store now (an
// answer, not a transient failure nor silence).
func (s *Store) answered() { s.lastAnswer.Store(time.Now().UnixNano()) }

// answeredWithin says whether JetStream answered a call of the store
// within d.
func (s *Store) answeredWithin(d time.Duration) bool {
	at := s.lastAnswer.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < d
}
