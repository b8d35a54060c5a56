package engine

import (
	"sync"

	"gseproc/model"
)

// The fan-out over an AsyncDispatcher. One goroutine (the run's execute)
// makes each target running and sends it, at most max in flight; each
// answer is recorded by the goroutine the dispatcher hands it on (the
// NATS reply subscription). A worker per target in flight parked on its
// answer and was woken for it, and took the run's lock among 2,048
// others: with the transport's own wait (a select per request), a tenth
// of the server's CPU in an op over 10,000 hosts, and most of its lock
// waits.

// window counts a run's dispatches in flight: the sender waits while
// max are, and is woken once the count falls to low (not at every
// answer: a wake per answer was a goroutine switch per target).
type window struct {
	mu   sync.Mutex
	cond sync.Cond
	n    int // in flight
	max  int
	low  int
	// The sender waits for the count to fall to low (room), or to 0
	// (drain).
	waitRoom, waitDrain bool
	// complete: a result recorded made the task complete; the sender
	// stores it once every dispatch is over.
	complete bool
	// free are sendings whose dispatch is over, used again (with their
	// callback): at most max of them are ever made, not one per target.
	free []*sending
}

// sendBatch is how many answers at most the sender waits for before it
// sends again, with max in flight.
const sendBatch = 64

func newWindow(most int) *window {
	w := &window{max: most, low: most - min(sendBatch, max(1, most/8))}
	w.cond.L = &w.mu
	return w
}

// acquire waits for room for one more dispatch, and takes it: a sending
// used before, or nil (the caller makes one).
func (w *window) acquire() *sending {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.n >= w.max {
		w.waitRoom = true
		w.cond.Wait()
	}
	w.n++
	if k := len(w.free); k > 0 {
		s := w.free[k-1]
		w.free = w.free[:k-1]
		return s
	}
	return nil
}

// release gives back a dispatch's room and its sending s (nil: none);
// complete: its result completed the task.
func (w *window) release(s *sending, complete bool) {
	w.mu.Lock()
	if s != nil {
		w.free = append(w.free, s)
	}
	w.n--
	w.complete = w.complete || complete
	if (w.waitRoom && w.n <= w.low) || (w.waitDrain && w.n == 0) {
		w.waitRoom, w.waitDrain = false, false
		w.cond.Signal()
	}
	w.mu.Unlock()
}

// drain waits for every dispatch to be over and reports whether one
// completed the task.
func (w *window) drain() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.n > 0 {
		w.waitDrain = true
		w.cond.Wait()
	}
	return w.complete
}

// sendAll sends r's targets through ad, at most most at once, and waits
// for every answer; it reports whether a result it recorded completed
// the task (the caller stores it).
func (e *Engine) sendAll(r *run, ad AsyncDispatcher, most int) (complete bool) {
	w := newWindow(most)
	for r.ctx.Err() == nil {
		i := int(r.next.Add(1) - 1)
		if i >= len(r.targets) {
			break
		}
		s := w.acquire()
		if s == nil {
			s = &sending{}
			s.done = func(reply model.AgentReply, err error) { e.received(r, w, s, reply, err) }
		}
		var req model.AgentRequest
		var send bool
		done := s.done
		*s, req, send = e.prepare(r, i)
		s.done = done
		if !send {
			// Given back with its callback: a target not sent (cancelled,
			// final already) does not cost a new sending.
			w.release(s, false)
			continue
		}
		ad.DispatchAsync(s.wait.ctx, s.res.Host, req, done)
	}
	return w.drain()
}

// received records the answer to s (reply or err), a dispatch of r sent
// in window w. It is called by the goroutine that hands every answer of
// the server on (the NATS reply subscription), which must not wait: when
// the writer's queue is (nearly) full, recording would wait for room in
// it and hold up every other answer meanwhile (those of other runs, of
// cancels awaited, in time for their deadline), so a goroutine records
// this one instead. The window's room is given back only once it is
// recorded: the sender still waits for the writer, with at most the
// window's count of such goroutines, as many as workers waited before.
func (e *Engine) received(r *run, w *window, s *sending, reply model.AgentReply, err error) {
	if e.writesNearFull() {
		go e.recordAnswer(r, w, s, reply, err)
		return
	}
	e.recordAnswer(r, w, s, reply, err)
}

// recordAnswer is received's work.
func (e *Engine) recordAnswer(r *run, w *window, s *sending, reply model.AgentReply, err error) {
	c := false
	if res, ok := e.outcome(r, s, reply, err); ok {
		c = e.recordResult(r, s.i, res)
	}
	done := s.done
	*s = sending{done: done} // what it held is not kept while unused
	w.release(s, c)
}
