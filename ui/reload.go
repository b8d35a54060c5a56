package ui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// reloadGap is the shortest time between two event-driven reloads.
const reloadGap = 2 * time.Second

// reloads paces a page's event-driven reloads: one load in flight at a
// time, at most one start every reloadGap, and no change lost. A change
// told while a load is in flight may have come after the load read the
// backend, so it is kept (stale) and the load's answer starts the next
// one. It decides only; the page loads or schedules its tick.
type reloads struct {
	loading bool      // a load is in flight
	queued  bool      // a tick to load is scheduled
	stale   bool      // a change came while the load was in flight
	at      time.Time // when the last load started
}

// started records a load starting at now (events, a tick, R or the first).
func (r *reloads) started(now time.Time) {
	r.loading, r.stale, r.at = true, false, now
}

// changed tells of a change at now. It says to load now, or to schedule a
// tick after wait, or neither (the load in flight or the tick will see it).
func (r *reloads) changed(now time.Time) (load bool, wait time.Duration) {
	switch {
	case r.loading:
		r.stale = true
		return false, 0
	case r.queued:
		return false, 0
	}
	return r.next(now)
}

// done records the in-flight load's answer at now and says, as changed
// does, what the changes told meanwhile need.
func (r *reloads) done(now time.Time) (load bool, wait time.Duration) {
	r.loading = false
	if !r.stale {
		return false, 0
	}
	r.stale = false
	return r.next(now)
}

// fired records that the scheduled tick came: the page loads now.
func (r *reloads) fired() { r.queued = false }

func (r *reloads) next(now time.Time) (load bool, wait time.Duration) {
	if wait := reloadGap - now.Sub(r.at); wait > 0 {
		r.queued = true
		return false, wait
	}
	return true, 0
}

// paced turns a reloads decision into the page's command: its load, or
// the tick message tick after wait, or nothing.
func paced(load bool, wait time.Duration, loadCmd func() tea.Cmd, tick tea.Msg) tea.Cmd {
	switch {
	case load:
		return loadCmd()
	case wait > 0:
		return tea.Tick(wait, func(time.Time) tea.Msg { return tick })
	}
	return nil
}
