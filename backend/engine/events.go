package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"gseproc/model"
)

// eventQueueMax bounds the events waiting to be stored and fanned out; a
// source that outpaces the engine beyond it loses events (each logged), it
// is never blocked. The queue is a slice that grows only while events wait:
// 100,000 agents coming online at once (and again as a second wave after a
// NATS outage) fit; the loop stores them in batches (eventLoop).
const eventQueueMax = 1 << 18

// eventQueue is a FIFO of events that never blocks its producers.
type eventQueue struct {
	mu   sync.Mutex
	q    []queuedEvent
	wake chan struct{} // cap 1: something was queued
	// busy is how many events the last take handed to eventLoop: being
	// stored until its next take (Backlog counts them).
	busy int

	// idPrefix and seq name an event that came without an id (the
	// in-process fleet's, the engine's own): a store write retried after
	// a slow acknowledgement is then kept once, not twice.
	idPrefix string
	seq      atomic.Uint64

	applied appliedIDs // used by eventLoop only
}

// appliedMax bounds the acknowledged events remembered as applied: far
// more than arrive within a redelivery's wait (the consumer's AckWait).
const appliedMax = 1 << 16

// appliedIDs remembers the ids of the last appliedMax acknowledged events
// applied (a last known status derived, subscribers told): a source that
// delivers an event again because its acknowledgement was lost must not
// have it applied twice (a restart counted twice, shown twice live).
type appliedIDs struct {
	set  map[string]struct{}
	ring []string
	next int
}

// add records id and says whether it is new ("" always is: nothing to
// tell it by).
func (a *appliedIDs) add(id string) bool {
	if id == "" {
		return true
	}
	if _, ok := a.set[id]; ok {
		return false
	}
	if a.set == nil {
		a.set = make(map[string]struct{})
	}
	if len(a.ring) < appliedMax {
		a.ring = append(a.ring, id)
	} else {
		delete(a.set, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % appliedMax
	}
	a.set[id] = struct{}{}
	return true
}

// queuedEvent is an event waiting to be stored, with what to call once it
// is (nil: nothing).
type queuedEvent struct {
	ev  model.Event
	ack func(error)
}

func (x *eventQueue) init() {
	x.wake = make(chan struct{}, 1)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	x.idPrefix = "e" + hex.EncodeToString(b) + "-"
}

// name gives ev an id unique to this engine when it has none.
func (x *eventQueue) name(ev *model.Event) {
	if ev.ID == "" {
		ev.ID = x.idPrefix + strconv.FormatUint(x.seq.Add(1), 10)
	}
}

// push queues ev; false when the queue is full.
func (x *eventQueue) push(ev model.Event, ack func(error)) bool {
	x.mu.Lock()
	if len(x.q) >= eventQueueMax {
		x.mu.Unlock()
		return false
	}
	x.q = append(x.q, queuedEvent{ev, ack})
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes and returns at most n queued events, oldest first.
func (x *eventQueue) take(n int) []queuedEvent {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := min(n, len(x.q))
	x.busy = k
	out := make([]queuedEvent, k)
	copy(out, x.q)
	if k == len(x.q) {
		x.q = nil // the backing array goes with the backlog
	} else {
		x.q = x.q[k:]
	}
	return out
}

// backlog is how many events wait to be stored or are being stored.
func (x *eventQueue) backlog() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.q) + x.busy
}

// subBuffer is each event subscriber's channel capacity; a subscriber that
// falls further behind misses events (they stay in RecentEvents).
const subBuffer = 1024

// onEvent is the EventSource callback: it never blocks the source.
func (e *Engine) onEvent(ev model.Event) {
	if !e.events.push(ev, nil) {
		e.log.Warn("event queue full: event dropped", "host", ev.Host.String(), "proc", ev.ProcKey, "event", string(ev.Kind))
	}
}

// errEventQueueFull refuses an acknowledged event the queue has no room
// for: its source keeps it and delivers it again.
var errEventQueueFull = errors.New("engine: event queue full")

// onAckedEvent is the AckedEventSource callback: ack (when not nil) is
// called once ev is stored, or at once with the reason when the queue is
// full.
func (e *Engine) onAckedEvent(ev model.Event, ack func(error)) {
	if ack == nil {
		e.onEvent(ev)
		return
	}
	if !e.events.push(ev, ack) {
		ack(errEventQueueFull)
	}
}

