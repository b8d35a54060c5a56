package simulator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gseproc/backend/opledger"
	"gseproc/model"
	"gseproc/model/opsem"
)

// Dispatch answers one operation as the host's agent would (engine.Dispatcher).
//
//   - Unknown host, or a host drawn unreachable: an error wrapping
//     model.ErrUnreachable, at once.
//   - Offline host: blocks until ctx ends and returns ctx.Err().
//   - Otherwise it waits the host's drawn latency (honouring ctx), applies
//     the op to the process's state and replies with the code and the
//     process's status after the op (AgentReply.Status is always set).
//
// What each op does, its codes and the state after are decided by
// model/opsem, the same package the real agent follows (its package doc
// has the table); the simulator only carries the decision out on its
// simulated processes. A command-running op fails at the profile's
// failure rate (836 or 65535 for a start or restart, 65535 for the others)
// or as FailNext scripted it. Processes are simulated as resident ones.
//
// A process the host has not seen before (e.g. sent inline by the API) is
// created as stopped and not hosted. Hosts named by the API documents'
// examples (Demo) never fail at random.
//
// An op that changes something runs once per req.OpID: a repeat (a task
// resumed by another server) is answered with the recorded code, message
// and output and the process's status now, and changes nothing.
func (f *Fleet) Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error) {
	return f.DispatchUntil(ctx, time.Time{}, host, req)
}

// DispatchUntil is Dispatch with ctx given the deadline (none when zero),
// but without a context made for it when the op only waits its latency:
// a request's wait ends at its deadline when that comes first, with
// context.DeadlineExceeded, as the context's would. The fleet served over
// NATS bounds every request by its deadline, and a context with a timer
// made per request was a tenth of a simulated fleet's CPU in an op. An op
// that waits on anything else (an offline host, a change run once per op
// id, a cancel, a tail) is given ctx with the deadline.
func (f *Fleet) DispatchUntil(ctx context.Context, deadline time.Time, host model.Host, req model.AgentRequest) (model.AgentReply, error) {
	if err := ctx.Err(); err != nil {
		return model.AgentReply{}, err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return model.AgentReply{}, context.DeadlineExceeded
	}
	if !deadline.IsZero() && !latencyOnly(&req) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
		deadline = time.Time{}
	}
	i, h, err := f.reach(host)
	if err != nil {
		return model.AgentReply{}, err
	}
	if h.offline || h.kind == kindOffline {
		h.mu.Unlock()
		return model.AgentReply{}, f.silent(ctx, deadline)
	}
	if req.Group != nil {
		// A process group is taken as an agent takes it; simulated
		// processes use no real resources, so no pool is ever over.
		h.mu.Unlock()
		if err := req.Group.Validate(); err != nil {
			return model.AgentReply{Code: model.CodeCommandFailed, Message: err.Error()}, nil
		}
		return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, nil
	}
	if req.Tail != nil {
		h.mu.Unlock()
		return f.tail(ctx, i, h, req)
	}
	if req.CancelOp {
		h.mu.Unlock()
		return f.cancelOp(ctx, i, h, req)
	}
	if req.OpID == "" || !req.Op.Mutating() {
		return f.run(ctx, deadline, i, h, req)
	}
	h.mu.Unlock()
	var rep model.AgentReply
	var rerr error
	out, repeat, err := f.ops.Do(ctx, req.OpID, func() (opledger.Outcome, bool) {
		h.mu.Lock()
		rep, rerr = f.run(ctx, time.Time{}, i, h, req)
		if rerr != nil {
			return opledger.Outcome{}, false
		}
		return opledger.Outcome{Code: rep.Code, Message: rep.Message, Output: rep.Output, Cancelled: rep.Cancelled}, true
	})
	switch {
	case err != nil:
		return model.AgentReply{}, err
	case rerr != nil:
		return model.AgentReply{}, rerr
	case !repeat:
		return rep, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := f.now()
	st := f.status(h, f.proc(i, h, &req.Process, false), now)
	return model.AgentReply{Code: out.Code, Message: out.Message, Output: out.Output, Status: &st, Cancelled: out.Cancelled}, nil
}

