package engine

import (
	"context"
	"fmt"

	"gseproc/model"
)

// subBuffer is each event subscriber's channel capacity; a subscriber that
// falls further behind misses events (they stay in RecentEvents).
const subBuffer = 1024

// onEvent is the EventSource callback: it never blocks the source.
func (e *Engine) onEvent(ev model.Event) {
	select {
	case e.eventsIn <- ev:
	default:
		e.log.Warn("event queue full: event dropped", "host", ev.Host.String(), "proc", ev.ProcKey, "event", string(ev.Kind))
	}
}

// eventLoop stores events, updates last known statuses and fans events
// out to subscribers, until the engine closes.
func (e *Engine) eventLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case ev := <-e.eventsIn:
			e.handleEvent(ev)
		}
	}
}

func (e *Engine) handleEvent(ev model.Event) {
	if ev.Time.IsZero() {
		ev.Time = e.now()
	}
	if err := e.st.AppendEvent(e.ctx, ev); err != nil {
		e.log.Warn("store event", "err", err)
	}
	if ev.ProcKey != "" {
		if st, ok := statusAfter(ev, e); ok {
			e.recordStatus(e.ctx, ev.Host, st)
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
