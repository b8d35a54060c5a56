package simulator

import (
	"context"
	"fmt"
	"time"

	"gseproc/backend/config"
	"gseproc/model"
	"gseproc/model/opsem"
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

// Close ends every event subscription and waits for their goroutines, and
// stops answering the requests DispatchLaterTo holds (they are not
// answered). The fleet still answers Dispatch afterwards; new
// subscriptions are ignored, and DispatchLaterTo takes no request.
func (f *Fleet) Close() error {
	f.later.close()
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
// crashes at the configured rate (crash_rate per process per minute) and
// the restart policy of model/opsem (the agent's) decides what follows:
// an immediate relaunch after a run that had been up, emitting
// EventRestartSuccess, or EventRestartFailed at the failure rate, after
// which the process waits in BACKOFF until a later round relaunches it;
// after start_retries failed relaunches it is given up (EventGiveUp,
// FATAL, still hosted) until an operator's start. The policy's delays are
// not waited for: a later round stands for them. One crash in ten of a
// process with a mem limit is the agent stopping it over that limit
// (EventLimitExceeded): it is held down, as the agent holds it, until an
// operator's start. Offline and unreachable hosts are left alone. Each
// tick also advances the live controls waiting on the clock (Advance). Run
// starts no goroutines and returns when ctx ends.
func (f *Fleet) Run(ctx context.Context) {
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
			f.Advance(f.now())
			if f.cfg.CrashRate <= 0 {
				continue
			}
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
// running), or relaunches a hosted process waiting in BACKOFF. d is the
// deployment's definition, -1 for a process created by an op.
func (f *Fleet) crash(i, d int32, key string, fail bool) {
	h := &f.hosts[i]
	h.mu.Lock()
	if h.away() {
		h.mu.Unlock()
		return
	}
	p := h.find(key)
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
	fail = fail && !h.demo
	now := f.now()
	var evs []model.Event
	switch {
	case !p.hosted || p.held:
	case p.running && d >= 0 && f.defs[d].proc.Spec.Resource.Mem > 0 && p.restarts%10 == 9:
		// Now and then the agent itself stops it for breaking its limit,
		// and holds it down.
		lim := f.defs[d].proc.Spec.Resource.Mem
		evs = append(evs, h.holdOverLimit(p, lim*1.12, lim, now))
	case p.running:
		p.stop(139) // died abnormally
		evs = f.exited(h, p, 139, "exited abnormally", true, fail, now)
	case p.phase == phaseBackoff:
		evs = f.attempt(h, p, "not running", fail, now)
	}
	h.mu.Unlock()
	for _, e := range evs {
		f.emit(e)
	}
}

// away reports whether h's agent does not answer: taken offline, or drawn
// offline or unreachable by the profile. h.mu must be held.
func (h *simHost) away() bool { return h.offline || h.kind != kindNormal }

// find is the host's state for process key, nil when it has none. h.mu
// must be held.
func (h *simHost) find(key string) *procState {
	for _, ps := range h.procs {
		if ps.key == key {
			return ps
		}
	}
	return nil
}

// policy is p's restart policy, with the agent's defaults.
func (f *Fleet) policy(p *procState) opsem.Policy {
	def := model.NewProcess()
	if p.def >= 0 {
		def = f.defs[p.def].proc // defaults filled where it was made (gen)
	}
	if p.retries > 0 {
		def.Spec.Policy.StartRetries = int(p.retries) - 1
	}
	a := config.DefaultAgent()
	return opsem.PolicyOf(def, a.BackoffBase.D(), a.BackoffMax.D(), a.StableAfter.D())
}

func (p *procState) tracker() opsem.Tracker {
	t := opsem.Tracker{Attempts: int(p.attempts)}
	if p.started != 0 {
		t.UpSince = time.Unix(0, p.started)
	}
	return t
}

// exited tells the restart policy that hosted p ended (status, -1 when
// unknown) and carries out its answer. stable says the run counts as one
// that stayed up, whatever the clock says: Run's random crashes stand for
// independent failures of healthy processes (crash loops come from
// relaunches failing at the failure rate), however fast a test runs them.
// h.mu must be held.
func (f *Fleet) exited(h *simHost, p *procState, status int, what string, stable, fail bool, now time.Time) []model.Event {
	pol := f.policy(p)
	t := p.tracker()
	if stable {
		t.UpSince = now.Add(-pol.StableAfter)
	}
	next, t := pol.OnExit(t, opsem.Exit{Status: status, Hosted: p.hosted, Held: p.held,
		Type: model.AutoResident, Now: now}, unit(splitmix64(&h.rng)))
	p.attempts = int32(t.Attempts)
	return f.follow(h, p, next, what, fail, now)
}

// attempt is one relaunch of hosted p by the restart policy; it fails
// when fail is set. h.mu must be held.
func (f *Fleet) attempt(h *simHost, p *procState, what string, fail bool, now time.Time) []model.Event {
	ev := model.Event{Time: now, Host: h.host, ProcKey: p.key}
	if !fail {
		p.startAt(h, now)
		p.restarts++
		ev.Kind = model.EventRestartSuccess
		ev.Message = fmt.Sprintf("check %s %s, and restart it success", p.procName, what)
		return []model.Event{ev}
	}
	p.exitStatus = 1
	ev.Kind = model.EventRestartFailed
	ev.Message = fmt.Sprintf("check %s %s, and restart it failed", p.procName, what)
	next, t := f.policy(p).OnExit(p.tracker(), opsem.Exit{Status: -1, StartFailed: true, Hosted: p.hosted, Held: p.held,
		Type: model.AutoResident, Now: now}, unit(splitmix64(&h.rng)))
	p.attempts = int32(t.Attempts)
	return append([]model.Event{ev}, f.follow(h, p, next, what, false, now)...)
}

// follow carries out the restart policy's answer for p. The policy's
// delays are simulated: an immediate restart happens now, a later one when
// Run next picks the process. h.mu must be held.
func (f *Fleet) follow(h *simHost, p *procState, next opsem.Next, what string, fail bool, now time.Time) []model.Event {
	switch next.Verdict {
	case opsem.Restart:
		p.phase = phaseBackoff
		if next.Delay == 0 {
			return f.attempt(h, p, what, fail, now)
		}
		p.due = now.Add(next.Delay).UnixNano()
	case opsem.GiveUp:
		p.phase, p.held = phaseFatal, true
		return []model.Event{{Time: now, Host: h.host, ProcKey: p.key, Kind: model.EventGiveUp, Value: float64(next.Attempt),
			Message: fmt.Sprintf("%s not running, restart given up after %d attempts (start_retries %d); a manual start brings it back",
				p.procName, next.Attempt, f.policy(p).Retries)}}
	}
	return nil
}

// Crash makes a hosted process on h exit abnormally now, as a kill -9
// would, for rehearsals and tests: the crash control (crashNow) on one
// host. The simulated agent applies the restart policy at once, and the
// first relaunch fails when restartFails is set. It reports whether h's
// agent answers and has a hosted, running process with key.
func (f *Fleet) Crash(h model.Host, key string, restartFails bool) bool {
	i, ok := f.lookup(h)
	return ok && f.crashNow(i, key, restartFails, f.now())
}

// FailNext scripts the next command-running op on process key of h: it
// ends with code (model.CodeCommandFailed or model.CodePostCheckFailed)
// instead of succeeding, for rehearsals and tests. It reports whether h
// knows the process.
func (f *Fleet) FailNext(h model.Host, key string, code int) bool {
	i, ok := f.lookup(h)
	if !ok {
		return false
	}
	sh := &f.hosts[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.find(key)
	if p == nil {
		return false
	}
	p.failNext = int32(code)
	return true
}
