package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// Clock is the time a story is told in.
type Clock interface {
	Now() time.Time
	// WaitUntil returns once the clock reads t (or ctx ended: ctx.Err()).
	WaitUntil(ctx context.Context, t time.Time) error
}

// WallClock is real time: a live demo.
type WallClock struct{}

func (WallClock) Now() time.Time { return time.Now() }

func (WallClock) WaitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// ManualClock is a scenario clock: it moves only when waited on, at once,
// so a headless story of minutes runs in milliseconds and the same every
// time. Safe for concurrent use (the fleet reads it).
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock starts at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *ManualClock) WaitUntil(ctx context.Context, t time.Time) error {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
	return ctx.Err()
}

// Tick is how often a Runner with Advance set moves the fleet's timed
// behaviour along between steps.
const Tick = 100 * time.Millisecond

// Runner plays a scenario on a backend.
type Runner struct {
	Backend backend.Backend
	Clock   Clock
	// Advance, when set, is called every Tick of the story's time (the
	// fleet's Advance in a headless run; a live fleet's Run does it).
	Advance func(now time.Time)
	// Announce, when set, tells the audience the story begins and ends
	// (the fleet's Announce: an event in the event list).
	Announce func(msg string)
	// Step, when set, hears each step's outcome as it happens.
	Step func(StepResult)
}

// StepResult is what one step did.
type StepResult struct {
	Index   int
	Step    Step
	At      time.Time
	Outcome model.SimOutcome // a control's
	Task    *model.Task      // an op's, finished
	Roll    *model.RollView  // a rolled op's batches and why it stopped
	Err     error            // refused or failed: the story goes on
}

// Run plays sc until its end or until ctx ends (then ctx.Err()). A step
// that fails is reported (StepResult.Err) and the story goes on, as a
// presenter would.
func (r Runner) Run(ctx context.Context, sc Scenario) ([]StepResult, error) {
	start := r.Clock.Now()
	if r.Announce != nil {
		r.Announce(fmt.Sprintf("scenario %q begins: %d steps over %s", sc.Name, len(sc.Steps), sc.End))
	}
	var out []StepResult
	for i, s := range sc.Steps {
		if err := r.until(ctx, start, start.Add(s.At)); err != nil {
			return out, err
		}
		res := r.do(ctx, i, s)
		out = append(out, res)
		if r.Step != nil {
			r.Step(res)
		}
	}
	if err := r.until(ctx, start, start.Add(sc.End)); err != nil {
		return out, err
	}
	if r.Announce != nil {
		r.Announce(fmt.Sprintf("scenario %q ended", sc.Name))
	}
	return out, nil
}

// until moves the story to t, advancing the fleet every Tick on the way.
func (r Runner) until(ctx context.Context, start, t time.Time) error {
	if r.Advance == nil {
		return r.Clock.WaitUntil(ctx, t)
	}
	for {
		now := r.Clock.Now()
		next := start.Add((now.Sub(start)/Tick + 1) * Tick)
		if next.After(t) {
			next = t
		}
		if !next.After(now) {
			r.Advance(now)
			return ctx.Err()
		}
		if err := r.Clock.WaitUntil(ctx, next); err != nil {
			return err
		}
		r.Advance(next)
	}
}

func (r Runner) do(ctx context.Context, i int, s Step) StepResult {
	res := StepResult{Index: i, Step: s, At: r.Clock.Now()}
	if s.Op == nil {
		res.Outcome, res.Err = r.Backend.Simulate(ctx, s.Sim)
		return res
	}
	t, err := r.Backend.Operate(ctx, backend.OperateRequest{Op: *s.Op, Selector: s.Sim.Selector, Source: "demo", Operator: "scenario", Rollout: s.Rollout})
	if err != nil {
		res.Err = err
		return res
	}
	ch, err := r.Backend.Watch(ctx, t.ID, 0)
	if err != nil {
		res.Err = err
		return res
	}
	for range ch {
	}
	tv, err := r.Backend.Task(ctx, t.ID)
	if err != nil {
		res.Err = err
		return res
	}
	res.Task = &tv.Task
	res.Roll = tv.Roll
	return res
}
