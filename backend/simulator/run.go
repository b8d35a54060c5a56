package simulator

import (
	"context"
	"fmt"
	"time"

	"gseproc/model"
)

// EventBuffer is how many events a subscriber may lag behind before new
// ones are dropped for it (see Dropped).
const EventBuffer = 4096

// tick is how often Run draws crashes.
const tick = 50 * time.Millisecond

// maxCrashesPerTick bounds Run's work per tick whatever the profile.
const maxCrashesPerTick = 100_000

type subscriber struct {
	ch     chan model.Event
	cancel context.CancelFunc
}

// SubscribeEvents registers fn for every event from now until ctx ends
// (engine.EventSource), and returns at once. Events are delivered in order
// on a goroutine of the subscription, through a buffer of EventBuffer
// events: a subscriber that falls further behind loses events (counted by
// Dropped) rather than slow the fleet down. Close ends every subscription
// and waits for its goroutine.
func (f *Fleet) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	if f.closed || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &subscriber{ch: make(chan model.Event, EventBuffer), cancel: cancel}
	id := f.nextSub
	f.nextSub++
	f.subs[id] = s
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer func() {
			f.subMu.Lock()
			delete(f.subs, id)
			f.subMu.Unlock()
			cancel()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-s.ch:
				fn(e)
			}
		}
	}()
}

// emit hands e to every subscriber without blocking.
func (f *Fleet) emit(e model.Event) {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	for _, s := range f.subs {
		select {
		case s.ch <- e:
		default:
			f.dropped.Add(1)
		}
	}
}

// Dropped counts events dropped for subscribers that fell behind.
func (f *Fleet) Dropped() uint64 { return f.dropped.Load() }

// Close ends every event subscription and waits for their goroutines. The
// fleet still answers Dispatch afterwards; new subscriptions are ignored.
func (f *Fleet) Close() error {
	f.subMu.Lock()
	f.closed = true
	for _, s := range f.subs {
		s.cancel()
	}
	f.subMu.Unlock()
	f.wg.Wait()
	return nil
}

// Run simulates the agents' hosting until ctx ends: every hosted process
// crashes at the configured rate (crash_rate per process per minute) and is
// brought back up with a new pid and one more restart, emitting
// EventRestartSuccess; at the failure rate the relaunch fails
// (EventRestartFailed) and the process stays down until a later round
// brings it up; after start_retries failures in a row the agent gives up
// (EventGiveUp) and stops hosting it. A hosted process found not running is
// brought up the same way. One crash in ten of a process with a mem limit
// is the agent stopping it over that limit (EventLimitExceeded first). Offline and unreachable hosts are left alone. Run starts no
// goroutines and returns when ctx ends.
func (f *Fleet) Run(ctx context.Context) {
	if f.cfg.CrashRate <= 0 {
		<-ctx.Done()
		return
	}
	rng := mix(f.seed, uint64(time.Now().UnixNano()))
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	pairs := uint64(len(f.hosts)) * uint64(len(f.defs))
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			dt := now.Sub(last).Minutes()
			last = now
			f.extraMu.Lock()
			n := pairs + uint64(len(f.extras))
			f.extraMu.Unlock()
			k := min(poisson(&rng, float64(n)*f.cfg.CrashRate*dt), maxCrashesPerTick)
			for range k {
				if ctx.Err() != nil {
					return
				}
				r := splitmix64(&rng) % n
				fail := unit(splitmix64(&rng)) < f.cfg.FailureRate
				if r < pairs {
					i, d := int32(r/uint64(len(f.defs))), int32(r%uint64(len(f.defs)))
					if f.deployed(d, i) {
						f.crash(i, d, f.defs[d].key, fail)
					}
					continue
				}
				f.extraMu.Lock()
				ref := f.extras[r-pairs]
				f.extraMu.Unlock()
				f.crash(ref.host, -1, ref.key, fail)
			}
		}
	}
}

// crash makes process key on host i exit abnormally (if hosted and
// running) and relaunches it, or brings up a hosted process that is down.
// d is the deployment's definition, -1 for a process created by an op.
func (f *Fleet) crash(i, d int32, key string, fail bool) {
	h := &f.hosts[i]
	h.mu.Lock()
	if h.offline || h.kind != kindNormal {
		h.mu.Unlock()
		return
	}
	var p *procState
	for _, ps := range h.procs {
		if ps.key == key {
			p = ps
			break
		}
	}
	if p == nil {
		if d < 0 {
			h.mu.Unlock()
			return
		}
		init := f.initial(i, d)
		if !init.hosted {
			h.mu.Unlock() // nothing to do: keep the state lazy
			return
		}
		p = &init
		h.procs = append(h.procs, p)
	}
	if !p.hosted {
		h.mu.Unlock()
		return
	}
	now := f.now()
	evs := make([]model.Event, 0, 3)
	what := "not running"
	if p.running {
		what = "exited abnormally"
		// Now and then the agent itself killed it for breaking its limit.
		if d >= 0 && f.defs[d].proc.Spec.Resource.Mem > 0 && p.restarts%10 == 9 {
			lim := f.defs[d].proc.Spec.Resource.Mem
			evs = append(evs, model.Event{Time: now, Host: h.host, ProcKey: key, Kind: model.EventLimitExceeded, Value: round2(lim * 1.12),
				Message: fmt.Sprintf("process %s mem usage %.1f%% exceeds its limit %.0f%%, stopped", p.procName, lim*1.12, lim)})
			what = "was stopped over its mem limit"
		}
		p.stop(139) // died abnormally
	}
	p.restarts++
	fail = fail && !h.demo
	ev := model.Event{Time: now, Host: h.host, ProcKey: key}
	if fail {
		p.exitStatus = 1
		p.failStreak++
		ev.Kind = model.EventRestartFailed
		ev.Message = fmt.Sprintf("check %s %s, and restart it failed", p.procName, what)
		evs = append(evs, ev)
		retries := int32(model.DefaultStartRetries)
		if d >= 0 && f.defs[d].proc.Spec.Policy.StartRetries > 0 {
			retries = int32(f.defs[d].proc.Spec.Policy.StartRetries)
		}
		if p.failStreak >= retries {
			// Given up: the agent stops hosting it (gse: process_cancel_restart).
			p.unhost()
			p.failStreak = 0
			evs = append(evs, model.Event{Time: now, Host: h.host, ProcKey: key, Kind: model.EventGiveUp,
				Message: fmt.Sprintf("%s failed to restart %d times in a row, no longer hosted", p.procName, retries)})
		}
	} else {
		p.startAt(h, now)
		p.failStreak = 0
		ev.Kind = model.EventRestartSuccess
		ev.Message = fmt.Sprintf("check %s %s, and restart it success", p.procName, what)
		evs = append(evs, ev)
	}
	h.mu.Unlock()
	for _, e := range evs {
		f.emit(e)
	}
}
