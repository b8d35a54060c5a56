package simulator

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"gseproc/model"
)

// DispatchLaterTo answers req for the host at place at of the fleet's
// listing (Hosts, HostsUnlabelled: the fleet's hosts never move) as
// DispatchUntil(ctx, deadline, host, req) does, without waiting for it:
// to(tok, ...) is called once with what DispatchUntil would return, when
// it would return it, on the fleet's one answering goroutine (at once, on
// the caller's, when nothing is waited for). A fleet served over NATS
// answers every host's requests so: a goroutine per request waiting its
// host's latency (its stack grown two or three times over, a timer and a
// select each) was most of what a simulated fleet did per host beyond
// decoding and replying; finding the host by its address (an address
// parsed and a map of 100,000 hosts read) and a closure made for each
// were a tenth of the simulator's CPU per request. The reply's Status is
// lent to to: it is valid until to returns (to encodes it, or copies it).
//
// It takes only requests whose answer waits for nothing but the host's
// latency and the deadline: false, to not called, for a place the fleet
// has no host at, a change run once per op id (a mutating op with an op
// id), a group, a tail or a cancel (Dispatch answers those), and once the
// fleet is closed (a request taken as it closes is not answered). What
// the op does is decided as Dispatch decides it (settle), from the same
// draws. A ctx that ends is seen when the answer is due (ctx's error, or
// the stopped op when it was cancelled with model.ErrCancelled), not at
// once; an offline host's request is answered with
// context.DeadlineExceeded at its deadline, or never without one
// (Dispatch would wait for ctx).
func (f *Fleet) DispatchLaterTo(ctx context.Context, deadline time.Time, at int, req model.AgentRequest, to func(tok any, rep model.AgentReply, err error), tok any) bool {
	if at < 0 || at >= len(f.hosts) || !latencyOnly(&req) {
		return false
	}
	q := &f.later
	if !q.open() {
		return false
	}
	if err := ctx.Err(); err != nil {
		to(tok, model.AgentReply{}, err)
		return true
	}
	now := time.Now()
	if !deadline.IsZero() && !now.Before(deadline) {
		to(tok, model.AgentReply{}, context.DeadlineExceeded)
		return true
	}
	i, h, err := f.reachAt(int32(at), f.hosts[at].host)
	if err != nil {
		to(tok, model.AgentReply{}, err)
		return true
	}
	if h.offline || h.kind == kindOffline {
		h.mu.Unlock()
		q.silent(f, ctx, deadline, to, tok)
		return true
	}
	d := f.draw(h)
	h.mu.Unlock()
	it := laterItem{ctx: ctx, deadline: deadline, i: i, req: req, d: d, to: to, tok: tok}
	if d.lat <= 0 {
		f.answerLater(&it, new(model.ProcStatus))
		return true
	}
	it.due = q.since(now) + int64(d.lat)
	if !deadline.IsZero() {
		if dl := q.dueAt(deadline, now); dl < it.due {
			it.due, it.late = dl, true
		}
	}
	q.add(f, &it) // false: closed meanwhile, and a fleet closed answers no more
	return true
}

// answerLater answers the request of it, due now; st is the status lent
// to the answer. The caller frees it.
func (f *Fleet) answerLater(it *laterItem, st *model.ProcStatus) {
	to, tok := it.to, it.tok
	switch {
	case it.silent: // an offline host's: no answer but the end of the wait
		err := it.ctx.Err()
		if err == nil {
			err = context.DeadlineExceeded
		}
		to(tok, model.AgentReply{}, err)
	case it.ctx.Err() != nil:
		rep, err := f.ended(it.ctx, it.i, &f.hosts[it.i], &it.req)
		to(tok, rep, err)
	case it.late:
		to(tok, model.AgentReply{}, context.DeadlineExceeded)
	default:
		rep, ok := f.settle(it.i, &f.hosts[it.i], &it.req, it.d, st)
		if !ok { // taken offline meanwhile
			f.later.silent(f, it.ctx, it.deadline, to, tok)
			return
		}
		to(tok, rep, nil)
	}
}

// laterItem is a request DispatchLaterTo answers when it is due.
type laterItem struct {
	due      int64 // laterQueue.since
	late     bool  // due at the deadline, before the latency ends: answered DeadlineExceeded
	silent   bool  // an offline host's, due at the deadline
	ctx      context.Context
	deadline time.Time
	i        int32
	req      model.AgentRequest
	d        drawn
	to       func(tok any, rep model.AgentReply, err error)
	tok      any
}

// laterEntry is an item of the heap, its due time beside it: the heap
// is ordered without reading the items (a cache miss each, and
// time.Time's comparison, were most of what taking one off cost).
type laterEntry struct {
	due int64
	it  *laterItem
}