// eventLoop stores events, updates last known statuses and fans events
// out to subscribers, until the engine closes. Events queued while a batch
// is being stored go in the next batch, stored together (pipelined when
// the store is a BatchStore): 100,000 agents coming online at once are
// stored in a few round trips, not 100,000.
func (e *Engine) eventLoop() {
	defer e.wg.Done()
	for {
		if batch := e.events.take(eventBatch); len(batch) > 0 {
			e.handleEvents(batch)
			if e.ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-e.ctx.Done():
			return
		case <-e.events.wake:
		}
	}
}

// eventBatch bounds the events stored in one batch.
const eventBatch = 4096

func (e *Engine) handleEvents(batch []queuedEvent) {
	evs := make([]model.Event, len(batch))
	for i, q := range batch {
		evs[i] = q.ev
		e.events.name(&evs[i])
		if evs[i].Time.IsZero() {
			evs[i].Time = e.now()
		}
	}
	// errs[i] is why evs[i] was not stored (nil: stored): a source that
	// keeps its events until acknowledged delivers those again.
	errs := make([]error, len(evs))
	if bs, ok := e.st.(BatchStore); ok {
		if err := bs.AppendEvents(e.ctx, evs); err != nil {
			e.log.Warn("store events", "n", len(evs), "err", err)
			for i := range errs {
				errs[i] = err // which ones failed is not known: each is stored again, once by its id
			}
		}
	} else {
		for i, ev := range evs {
			if err := e.st.AppendEvent(e.ctx, ev); err != nil {
				e.log.Warn("store event", "err", err)
				errs[i] = err
			}
		}
	}
	for i, q := range batch {
		if q.ack != nil {
			q.ack(errs[i])
		}
	}
	for i, ev := range evs {
		if batch[i].ack != nil {
			if errs[i] != nil {
				continue // delivered again by its source, and handled then
			}
			// Stored and applied once already: its acknowledgement was lost
			// and it came again (the store kept it once, by its id).
			if !e.events.applied.add(ev.ID) {
				continue
			}
		}
		if ev.ProcKey != "" {
			if st, ok := statusAfter(ev, e); ok {
				e.recordStatus(ev.Host, &st)
			}
		}
		e.log.Debug("host event", "host", ev.Host.String(), "proc", ev.ProcKey, "event", string(ev.Kind), "msg", ev.Message)
		e.mu.RLock()
		for _, ch := range e.subs {
			select {
			case ch <- ev:
			default: // slow subscriber: drop rather than block everyone
			}
		}
		e.mu.RUnlock()
	}
}

// statusAfter derives the last known status of the event's process.
func statusAfter(ev model.Event, e *Engine) (model.ProcStatus, bool) {
	st, ok := e.status(ev.Host, ev.ProcKey)
	if !ok {
		st = model.ProcStatus{ProcKey: ev.ProcKey, PID: -1, Hosted: true}
	}
	switch ev.Kind {
	case model.EventRestartSuccess:
		st.State = model.ProcRunning
		st.Restarts++
		st.LastStartTime = ev.Time.Unix()
		st.StartTime = ev.Time
	case model.EventRestartFailed:
		st.State = model.ProcBackoff
		st.PID = -1
	case model.EventGiveUp:
		st.State = model.ProcFatal
		st.PID = -1
	default:
		return st, false
	}
	st.Message = ev.Message
	st.ReportTime = ev.Time.Unix()
	return st, true
}

// Events streams events as they happen until ctx ends or the engine closes.
func (e *Engine) Events(ctx context.Context) (<-chan model.Event, error) {
	ch := make(chan model.Event, subBuffer)
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("events: engine is closed")
	}
	id := e.nextSub
	e.nextSub++
	e.subs[id] = ch
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		select {
		case <-ctx.Done():
		case <-e.ctx.Done():
		}
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
		close(ch)
	}()
	return ch, nil
}

// RecentEvents lists the last n events, newest last.
func (e *Engine) RecentEvents(ctx context.Context, n int) ([]model.Event, error) {
	evs, err := e.st.Events(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("recent events: %w", err)
	}
	return evs, nil
}
