package opsem

import (
	"fmt"
	"time"

	"gseproc/model"
)

// Policy is the restart policy of a hosted process, after supervisord's
// and nomad's restart tracker: the first restart of a process that had been
// up is immediate; each further consecutive failure waits Interval (or Base)
// doubled per failure, +-Jitter, capped at Max; a process up for
// StableAfter has its failure count reset; after Retries restarts that did
// not stay up it is given up (FATAL, event process_cancel_restart) and
// only an operator's start brings it back.
type Policy struct {
	Retries     int           // start_retries
	Interval    time.Duration // start_interval; Base when 0
	Base, Max   time.Duration
	StableAfter time.Duration
	Jitter      float64
}

// PolicyOf is p's restart policy within the agent-wide base, cap and
// stable time.
func PolicyOf(p model.Process, base, max, stableAfter time.Duration) Policy {
	pol := p.Spec.Policy
	return Policy{Retries: pol.StartRetries, Interval: time.Duration(pol.StartInterval) * time.Second,
		Base: base, Max: max, StableAfter: stableAfter, Jitter: 0.2}
}

// Tracker is what the policy remembers of one instance.
type Tracker struct {
	// Attempts counts consecutive restarts that did not stay up.
	Attempts int
	// UpSince is when the current (or last) run came up; zero when it did not.
	UpSince time.Time
}

// Exit is what happened to a process, as the restart policy is told.
type Exit struct {
	// Status is the exit status, -1 when unknown (not the agent's child, or
	// found not running), or the start that failed.
	Status int
	// StartFailed: a restart attempt failed (it never came up).
	StartFailed bool
	// Hosted: the process is hosted. Held: it is held down (over a limit,
	// given up) until an operator's start.
	Hosted, Held bool
	Type         model.AutoType
	Now          time.Time
}

// Verdict is the restart policy's answer.
type Verdict uint8

// Verdicts.
const (
	// Leave: nothing to do (not hosted, held, a periodic run that ended:
	// the schedule starts the next).
	Leave Verdict = iota
	// Done: a one-shot job finished cleanly.
	Done
	// Restart after Next.Delay.
	Restart
	// GiveUp: start_retries are used up.
	GiveUp
)

func (v Verdict) String() string { return [...]string{"leave", "done", "restart", "give-up"}[v] }

// Next is what follows an exit.
type Next struct {
	Verdict Verdict
	Delay   time.Duration
	// Attempt is the restart's number (1-based), or the attempts made when
	// given up.
	Attempt int
	// State is the process's state until then: exited, backoff or fatal.
	State  model.ProcState
	Reason string
}

// OnExit decides what follows e for an instance with tracker t; r is a
// random draw in [0, 1) for the jitter. It returns the tracker to keep.
func (p Policy) OnExit(t Tracker, e Exit, r float64) (Next, Tracker) {
	if !e.Hosted || e.Held {
		return Next{Verdict: Leave, State: model.ProcExited}, t
	}
	switch e.Type {
	case model.AutoPeriodic:
		return Next{Verdict: Leave, State: model.ProcExited, Reason: "next run on schedule"}, t
	case model.AutoOneShot:
		if !e.StartFailed && e.Status <= 0 { // 0, or unknown for a process that is not the agent's child
			return Next{Verdict: Done, State: model.ProcExited, Reason: "one-shot done"}, t
		}
	}
	if e.StartFailed {
		t.UpSince = time.Time{}
	} else if !t.UpSince.IsZero() && e.Now.Sub(t.UpSince) >= p.StableAfter {
		t.Attempts = 0 // it had been up long enough: a fresh failure
	}
	if t.Attempts >= p.Retries {
		return Next{Verdict: GiveUp, Attempt: t.Attempts, State: model.ProcFatal,
			Reason: fmt.Sprintf("given up after %d restarts that did not stay up", t.Attempts)}, t
	}
	base := p.Base
	if p.Interval > 0 {
		base = p.Interval
	}
	delay := model.Backoff{Base: base, Max: p.Max, Jitter: p.Jitter, Immediate: true}.Delay(t.Attempts, r)
	t.Attempts++
	return Next{Verdict: Restart, Delay: delay, Attempt: t.Attempts, State: model.ProcBackoff,
		Reason: fmt.Sprintf("restart %d/%d in %s", t.Attempts, p.Retries, delay.Round(time.Millisecond))}, t
}

// Started is the tracker after a run came up at now.
func (t Tracker) Started(now time.Time) Tracker {
	t.UpSince = now
	return t
}

// Reset is the tracker after an operator's start: no failures counted.
func (t Tracker) Reset() Tracker { return Tracker{} }
