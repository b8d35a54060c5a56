package jsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"gseproc/backend/engine"
)

// The status watch and this store's own writes. The watch sends every
// status stored, by any server, in stream order: the engine learns what
// the store holds. Its own writes it knows already, yet each came back
// through the watch's consumer: a delivery by the NATS server, a copy and
// a parse by the client, a channel send (the first op over 100,000 hosts
// stores ~84,000 statuses; without the watch, its server CPU was ~1 s
// less, the watch echo ~25% of a status's cost).
//
// So a write of many statuses (ownSkipMin or more) while one status watch
// runs stops the watch's consumer before publishing (on the same
// connection: the server has it stopped before it stores them), and once
// they are stored the watch hands on, in stream order, the run of them
// that directly follows what it had read (the publishes' acknowledgements
// say at which sequence each was stored) as if it had read them, then
// starts its consumer again after that run. A sequence in between that is
// not this write's (another server's status, a delete) ends the run: the
// watch then reads on from there, every later message included, and the
// store's own among them are taken as before (ownStatuses). Nothing is
// skipped that the watch would have sent, and the order is the stream's.

// ownSkipMin is the fewest statuses a write stops the status watch for:
// a stop and a new consumer cost about as much as a few hundred
// deliveries.
const ownSkipMin = 256

// statusWatches are the store's running status watches (those that hand
// on own runs): a write skips the echo only while exactly one runs (with
// two, each must send every status, and a kept one goes to one of them).
type statusWatches struct {
	mu  sync.Mutex
	all []*statusWatch
}

func (x *statusWatches) add(w *statusWatch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.all = append(x.all, w)
}

func (x *statusWatches) remove(w *statusWatch) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.all = slices.DeleteFunc(x.all, func(y *statusWatch) bool { return y == w })
}

// one is the only running status watch (nil: none, or several).
func (x *statusWatches) one() *statusWatch {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.all) != 1 {
		return nil
	}
	return x.all[0]
}

// statusWatch is one status watch's goroutine, as a write sees it.
type statusWatch struct {
	// pause: a write asks the watch to stop its consumer; the watch
	// answers on the write's channel with the one the write hands its
	// stored statuses on.
	pause chan chan chan ownRun
	done  chan struct{} // closed when the watch has ended
	// read counts the entries read from the consumer, handed the
	// statuses handed on from own runs (tests).
	read, handed atomic.Int64
}

// ownRun is a write of statuses as stored: seqs[i] is where msgs[i] was
// stored (0: not stored, or not known).
type ownRun struct {
	msgs []pubMsg
	keys []string
	seqs []uint64
}

// stop asks the watch to stop its consumer and waits until it has: the
// write then publishes and hands what it stored to resume (always, once,
// and soon: the watch waits for it). ok is false when the watch has ended
// (or ctx did first, or attemptTimeout passed): the write goes on as if
// none ran.
func (w *statusWatch) stop(ctx context.Context) (resume func(ownRun), ok bool) {
	ch := make(chan chan ownRun, 1)
	// The watch comes back to its select at once (it never waits on its
	// reader), unless it is making a new consumer: at most that request,
	// which has no deadline of its own (the watch's context). Past
	// attemptTimeout the write goes on unpaused, its statuses read back
	// through the consumer as any other's: a consumer request lost in a
	// reconnection must not hold the engine's writer, and every write
	// behind it, for good.
	timer := time.NewTimer(attemptTimeout)
	defer timer.Stop()
	select {
	case w.pause <- ch:
	case <-w.done:
		return nil, false
	case <-ctx.Done():
		return nil, false
	case <-timer.C:
		return nil, false
	}
	// The watch answers once its consumer is stopped, which deletes it
	// with a JetStream request (up to the client's wait, 5 s). Past
	// attemptTimeout in all, the write goes on unpaused as above, and the
	// watch is handed an empty run when it answers: it reads on from
	// where it was, through a new consumer, the write's statuses
	// included.
	select {
	case r := <-ch:
		return func(run ownRun) { r <- run }, true // r has room for it
	case <-w.done:
		return nil, false
	case <-timer.C:
	case <-ctx.Done():
	}
	go func() { // ends when the watch answers or ends
		select {
		case r := <-ch:
			r <- ownRun{}
		case <-w.done:
		}
	}()
	return nil, false
}

