package simulator

import (
	"context"
	"sync"
	"time"

	"gseproc/model"
)

// DispatchLater answers req for host as DispatchUntil(ctx, deadline, host,
// req) does, without waiting for it: answer is called once with what
// DispatchUntil would return, when it would return it, on the fleet's one
// answering goroutine (at once, on the caller's, when nothing is waited
// for). A fleet served over NATS answers every host's requests so: a
// goroutine per request waiting its host's latency (its stack grown two or
// three times over, a timer and a select each) was most of what a
// simulated fleet did per host beyond decoding and replying.
//
// It takes only requests whose answer waits for nothing but the host's
// latency and the deadline: false, answer not called, for a change run once
// per op id (a mutating op with an op id), a group, a tail or a cancel
// (Dispatch answers those), and once the fleet is closed (a request taken
// as it closes is not answered). What the op does
// is decided as Dispatch decides it (settle), from the same draws. A ctx
// that ends is seen when the answer is due (ctx's error, or the stopped op
// when it was cancelled with model.ErrCancelled), not at once; an offline
// host's request is answered with context.DeadlineExceeded at its deadline,
// or never without one (Dispatch would wait for ctx).
func (f *Fleet) DispatchLater(ctx context.Context, deadline time.Time, host model.Host, req model.AgentRequest, answer func(model.AgentReply, error)) bool {
	if !latencyOnly(req) {
		return false
	}
	q := &f.later
	if !q.open() {
		return false
	}
	if err := ctx.Err(); err != nil {
		answer(model.AgentReply{}, err)
		return true
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		answer(model.AgentReply{}, context.DeadlineExceeded)
		return true
	}
	i, h, err := f.reach(host)
	if err != nil {
		answer(model.AgentReply{}, err)
		return true
	}
	if h.offline || h.kind == kindOffline {
		h.mu.Unlock()
		q.silent(f, ctx, deadline, answer)
		return true
	}
	d := f.draw(h)
	h.mu.Unlock()
	it := q.item()
	*it = laterItem{ctx: ctx, deadline: deadline, i: i, req: req, d: d, answer: answer}
	if d.lat <= 0 {
		f.answerLater(it)
		return true
	}
	it.due = time.Now().Add(d.lat)
	if !deadline.IsZero() && deadline.Before(it.due) {
		it.due, it.late = deadline, true
	}
	if !q.add(f, it) {
		q.free(it) // closed meanwhile: a fleet closed answers no more
	}
	return true
}

// answerLater answers the request of it, due now, and frees it.
func (f *Fleet) answerLater(it *laterItem) {
	q := &f.later
	answer := it.answer
	switch {
	case it.silent: // an offline host's: no answer but the end of the wait
		err := it.ctx.Err()
		if err == nil {
			err = context.DeadlineExceeded
		}
		q.free(it)
		answer(model.AgentReply{}, err)
	case it.ctx.Err() != nil:
		rep, err := f.ended(it.ctx, it.i, &f.hosts[it.i], it.req)
		q.free(it)
		answer(rep, err)
	case it.late:
		q.free(it)
		answer(model.AgentReply{}, context.DeadlineExceeded)
	default:
		rep, ok := f.settle(it.i, &f.hosts[it.i], it.req, it.d)
		ctx, deadline := it.ctx, it.deadline
		q.free(it)
		if !ok { // taken offline meanwhile
			q.silent(f, ctx, deadline, answer)
			return
		}
		answer(rep, nil)
	}
}

// laterItem is a request DispatchLater answers when it is due.
type laterItem struct {
	due      time.Time
	late     bool // due at the deadline, before the latency ends: answered DeadlineExceeded
	silent   bool // an offline host's, due at the deadline
	ctx      context.Context
	deadline time.Time
	i        int32
	req      model.AgentRequest
	d        drawn
	answer   func(model.AgentReply, error)
}

// laterQueue holds the requests DispatchLater waits for, by due time, and
// answers them on one goroutine, started with the first and stopped by
// Close (the requests still waiting then are not answered).
type laterQueue struct {
	mu      sync.Mutex
	items   []*laterItem // a min-heap by due
	started bool
	closed  bool
	wake    chan struct{} // an item became the first
	stop    chan struct{}
	done    chan struct{}
	pool    sync.Pool // *laterItem
}

// maxLater bounds the requests waiting in the queue; past it DispatchLater
// takes no more (Dispatch answers them).
const maxLater = 1 << 17

func (q *laterQueue) open() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.closed && len(q.items) < maxLater
}

func (q *laterQueue) item() *laterItem {
	if it, ok := q.pool.Get().(*laterItem); ok {
		return it
	}
	return new(laterItem)
}

// free clears it (what it refers to is not kept alive) and pools it.
func (q *laterQueue) free(it *laterItem) {
	*it = laterItem{}
	q.pool.Put(it)
}

// silent answers an offline host's request of f: context.DeadlineExceeded
// at the deadline (ctx's error if it ended by then), never without one.
func (q *laterQueue) silent(f *Fleet, ctx context.Context, deadline time.Time, answer func(model.AgentReply, error)) {
	if deadline.IsZero() {
		return
	}
	it := q.item()
	*it = laterItem{due: deadline, silent: true, ctx: ctx, deadline: deadline, answer: answer}
	if !q.add(f, it) {
		q.free(it)
	}
}

// add queues it, a request of f (starting the answering goroutine with
// the first); false once closed.
func (q *laterQueue) add(f *Fleet, it *laterItem) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if !q.started {
		q.started = true
		q.wake, q.stop, q.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go q.run(f)
	}
	q.push(it)
	first := q.items[0] == it
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// run answers the requests as they fall due until close.
func (q *laterQueue) run(f *Fleet) {
	defer close(q.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var due []*laterItem
	for {
		q.mu.Lock()
		now := time.Now()
		for len(q.items) > 0 && !q.items[0].due.After(now) {
			due = append(due, q.pop())
		}
		wait := time.Duration(-1)
		if len(q.items) > 0 {
			wait = q.items[0].due.Sub(now)
		}
		q.mu.Unlock()
		if len(due) > 0 {
			for k, it := range due {
				f.answerLater(it)
				due[k] = nil
			}
			due = due[:0]
			continue // the time has moved: more may be due
		}
		var tc <-chan time.Time
		if wait >= 0 {
			t.Reset(wait)
			tc = t.C
		}
		select {
		case <-tc:
		case <-q.wake:
		case <-q.stop:
			return
		}
	}
}

// close stops the answering goroutine and waits for it; the requests
// still waiting are not answered.
func (q *laterQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	started := q.started
	q.items = nil
	q.mu.Unlock()
	if started {
		close(q.stop)
		<-q.done
	}
}

// push adds it to the heap. q.mu must be held.
func (q *laterQueue) push(it *laterItem) {
	q.items = append(q.items, it)
	h := q.items
	for j := len(h) - 1; j > 0; {
		parent := (j - 1) / 2
		if !h[j].due.Before(h[parent].due) {
			break
		}
		h[j], h[parent] = h[parent], h[j]
		j = parent
	}
}

// pop takes the earliest item off the heap. q.mu must be held.
func (q *laterQueue) pop() *laterItem {
	h := q.items
	first := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = nil
	h = h[:last]
	for j := 0; ; {
		l, r, m := 2*j+1, 2*j+2, j
		if l < len(h) && h[l].due.Before(h[m].due) {
			m = l
		}
		if r < len(h) && h[r].due.Before(h[m].due) {
			m = r
		}
		if m == j {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	q.items = h
	return first
}