// reach finds host's simulated agent and locks it (h.mu held when err is
// nil): ErrUnreachable when the fleet has no such host or it is one that
// never answers (an offline one does answer, with silence).
func (f *Fleet) reach(host model.Host) (int32, *simHost, error) {
	i, ok := f.lookup(host)
	if !ok {
		return 0, nil, fmt.Errorf("dispatch %s: no agent with this id: %w", host, model.ErrUnreachable)
	}
	return f.reachAt(i, host)
}

// reachAt is reach of the host at place i of f.hosts, named host.
func (f *Fleet) reachAt(i int32, host model.Host) (int32, *simHost, error) {
	h := &f.hosts[i]
	h.mu.Lock()
	if h.kind == kindUnreachable && !h.offline {
		h.mu.Unlock()
		return 0, nil, fmt.Errorf("dispatch %s: no responders: %w", host, model.ErrUnreachable)
	}
	return i, h, nil
}

// latencyOnly says whether req's answer waits for nothing but the host's
// latency (and a deadline): not a change run once per op id (a mutating
// op with an op id), a group, a tail or a cancel. Those DispatchUntil gives
// a context with the deadline, and DispatchLaterTo leaves to Dispatch.
func latencyOnly(req *model.AgentRequest) bool {
	return !(req.Group != nil || req.Tail != nil || req.CancelOp || (req.OpID != "" && req.Op.Mutating()))
}

// silent is an offline host's answer: none, when ctx ends or at the
// deadline (zero: none), whichever comes first.
func (f *Fleet) silent(ctx context.Context, deadline time.Time) error {
	if deadline.IsZero() {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return context.DeadlineExceeded
	}
}

// run applies req to host i after its latency, unless ctx ends or the
// deadline (zero: none) comes first; h.mu is held on entry and released
// on return.
func (f *Fleet) run(ctx context.Context, deadline time.Time, i int32, h *simHost, req model.AgentRequest) (model.AgentReply, error) {
	d := f.draw(h)
	h.mu.Unlock()

	if d.lat > 0 {
		wait, late := d.lat, false
		if !deadline.IsZero() {
			if left := time.Until(deadline); left < d.lat {
				wait, late = max(left, 0), true
			}
		}
		t := f.timer(wait)
		defer f.timers.Put(t) // stopped or fired and read: it holds nothing
		select {
		case <-ctx.Done():
			t.Stop()
			return f.ended(ctx, i, h, &req)
		case <-t.C:
			if late {
				return model.AgentReply{}, context.DeadlineExceeded
			}
		}
	}
	rep, ok := f.settle(i, h, &req, d, new(model.ProcStatus))
	if !ok {
		return model.AgentReply{}, f.silent(ctx, deadline)
	}
	return rep, nil
}

// drawn is what a request draws from its host's generator: everything up
// front, in call order, so a seed repeats a run.
type drawn struct {
	lat      time.Duration
	failDraw float64
	rate     float64
	aux      uint64
}

// draw draws a request's latency and outcome on host h. h.mu must be held.
func (f *Fleet) draw(h *simHost) drawn {
	l, rate := f.lat, f.cfg.FailureRate
	if h.lat != nil {
		l = *h.lat
	}
	if h.failSet {
		rate = float64(h.failRate)
	}
	d := drawn{rate: rate}
	d.lat = l.draw(&h.rng)
	d.failDraw = unit(splitmix64(&h.rng))
	d.aux = splitmix64(&h.rng)
	return d
}