// WatchProcStatuses sends every last known status stored from the call
// on, by any server, in the order they were stored, until ctx ends; a
// value that does not decode is skipped.
func (s *Store) WatchProcStatuses(ctx context.Context) (<-chan engine.HostStatus, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	kv := func() jetstream.KeyValue { return s.on().status }
	// From the sequence after the stream's last now, not "updates only":
	// the watch knows where it stands before it reads anything (an own
	// run must follow what it read), and misses nothing stored from here.
	var from uint64
	_, err := do(s, ctx, kvName(kv()), func(ctx context.Context) (struct{}, error) {
		st, err := s.kvStream(ctx, kv())
		if err != nil {
			return struct{}{}, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return struct{}{}, err
		}
		from = info.State.LastSeq + 1
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("watch statuses: %w", err)
	}
	s.own.watching(1)
	w, err := do(s, ctx, kvName(kv()), func(context.Context) (jetstream.KeyWatcher, error) {
		return kv().WatchAll(ctx, jetstream.ResumeFromRevision(from), jetstream.IgnoreDeletes())
	})
	if err != nil {
		s.own.watching(-1)
		return nil, fmt.Errorf("watch statuses: %w", err)
	}
	sw := &statusWatch{pause: make(chan chan chan ownRun), done: make(chan struct{})}
	s.swatch.add(sw)
	out := make(chan engine.HostStatus, 64)
	go func() {
		defer close(out)
		defer func() {
			s.swatch.remove(sw)
			close(sw.done)
			s.own.watching(-1)
		}()
		s.watchStatuses(ctx, w, from-1, sw, out)
	}()
	return out, nil
}

// watchStatuses is the status watch's loop: w is read from the sequence
// after high on; a write's pause stops it and queues the write's own run
// (see above). What is read or handed on is queued and sent from the
// queue in order, and w is read only once the queue is empty (the
// engine's pace, as a plain watch): the loop always comes back to its
// select, so a write's pause is answered at once whatever the reader does.
func (s *Store) watchStatuses(ctx context.Context, w jetstream.KeyWatcher, high uint64, sw *statusWatch, out chan<- engine.HostStatus) {
	// The queue holds pointers: an own run's statuses are the writes'
	// own (no copy of each, ~260 bytes); a status read is made for it.
	var queue []*engine.HostStatus
	var retry <-chan time.Time // set while a new watcher could not be made
	defer func() {
		if w != nil {
			stopWatcher(w)
		}
	}()
	for {
		if w == nil && retry == nil {
			// Start again after what was read: after a pause, or after the
			// watcher ended (its connection closed; s.on() is the new one).
			var err error
			if w, err = s.on().status.WatchAll(ctx, jetstream.ResumeFromRevision(high+1), jetstream.IgnoreDeletes()); err != nil {
				w, retry = nil, time.After(200*time.Millisecond)
			}
		}
		var send chan<- engine.HostStatus
		var head engine.HostStatus
		if len(queue) > 0 {
			send, head = out, *queue[0]
		}
		var updates <-chan jetstream.KeyValueEntry
		if len(queue) == 0 && w != nil {
			updates = w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case send <- head:
			queue[0] = nil
			queue = queue[1:]
			if len(queue) == 0 {
				queue = nil // the array goes with the backlog
			}
		case e, ok := <-updates:
			if !ok {
				_ = w.Stop()
				w = nil
				continue
			}
			if e == nil {
				continue
			}
			sw.read.Add(1)
			high = max(high, e.Revision())
			if hs, ok := s.decodeStatus(e); ok {
				queue = append(queue, &hs)
			}
		case <-retry:
			retry = nil
		case ask := <-sw.pause:
			if w != nil {
				stopWatcher(w)
				w = nil
			}
			run := make(chan ownRun, 1)
			ask <- run // room for it: the write waits for this answer
			select {
			case r := <-run: // the write sends it once its publishes are answered
				n := len(queue)
				queue, high = s.queueOwnRun(queue, r, high)
				sw.handed.Add(int64(len(queue) - n))
			case <-ctx.Done():
				return
			}
		}
	}
}

// stopWatcher stops w and reads on what it still delivers, until it
// closes its channel. nats.go's watcher hands each entry on under its
// lock and closes Updates (ending its goroutine and subscription) only
// once that send returns: a watcher stopped while its channel was full
// and unread (the loop reads it only with an empty queue) would keep its
// goroutine, its subscription and what was pending on it for good, once
// at every pause. The reader ends when the channel closes.
func stopWatcher(w jetstream.KeyWatcher) {
	_ = w.Stop()
	go func(c <-chan jetstream.KeyValueEntry) {
		for range c {
		}
	}(w.Updates())
}

// decodeStatus is the status of a watched entry: the one this store
// wrote when it is read back as written, else decoded (false: it does
// not decode).
func (s *Store) decodeStatus(e jetstream.KeyValueEntry) (engine.HostStatus, bool) {
	if hs := s.own.take(e.Key(), e.Value()); hs != nil {
		return *hs, true
	}
	var r statusRec
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Status.ProcKey == "" {
		return engine.HostStatus{}, false
	}
	return engine.HostStatus{Host: r.Host, Status: r.Status}, true
}

// queueOwnRun queues, in stream order, the statuses of r stored at the
// sequences right after high, as the watch would have read them, and
// returns the queue and the last of them (high when none follows it).
func (s *Store) queueOwnRun(queue []*engine.HostStatus, r ownRun, high uint64) ([]*engine.HostStatus, uint64) {
	order := make([]int, 0, len(r.seqs))
	for i, q := range r.seqs {
		if q > high {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case r.seqs[a] < r.seqs[b]:
			return -1
		case r.seqs[a] > r.seqs[b]:
			return 1
		}
		return 0
	})
	queue = slices.Grow(queue, len(order))
	for _, i := range order {
		if r.seqs[i] != high+1 {
			break // another's message, or one not known: read from there
		}
		m := &r.msgs[i]
		// Kept for the watch or not (past ownMax its read would have
		// decoded it), it is the status written.
		s.own.forget(r.keys[i], m)
		queue = append(queue, m.status)
		high++
	}
	return queue, high
}