// laterQueue holds the requests DispatchLaterTo waits for, by due time, and
// answers them on one goroutine, started with the first and stopped by
// Close (the requests still waiting then are not answered).
type laterQueue struct {
	// epoch is what due times count from (set by New): monotonic.
	epoch   time.Time
	mu      sync.Mutex
	items   []laterEntry // a min-heap by due
	started bool
	// closed and n (len(items)) are written under mu, read by open
	// without it: DispatchLaterTo's check that the queue takes a request
	// was one more lock of the queue per request, on the goroutine that
	// decodes them.
	closed atomic.Bool
	n      atomic.Int32
	wake   chan struct{} // an item became the first
	stop   chan struct{}
	done   chan struct{}
	// spare are items answered and cleared, used again by add: a
	// sync.Pool's, put on the answering goroutine's P and got on the
	// decoding one's, cost a tenth of the queue's work per request.
	spare []*laterItem
}

// since is t, a time read from the clock, as a due time: nanoseconds
// since the queue's epoch.
func (q *laterQueue) since(t time.Time) int64 { return int64(t.Sub(q.epoch)) }

// dueAt is t as a due time, now a time read from the clock: the time
// left until t counted from now, as a timer counts it (a deadline from
// a request has no monotonic reading: a step of the wall clock after
// it is queued does not move it, as it does not move the timer of a
// context with that deadline). A t too far off for a due time (a
// deadline centuries away, as a request may carry) is the latest one.
func (q *laterQueue) dueAt(t, now time.Time) int64 {
	at, left := q.since(now), t.Sub(now)
	if left > 0 && int64(left) > math.MaxInt64-at {
		return math.MaxInt64
	}
	return at + int64(left)
}

// spareMax bounds the answered items kept for reuse (laterQueue.spare):
// enough for the requests of a few seconds of a 100,000-host fleet's
// ops, not every item of a peak (~680 bytes each, ~89 MB at maxLater).
const spareMax = 1 << 14

// maxLater bounds the requests waiting in the queue; past it DispatchLaterTo
// takes no more (Dispatch answers them).
const maxLater = 1 << 17

// open says whether the queue takes a request; one taken as it closes or
// fills is still refused by add (closed), or held (past maxLater by a few).
func (q *laterQueue) open() bool {
	return !q.closed.Load() && q.n.Load() < maxLater
}

// silent answers an offline host's request of f: context.DeadlineExceeded
// at the deadline (ctx's error if it ended by then), never without one.
func (q *laterQueue) silent(f *Fleet, ctx context.Context, deadline time.Time, to func(any, model.AgentReply, error), tok any) {
	if deadline.IsZero() {
		return
	}
	q.add(f, &laterItem{due: q.dueAt(deadline, time.Now()), silent: true, ctx: ctx, deadline: deadline, to: to, tok: tok})
}

// add queues a copy of it, a request of f (starting the answering
// goroutine with the first); false once closed.
func (q *laterQueue) add(f *Fleet, req *laterItem) bool {
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return false
	}
	var it *laterItem
	if n := len(q.spare); n > 0 {
		it = q.spare[n-1]
		q.spare[n-1] = nil
		q.spare = q.spare[:n-1]
	} else {
		it = new(laterItem)
	}
	*it = *req
	if !q.started {
		q.started = true
		q.wake, q.stop, q.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go q.run(f)
	}
	q.push(laterEntry{it.due, it})
	first := q.items[0].it == it
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
	st := new(model.ProcStatus) // lent to each answer in turn
	for {
		q.mu.Lock()
		if q.closed.Load() { // close let the items and the spare ones go
			q.mu.Unlock()
			return
		}
		// Answered and cleared: kept for add, up to spareMax (past a
		// peak of maxLater waiting, the rest go to the collector).
		q.spare = append(q.spare, due[:min(len(due), max(0, spareMax-len(q.spare)))]...)
		clear(due)
		due = due[:0]
		now := q.since(time.Now())
		for len(q.items) > 0 && q.items[0].due <= now {
			due = append(due, q.pop())
		}
		wait := time.Duration(-1)
		if len(q.items) > 0 {
			wait = time.Duration(q.items[0].due - now)
		}
		q.mu.Unlock()
		if len(due) > 0 {
			for _, it := range due {
				f.answerLater(it, st)
				*it = laterItem{} // what it refers to is not kept alive
			}
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
	if q.closed.Load() {
		q.mu.Unlock()
		return
	}
	q.closed.Store(true)
	started := q.started
	q.items, q.spare = nil, nil
	q.n.Store(0)
	q.mu.Unlock()
	if started {
		close(q.stop)
		<-q.done
	}
}

// push adds e to the heap. q.mu must be held.
func (q *laterQueue) push(e laterEntry) {
	q.items = append(q.items, e)
	h := q.items
	for j := len(h) - 1; j > 0; {
		parent := (j - 1) / 2
		if h[j].due >= h[parent].due {
			break
		}
		h[j], h[parent] = h[parent], h[j]
		j = parent
	}
	q.n.Store(int32(len(q.items)))
}

// pop takes the earliest item off the heap. q.mu must be held.
func (q *laterQueue) pop() *laterItem {
	h := q.items
	first := h[0].it
	last := len(h) - 1
	h[0] = h[last]
	h[last] = laterEntry{}
	h = h[:last]
	for j := 0; ; {
		l, r, m := 2*j+1, 2*j+2, j
		if l < len(h) && h[l].due < h[m].due {
			m = l
		}
		if r < len(h) && h[r].due < h[m].due {
			m = r
		}
		if m == j {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	q.items = h
	q.n.Store(int32(len(h)))
	return first
}