// ended is the answer to req on host i when ctx ended before its latency
// did: ctx's error, or, when ctx was cancelled with model.ErrCancelled,
// the op stopped, as an agent says. h.mu must not be held.
func (f *Fleet) ended(ctx context.Context, i int32, h *simHost, req *model.AgentRequest) (model.AgentReply, error) {
	if !errors.Is(context.Cause(ctx), model.ErrCancelled) {
		return model.AgentReply{}, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := f.status(h, f.proc(i, h, &req.Process, false), f.now())
	return model.AgentReply{Code: model.CodeCommandFailed, Cancelled: true, Status: &st,
		Message: req.Op.String() + " stopped before the simulated host finished it: " + model.ErrCancelled.Error()}, nil
}

// settle applies req, drawn d, to host i once its latency has passed: the
// reply, its Status st (filled in), or false when the host was taken
// offline meanwhile (it does not answer). h.mu must not be held. The
// status is the caller's: DispatchLaterTo's answering goroutine lends one
// to every answer (a status on the heap per reply was a fifth of the
// bytes a simulated fleet allocated per request).
func (f *Fleet) settle(i int32, h *simHost, req *model.AgentRequest, d drawn, st *model.ProcStatus) (model.AgentReply, bool) {
	h.mu.Lock()
	if h.offline { // taken away while the op was in flight
		h.mu.Unlock()
		return model.AgentReply{}, false
	}
	now := f.now()
	// A status query changes nothing, so it does not make the host keep
	// state for a process it had not touched yet.
	keep := req.Op != model.OpStatus
	if keep {
		if code, msg, ok := f.admit(i, h, &req.Process); !ok {
			*st = f.status(h, f.proc(i, h, &req.Process, false), now)
			h.mu.Unlock()
			return model.AgentReply{Code: code, Message: msg, Status: st}, true
		}
	}
	var tmp procState // the state of a process not kept, on the stack
	p := f.procIn(i, h, &req.Process, keep, &tmp)
	fail := !h.demo && d.failDraw < d.rate
	r, evs := f.apply(h, p, req, fail, d.aux, now)
	*st = f.status(h, p, now)
	r.Status = st
	h.mu.Unlock()
	for _, e := range evs {
		f.emit(e)
	}
	return r, true
}

// timer is a timer firing after d, one used before when the pool has one
// (a new timer per request was a tenth of the bytes a simulated fleet
// allocated in an op). Since Go 1.23 a stopped or fired timer sends
// nothing stale after Reset.
func (f *Fleet) timer(d time.Duration) *time.Timer {
	if t, ok := f.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// proc returns the host's state for process p, creating it on first use:
// a deployment starts from its generated state, anything else as stopped.
// With keep false a process not seen yet is returned without being stored.
// h.mu must be held.
func (f *Fleet) proc(i int32, h *simHost, p *model.Process, keep bool) *procState {
	return f.procIn(i, h, p, keep, nil)
}

// procIn is proc, a state not kept made in tmp when it is not nil: a
// status query of a process the host keeps no state for made one on the
// heap for every target of the op.
func (f *Fleet) procIn(i int32, h *simHost, p *model.Process, keep bool, tmp *procState) *procState {
	ns, name := p.Meta.Namespace, p.Meta.Name
	for _, ps := range h.procs {
		if isKey(ps.key, ns, name) {
			return ps
		}
	}
	// Looked up by its key made on the stack: a status query of a
	// process the host keeps no state for comes here for every target of
	// the op, and p.Key() was a new string each time (5% of a simulated
	// fleet's CPU).
	var kb [128]byte
	k := append(append(append(kb[:0], ns...), ':'), name...)
	d, known := f.defKey[string(k)]
	var key string
	if known {
		key = f.defs[d].key // share the definition's string
	} else {
		key = string(k)
	}
	var ps procState
	if known && f.deployed(d, i) {
		ps = f.initial(i, d)
	} else {
		ps = procState{key: key, procName: p.Spec.Identity.ProcName, def: -1, pid: -1}
		if known {
			ps.def = d
		}
		var t *tmpl
		if known {
			t = f.defs[d].t
		}
		ps.cpu, ps.mem = f.usage(t, hash01(f.seed, hCPU, uint64(i), uint64(len(h.procs))), hash01(f.seed, hMem, uint64(i), uint64(len(h.procs))))
		if keep {
			f.extraMu.Lock()
			f.extras = append(f.extras, procRef{host: i, key: key})
			f.extraMu.Unlock()
		}
	}
	if ps.procName == "" {
		ps.procName = p.Spec.Identity.ProcName
	}
	if keep || tmp == nil {
		kept := new(procState)
		*kept = ps
		if keep {
			h.procs = append(h.procs, kept)
		}
		return kept
	}
	*tmp = ps
	return tmp
}

// admit decides, as an agent does (opsem.Admit), whether host i takes
// the definition of p: a process it knows (one an op touched, or one of
// its deployments) always, a new one while the host knows fewer than
// f.maxProcs. h.mu must be held.
func (f *Fleet) admit(i int32, h *simHost, p *model.Process) (code int, msg string, ok bool) {
	touched := func(key string) bool {
		for _, ps := range h.procs {
			if ps.key == key {
				return true
			}
		}
		return false
	}
	key := p.Key()
	if touched(key) {
		return model.CodeSuccess, "", true
	}
	if d, known := f.defKey[key]; known && f.deployed(d, i) {
		return model.CodeSuccess, "", true
	}
	n := len(h.procs)
	for d := range f.defs {
		if n >= f.maxProcs {
			break // enough counted
		}
		if f.deployed(int32(d), i) && !touched(f.defs[d].key) {
			n++
		}
	}
	return opsem.Admit(n, f.maxProcs, key)
}

// isKey reports whether key == ns + ":" + name, without building it.
func isKey(key, ns, name string) bool {
	return len(key) == len(ns)+1+len(name) && key[len(ns)] == ':' && key[:len(ns)] == ns && key[len(ns)+1:] == name
}

// newPID hands out the host's next pid. h.mu must be held.
func (h *simHost) newPID() int32 {
	pid := h.nextPID
	h.nextPID += 1 + int32(splitmix64(&h.rng)%64)
	if h.nextPID > 4_000_000 {
		h.nextPID = 300
	}
	return pid
}

func (p *procState) startAt(h *simHost, now time.Time) {
	p.running = true
	p.pid = h.newPID()
	p.started = now.UnixNano()
	p.exitStatus = 0
	p.phase = phaseStopped
}

func (p *procState) stop(exit int32) {
	p.running = false
	p.pid = -1
	p.exitStatus = exit
}

func (p *procState) host(now time.Time) {
	if !p.hosted {
		p.hosted = true
		p.registered = now.Unix()
	}
}

func (p *procState) unhost() {
	p.hosted = false
	p.registered = 0
}

// before is p as the op core sees it.
func (p *procState) before() opsem.Before {
	b := opsem.Before{State: model.ProcStopped, Instances: 1, Hosted: p.hosted, Pending: p.phase == phaseBackoff && !p.running,
		Type: model.AutoResident}
	switch {
	case p.running:
		b.State, b.Live = model.ProcRunning, 1
	case p.phase == phaseBackoff:
		b.State = model.ProcBackoff
	case p.phase == phaseFatal:
		b.State = model.ProcFatal
	}
	return b
}

// outcome is how the command of op ends: 0, or the failure drawn (fail, aux)
// or scripted by FailNext.
func (p *procState) outcome(op model.OpType, fail bool, aux uint64) int {
	if p.failNext != 0 {
		code := int(p.failNext)
		p.failNext = 0
		return code
	}
	if !fail {
		return model.CodeSuccess
	}
	if (op == model.OpStart || op == model.OpRestart) && aux&1 == 0 {
		return model.CodePostCheckFailed
	}
	return model.CodeCommandFailed
}

// apply runs op against p as model/opsem decides and returns the reply
// without Status, and the events the op caused. h.mu must be held.
func (f *Fleet) apply(h *simHost, p *procState, req *model.AgentRequest, fail bool, aux uint64, now time.Time) (model.AgentReply, []model.Event) {
	name := req.Process.Spec.Identity.ProcName
	if name == "" {
		name = p.procName
	}
	if n := req.Process.Spec.Policy.StartRetries; n >= 0 && req.Op.Mutating() {
		// The latest definition wins, as on the agent; 0 is 0. A count
		// past int32 is as good as endless (it wrapped: to 0 retries, or
		// to a negative, the deployment's).
		p.retries = int32(min(n, math.MaxInt32-1)) + 1
	}
	d := opsem.Decide(req.Op, p.before(), opsem.CommandsIn(&req.Process.Spec.Control), name)
	if d.Action == opsem.Answer {
		switch d.Code {
		case model.CodeSuccess:
			return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, nil
		case model.CodeCommandFailed: // nothing to run
			return commandFailed("sh: " + d.Message), nil
		}
		return model.AgentReply{Code: d.Code, Message: d.Message}, nil
	}
	if d.Action.Runs() || d.Action == opsem.Host {
		// Every simulated host runs Linux, as the agent does.
		if msg := req.Process.Spec.Control.UnsupportedShell(); msg != "" {
			return model.AgentReply{Code: model.CodeCommandFailed, Message: msg}, nil
		}
	}
	code := model.CodeSuccess
	if d.Action.Runs() {
		code = p.outcome(req.Op, fail, aux)
	}
	r := d.Settle(code)
	if r.Code != model.CodeSuccess {
		if r.State == model.ProcStopped && p.running {
			p.stop(1)
		}
		if r.State == model.ProcStopped {
			p.phase = phaseStopped
		}
		return f.failure(p, req.Op, d.Action, r.Code, name, aux), nil
	}
	if d.ResetRetries {
		p.attempts, p.held = 0, false
	}
	switch d.Action {
	case opsem.Start, opsem.RestartCmd, opsem.StopStart:
		p.startAt(h, now)
	case opsem.Stop:
		p.stop(0)
	case opsem.Kill:
		p.stop(137)
	}
	if r.State == model.ProcStopped {
		p.phase, p.held = phaseStopped, false
	}
	switch r.Hosting {
	case opsem.On:
		p.host(now)
	case opsem.Off:
		p.unhost()
	}
	var evs []model.Event
	if d.Supervise && !p.running {
		evs = f.exited(h, p, -1, "not running", false, fail, now)
	}
	return model.AgentReply{Code: model.CodeSuccess, Message: "success"}, evs
}

// failure is the reply to op whose command ended with code.
func (f *Fleet) failure(p *procState, op model.OpType, act opsem.Action, code int, name string, aux uint64) model.AgentReply {
	cmdOp := op
	if act == opsem.StopStart {
		cmdOp = model.OpStart
	}
	out := f.failOutput(p, cmdOp, aux)
	switch code {
	case model.CodePostCheckFailed:
		if op == model.OpStop || op == model.OpKill {
			return model.AgentReply{Code: code, Output: out,
				Message: fmt.Sprintf("stop process(%s) failed: post-check found it still running", name)}
		}
		return model.AgentReply{Code: code, Output: f.failOutput(p, model.OpStart, aux),
			Message: fmt.Sprintf("%s process(%s) failed: post-check found it not running", op, name)}
	case model.CodeCommandFailed:
		return commandFailed(out)
	}
	return model.AgentReply{Code: code, Message: model.CodeText(code), Output: out}
}

// notRunning is the 829 reply to an op that needs the process running.
func notRunning(op, name string) model.AgentReply {
	return model.AgentReply{Code: model.CodeNotRunning,
		Message: fmt.Sprintf("no need to %s the process(%s) that is not running", op, name)}
}

// commandFailed is a 65535 reply: GSE puts the screen output in the message.
func commandFailed(output string) model.AgentReply {
	return model.AgentReply{Code: model.CodeCommandFailed,
		Message: "Script exit code non-zero. Error msessage: [" + output + "]", Output: output}
}

// Generic screen output of failing commands, by op.
var failOutputs = map[model.OpType][]string{
	model.OpStart: {
		"./start.sh: line 12: cd: /data/run: No such file or directory",
		"Permission denied",
		"bind: Address already in use",
		"error while loading shared libraries: libssl.so.1.1: cannot open shared object file: No such file or directory",
	},
	model.OpStop: {
		"./stop.sh: line 8: kill: (%d) - Operation not permitted",
		"timeout: process %d did not exit within 60s",
		"Permission denied",
	},
	model.OpRestart: {
		"./restart.sh: line 20: ./start.sh: Permission denied",
		"timeout: process %d did not exit within 60s",
	},
	model.OpReload: {
		"kill: (%d) - No such process",
		"configuration file test failed",
	},
	model.OpKill: {
		"kill: (%d) - Operation not permitted",
	},
}

// failOutput picks plausible screen output for a failing command.
func (f *Fleet) failOutput(p *procState, op model.OpType, aux uint64) string {
	opts := failOutputs[op]
	if op == model.OpStart && p.def >= 0 {
		if t := f.defs[p.def].t; t != nil && len(t.startFailOutputs) > 0 {
			opts = append(t.startFailOutputs[:len(t.startFailOutputs):len(t.startFailOutputs)], opts...)
		}
	}
	s := opts[(aux>>1)%uint64(len(opts))]
	if strings.Contains(s, "%d") {
		s = fmt.Sprintf(s, p.pid)
	}
	return s
}

// status renders p's state. h.mu must be held.
func (f *Fleet) status(h *simHost, p *procState, now time.Time) model.ProcStatus {
	st := model.ProcStatus{
		ProcKey:      p.key,
		ProcName:     p.procName,
		State:        model.ProcStopped,
		PID:          -1,
		Hosted:       p.hosted,
		RegisterTime: p.registered,
		ReportTime:   now.Unix(),
		Restarts:     int(p.restarts),
		ExitStatus:   int(p.exitStatus),
	}
	if p.started != 0 {
		st.LastStartTime = p.started / int64(time.Second)
	}
	var t *tmpl
	if p.def >= 0 {
		t = f.defs[p.def].t
	}
	if t != nil {
		st.Version = t.versionText
	}
	st.State, st.PID = p.state()
	if !p.running {
		return st
	}
	st.StartTime = time.Unix(0, p.started)
	// Usage wobbles around the process's typical value, changing every 5 s.
	w := hash01(f.seed, hCPU, uint64(p.pid), uint64(now.Unix()/5))
	st.CPU = round2(float64(p.cpu) * (0.7 + 0.6*w))
	st.Mem = round2(float64(p.mem) * (0.95 + 0.1*w))
	st.MemRSS = uint64(st.Mem / 100 * float64(h.memGB) * (1 << 30))
	st.Threads = 1
	if t != nil {
		st.Threads = t.threads
		st.Cmdline = f.defs[p.def].cmdline
	}
	return st
}

// state is the state and pid status reports of p (-1 when not running).
func (p *procState) state() (model.ProcState, int) {
	if p.running {
		return model.ProcRunning, int(p.pid)
	}
	switch p.phase {
	case phaseBackoff:
		return model.ProcBackoff, -1
	case phaseFatal:
		return model.ProcFatal, -1
	}
	return model.ProcStopped, -1
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// cancelOp answers a cancel of op req.OpID from a server that took its
// task over (model.AgentRequest.CancelOp), as an agent does: the op's
// recorded outcome when it ran (a simulated op in flight is awaited: it
// has no command to kill), else cancelled, recorded so that the op never
// runs should it still come.
func (f *Fleet) cancelOp(ctx context.Context, i int32, h *simHost, req model.AgentRequest) (model.AgentReply, error) {
	if req.OpID == "" {
		return model.AgentReply{Code: model.CodeIllegalOp, Message: model.CodeText(model.CodeIllegalOp) + ": a cancel names no op id"}, nil
	}
	out, _, err := f.ops.Do(ctx, req.OpID, func() (opledger.Outcome, bool) {
		return opledger.Outcome{Code: model.CodeCommandFailed, Cancelled: true,
			Message: req.Op.String() + " cancelled before it ran on this simulated host: its task was cancelled"}, true
	})
	if err != nil {
		return model.AgentReply{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st := f.status(h, f.proc(i, h, &req.Process, false), f.now())
	return model.AgentReply{Code: out.Code, Message: out.Message, Output: out.Output, Status: &st, Cancelled: out.Cancelled}, nil
}
