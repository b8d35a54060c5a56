package simulator

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"gseproc/model"
)

// Live controls: what a presenter makes happen to the simulated fleet
// (model.SimChange). Which hosts a change picks is a pure function of the
// fleet's seed, the action and the selected hosts (Pick), so a scenario
// tells the same story every time; what the change then does to each host
// is the simulated agent's own behaviour (its restart policy, its limit
// check). Changes that play out over time (a flapping agent, a relaunch
// after backoff) wait for Advance, which Run calls every tick and a
// headless scenario calls with its own clock.

// relaunch is a process in BACKOFF the restart policy relaunches at due.
type relaunch struct {
	host int32
	key  string
	due  int64
}

// hPick is the hash domain of picks.
const hPick = hAgentID + 100

// Pick orders the selected hosts by a hash of (seed, action, host) and
// returns the first n, sorted in host order: the same seed, action and
// selection pick the same hosts, and a larger share of the same selection
// picks a superset of a smaller one. Pure.
func Pick(seed uint64, action model.SimAction, selected []model.Host, n int) []model.Host {
	if n <= 0 {
		return nil
	}
	a := fnv.New64a()
	a.Write([]byte(action))
	salt := a.Sum64()
	type ranked struct {
		h    model.Host
		rank uint64
	}
	rs := make([]ranked, len(selected))
	for i, h := range selected {
		x := fnv.New64a()
		fmt.Fprintf(x, "%d:%s", h.CloudID, h.IP)
		rs[i] = ranked{h, mix(seed, hPick, salt, x.Sum64())}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), model.CompareHosts(a.h, b.h))
	})
	out := make([]model.Host, 0, min(n, len(rs)))
	for _, r := range rs[:min(n, len(rs))] {
		out = append(out, r.h)
	}
	slices.SortFunc(out, model.CompareHosts)
	return out
}

// Control carries out c on the hosts of targets (a process-level action:
// the (host, process) pairs; else the hosts, ProcKey empty) that this
// fleet simulates; scope describes the selection for the event. It emits
// one EventSimControl naming the change first, then each host's own
// events (agent offline, restarts, limit breaches) as they follow.
// c must have been validated.
func (f *Fleet) Control(ctx context.Context, c model.SimChange, targets []model.Target, scope string) (model.SimOutcome, error) {
	out := model.SimOutcome{Action: c.Action, Picked: []model.Target{}}
	// The simulated hosts among the targets, per process key.
	byKey := map[string][]model.Host{}
	var keys []string
	seen := map[model.Target]bool{}
	for _, t := range targets {
		t = model.Target{Host: t.Host, ProcKey: t.ProcKey}
		if !c.Action.ProcessLevel() {
			t.ProcKey = ""
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		if _, ok := f.lookup(t.Host); !ok {
			out.Skipped++
			continue
		}
		if _, ok := byKey[t.ProcKey]; !ok {
			keys = append(keys, t.ProcKey)
		}
		byKey[t.ProcKey] = append(byKey[t.ProcKey], t.Host)
	}
	slices.Sort(keys)
	for _, k := range keys {
		hs := byKey[k]
		out.Selected += len(hs)
		for _, h := range Pick(f.seed, c.Action, hs, c.PickCount(len(hs))) {
			out.Picked = append(out.Picked, model.Target{Host: h, ProcKey: k})
		}
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("simulator control %s: %w", c.Action, err)
	}
	now := f.now()
	what := describe(c, scope, len(out.Picked), out.Selected)
	ev := model.Event{Time: now, Kind: model.EventSimControl, Message: what}
	if len(keys) == 1 {
		ev.ProcKey = keys[0]
	}
	if len(out.Picked) > 0 {
		f.emit(ev)
	}
	for _, t := range out.Picked {
		i, _ := f.lookup(t.Host)
		if f.control(i, t.ProcKey, c, now) {
			out.Changed++
		}
	}
	out.Message = fmt.Sprintf("%s: %d changed", what, out.Changed)
	if out.Skipped > 0 {
		out.Message += fmt.Sprintf(", %d real agents left alone", out.Skipped)
	}
	return out, nil
}

// describe is the one-line story of a change, for its event.
func describe(c model.SimChange, scope string, picked, selected int) string {
	var b strings.Builder
	b.WriteString("sim: ")
	of := fmt.Sprintf("%d of %d hosts", picked, selected)
	if scope != "" {
		of += " (" + scope + ")"
	}
	switch c.Action {
	case model.SimOffline:
		fmt.Fprintf(&b, "took %s offline", of)
	case model.SimOnline:
		fmt.Fprintf(&b, "brought %s back online", of)
	case model.SimCrash:
		fmt.Fprintf(&b, "crashed the process on %s", of)
		if c.RestartFails > 0 {
			fmt.Fprintf(&b, ", %.0f%% of relaunches failing", c.RestartFails*100)
		}
	case model.SimMemory:
		fmt.Fprintf(&b, "pushed the process's memory past its limit on %s", of)
	case model.SimLatency:
		fmt.Fprintf(&b, "set latency median %dms p99 %dms on %s", c.LatencyMS, max(c.LatencyP99MS, c.LatencyMS), of)
	case model.SimFailures:
		fmt.Fprintf(&b, "set the command failure rate to %.0f%% on %s", *c.Rate*100, of)
	case model.SimFlap:
		fmt.Fprintf(&b, "made the agents of %s flap %d times every %s", of, c.Times, time.Duration(c.EveryMS)*time.Millisecond)
	case model.SimRestore:
		fmt.Fprintf(&b, "restored %s to the fleet's profile", of)
	}
	if c.Note != "" {
		b.WriteString(": " + c.Note)
	}
	return b.String()
}

// control applies c to host i (process key for a process-level action)
// and reports whether it changed anything.
func (f *Fleet) control(i int32, key string, c model.SimChange, now time.Time) bool {
	h := &f.hosts[i]
	switch c.Action {
	case model.SimOffline:
		return f.setOffline(i, true)
	case model.SimOnline:
		f.stopFlap(i)
		return f.setOffline(i, false)
	case model.SimRestore:
		f.stopFlap(i)
		h.mu.Lock()
		changed := h.lat != nil || h.failSet
		h.lat, h.failSet, h.failRate = nil, false, 0
		h.mu.Unlock()
		return f.setOffline(i, false) || changed
	case model.SimLatency:
		l := newLatency(time.Duration(c.LatencyMS)*time.Millisecond, time.Duration(max(c.LatencyP99MS, c.LatencyMS))*time.Millisecond)
		h.mu.Lock()
		h.lat = &l
		h.mu.Unlock()
		return true
	case model.SimFailures:
		h.mu.Lock()
		h.failRate, h.failSet = float32(*c.Rate), true
		h.mu.Unlock()
		return true
	case model.SimFlap:
		h.mu.Lock()
		h.flapLeft = int32(2 * c.Times)
		h.flapEvery = int32(c.EveryMS)
		h.flapNext = now.UnixNano()
		h.mu.Unlock()
		f.ctlMu.Lock()
		f.flapping[i] = true
		f.ctlMu.Unlock()
		f.flapStep(i, now)
		return true
	case model.SimCrash:
		fails := hash01(f.seed, hPick, hKind, uint64(i)) < c.RestartFails
		return f.crashNow(i, key, fails, now)
	case model.SimMemory:
		return f.overLimit(i, key, now)
	}
	return false
}

// setOffline is SetOffline by index; it reports whether the state changed.
func (f *Fleet) setOffline(i int32, offline bool) bool {
	sh := &f.hosts[i]
	sh.mu.Lock()
	was := sh.away()
	sh.offline = offline
	if !offline {
		sh.kind = kindNormal
	}
	sh.mu.Unlock()
	switch {
	case offline && !was:
		f.emit(model.Event{Time: f.now(), Host: sh.host, Kind: model.EventAgentOffline, Message: "agent " + sh.host.AgentID() + " went offline"})
	case !offline && was:
		f.emit(model.Event{Time: f.now(), Host: sh.host, Kind: model.EventAgentOnline, Message: "agent " + sh.host.AgentID() + " is online"})
	default:
		return false
	}
	return true
}

func (f *Fleet) stopFlap(i int32) {
	h := &f.hosts[i]
	h.mu.Lock()
	h.flapLeft = 0
	h.mu.Unlock()
	f.ctlMu.Lock()
	delete(f.flapping, i)
	f.ctlMu.Unlock()
}

// flapStep toggles host i's agent when its next toggle is due.
func (f *Fleet) flapStep(i int32, now time.Time) {
	h := &f.hosts[i]
	h.mu.Lock()
	if h.flapLeft <= 0 || now.UnixNano() < h.flapNext {
		h.mu.Unlock()
		return
	}
	h.flapLeft--
	left := h.flapLeft
	h.flapNext = now.UnixNano() + int64(h.flapEvery)*int64(time.Millisecond)
	offline := !h.away()
	h.mu.Unlock()
	if left == 0 {
		offline = false // a flap ends with the agent back
		f.ctlMu.Lock()
		delete(f.flapping, i)
		f.ctlMu.Unlock()
	}
	f.setOffline(i, offline)
}

// materialize is host i's state for process key, created from its
// deployment when it was still lazy; nil when the host has no such
// process. h.mu must be held.
func (f *Fleet) materialize(i int32, h *simHost, key string) *procState {
	if p := h.find(key); p != nil {
		return p
	}
	d, ok := f.defKey[key]
	if !ok || !f.deployed(d, i) {
		return nil
	}
	init := f.initial(i, d)
	h.procs = append(h.procs, &init)
	return &init
}

// runningHosted is process key of host i when the host's agent answers
// and hosts it running (its state made from its deployment if still
// lazy), else nil. h.mu must be held.
func (f *Fleet) runningHosted(i int32, h *simHost, key string) *procState {
	if h.away() {
		return nil
	}
	if p := f.materialize(i, h, key); p != nil && p.running && p.hosted {
		return p
	}
	return nil
}

// crashNow makes hosted, running process key on host i exit abnormally
// (kill -9) and lets the agent's restart policy answer; the first
// relaunch fails when fails is set (never on a demo host), and a process
// left in BACKOFF is relaunched by Advance when its delay is over.
func (f *Fleet) crashNow(i int32, key string, fails bool, now time.Time) bool {
	h := &f.hosts[i]
	h.mu.Lock()
	p := f.runningHosted(i, h, key)
	if p == nil {
		h.mu.Unlock()
		return false
	}
	p.stop(137)
	p.due = 0
	evs := f.exited(h, p, 137, "exited abnormally", false, fails && !h.demo, now)
	due := p.due
	backoff := !p.running && p.phase == phaseBackoff
	h.mu.Unlock()
	if backoff {
		if due == 0 {
			due = now.UnixNano()
		}
		f.ctlMu.Lock()
		f.pending = append(f.pending, relaunch{host: i, key: key, due: due})
		f.ctlMu.Unlock()
	}
	for _, e := range evs {
		f.emit(e)
	}
	return true
}

// overLimit is the agent finding hosted, running process key on host i
// over its mem limit: it stops it and holds it down until an operator's
// start (EventLimitExceeded). A process without a mem limit is left alone.
func (f *Fleet) overLimit(i int32, key string, now time.Time) bool {
	h := &f.hosts[i]
	h.mu.Lock()
	p := f.runningHosted(i, h, key)
	if p == nil || p.def < 0 || f.defs[p.def].proc.Spec.Resource.Mem <= 0 {
		h.mu.Unlock()
		return false
	}
	lim := f.defs[p.def].proc.Spec.Resource.Mem
	ev := h.holdOverLimit(p, round2(lim*1.25), lim, now)
	h.mu.Unlock()
	f.emit(ev)
	return true
}

// holdOverLimit is the agent stopping running p, found using use percent
// of memory over its limit lim, and holding it down until an operator's
// start; it returns the EventLimitExceeded. h.mu must be held.
func (h *simHost) holdOverLimit(p *procState, use, lim float64, now time.Time) model.Event {
	p.stop(137)
	p.held = true
	return model.Event{Time: now, Host: h.host, ProcKey: p.key, Kind: model.EventLimitExceeded, Value: round2(use),
		Message: fmt.Sprintf("process %s mem usage %.1f%% exceeds its limit %.0f%%, stopped, not restarted until a manual start", p.procName, use, lim)}
}

// Advance carries out the live controls due by now: flapping agents
// toggle, processes in BACKOFF whose delay is over are relaunched (a
// relaunch after a control's crash comes up: the storm is absorbed). Run
// calls it every tick; a headless scenario calls it with its own clock.
func (f *Fleet) Advance(now time.Time) {
	f.ctlMu.Lock()
	flaps := make([]int32, 0, len(f.flapping))
	for i := range f.flapping {
		flaps = append(flaps, i)
	}
	var due []relaunch
	keep := f.pending[:0]
	for _, r := range f.pending {
		if r.due <= now.UnixNano() {
			due = append(due, r)
		} else {
			keep = append(keep, r)
		}
	}
	f.pending = keep
	f.ctlMu.Unlock()
	slices.Sort(flaps)
	for _, i := range flaps {
		f.flapStep(i, now)
	}
	slices.SortFunc(due, func(a, b relaunch) int {
		return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.host, b.host), strings.Compare(a.key, b.key))
	})
	for _, r := range due {
		h := &f.hosts[r.host]
		h.mu.Lock()
		p := h.find(r.key)
		var evs []model.Event
		away := h.away()
		if p != nil && !away && !p.running && p.phase == phaseBackoff && p.hosted && !p.held {
			evs = f.attempt(h, p, "not running", false, now)
		}
		h.mu.Unlock()
		if away { // the agent relaunches it once it is back
			f.ctlMu.Lock()
			f.pending = append(f.pending, r)
			f.ctlMu.Unlock()
		}
		for _, e := range evs {
			f.emit(e)
		}
	}
}

// SetClock makes the fleet read time from now (a scenario's clock in a
// headless run); call it before the fleet is used.
func (f *Fleet) SetClock(now func() time.Time) {
	if now != nil {
		f.now = now
	}
}

// Announce tells the audience something about the story (a scenario
// beginning or ending): an EventSimControl with msg.
func (f *Fleet) Announce(msg string) {
	f.emit(model.Event{Time: f.now(), Kind: model.EventSimControl, Message: "sim: " + msg})
}
