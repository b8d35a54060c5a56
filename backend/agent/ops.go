//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gseproc/backend/opledger"
	"gseproc/model"
	"gseproc/model/opsem"
)

// result is the outcome of one step of an op.
type result struct {
	code      int
	msg       string
	out       string
	cancelled bool // stopped by a cancel of its task (model.ErrCancelled)
}

// cancelled reports whether ctx ended because an operator cancelled the
// task (not its deadline).
func cancelled(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), model.ErrCancelled)
}

// interrupted is the result of a step that ctx ended: a cancel of the
// task, or the deadline. what says what was stopped.
func interrupted(ctx context.Context, what string) result {
	if cancelled(ctx) {
		return result{code: model.CodeCommandFailed, cancelled: true, msg: what + ": " + model.ErrCancelled.Error()}
	}
	return fail(model.CodeTimeout, "%s: %s: %v", model.CodeText(model.CodeTimeout), what, ctx.Err())
}

func ok() result { return result{code: model.CodeSuccess} }

func fail(code int, format string, args ...any) result {
	return result{code: code, msg: fmt.Sprintf(format, args...)}
}

// Handle performs one operation synchronously, within ctx and the
// request's deadline, and replies with the process's status after it.
func (a *Agent) Handle(ctx context.Context, req model.AgentRequest) model.AgentReply {
	if req.Group != nil {
		return a.setGroup(*req.Group)
	}
	if req.Tail != nil {
		return a.tail(ctx, req)
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	p := a.expand(normalize(req.Process))
	if req.Op == model.OpStatus && !req.CancelOp {
		return a.status(ctx, p)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return refusal(p, model.CodeAgentAbnormal, "agent is shutting down")
	}
	if err := p.Validate("process"); err != nil {
		a.mu.Unlock()
		return refusal(p, model.CodeCommandFailed, err.Error())
	}
	e, known := a.procs[p.Key()]
	switch {
	case req.CancelOp:
		// Not an op: the definition it carries changes nothing here.
		if !known {
			e = transientEntry(p)
		}
		a.mu.Unlock()
		return a.reply(e, a.cancelOp(ctx, req))
	case req.Op.Valid():
		if !known {
			if code, msg, ok := opsem.Admit(len(a.procs), a.maxProcs, p.Key()); !ok {
				a.mu.Unlock()
				a.log.Warn("op refused: the agent knows as many process definitions as it hosts", "proc", p.Key(), "op", req.Op.String(), "known", len(a.procs), "max", a.maxProcs)
				return refusal(p, code, msg)
			}
		}
		e = a.entryLocked(p) // the latest definition wins
	case !known:
		e = transientEntry(p)
	}
	a.mu.Unlock()

	var r result
	switch {
	case !req.Op.Valid():
		r = fail(model.CodeIllegalOp, "%s: op_type %d is not one of 0,1,2,3,4,7,8,9", model.CodeText(model.CodeIllegalOp), int(req.Op))
	case cancelled(ctx):
		r = interrupted(ctx, req.Op.String()+" not started")
	case ctx.Err() != nil:
		r = fail(model.CodeTimeout, "%s: the deadline passed before %s started", model.CodeText(model.CodeTimeout), req.Op)
	default:
		r = a.once(ctx, e, req)
	}
	return a.reply(e, r)
}

// status answers a status op from what the agent has published of p
// (view.go) and from p's processes now, without the agent lock: it never
// waits behind an op, a restart, a launch or a registry write.
func (a *Agent) status(ctx context.Context, p model.Process) model.AgentReply {
	if a.ctx.Err() != nil { // Close has begun
		return refusal(p, model.CodeAgentAbnormal, "agent is shutting down")
	}
	if err := p.Validate("process"); err != nil {
		return refusal(p, model.CodeCommandFailed, err.Error())
	}
	e, known := a.lookup(p.Key())
	if !known {
		e = transientEntry(p)
	}
	rep := a.reply(e, ok())
	rep.Status.Version = a.version(ctx, p, rep.Status)
	return rep
}

// refusal is the reply to a request for p the agent does not carry out.
func refusal(p model.Process, code int, msg string) model.AgentReply {
	return model.AgentReply{Code: code, Message: msg,
		Status: &model.ProcStatus{ProcKey: p.Key(), ProcName: p.Spec.Identity.ProcName, State: model.ProcUnknown, PID: -1}}
}

// cancelOp answers a cancel of op req.OpID sent by a server that took its
// task over (model.AgentRequest.CancelOp). The caller has already ended
// the op's context if it runs (the transport's cancel by op id), so the
// ledger's wait for it ends with its outcome, cancelled unless it got
// through first; an op id the ledger never saw is recorded cancelled, so
// that the op, should it still arrive, is answered from the ledger and
// never runs.
func (a *Agent) cancelOp(ctx context.Context, req model.AgentRequest) result {
	if req.OpID == "" {
		return fail(model.CodeIllegalOp, "%s: a cancel names no op id", model.CodeText(model.CodeIllegalOp))
	}
	out, repeat, err := a.ops.Do(ctx, req.OpID, func() (opledger.Outcome, bool) {
		return opledger.Outcome{Code: model.CodeCommandFailed, Cancelled: true,
			Message: req.Op.String() + " cancelled before it ran on this host: its task was cancelled"}, true
	})
	if err != nil {
		code := model.CodeAgentAbnormal
		if ctx.Err() != nil {
			code = model.CodeTimeout // the op is still running
		}
		return fail(code, "%s: cancel of %s: %v", model.CodeText(code), req.OpID, err)
	}
	a.log.Info("op cancelled after a takeover", "op_id", req.OpID, "had_run", repeat, "code", out.Code, "cancelled", out.Cancelled)
	return result{code: out.Code, msg: out.Message, out: out.Output, cancelled: out.Cancelled}
}

// once runs req's op on e at most once per op id: a repeat is answered
// with the recorded outcome (and e's status now), and runs nothing.
func (a *Agent) once(ctx context.Context, e *entry, req model.AgentRequest) result {
	out, repeat, err := a.ops.Do(ctx, req.OpID, func() (opledger.Outcome, bool) {
		if !e.acquire(ctx) {
			r := fail(model.CodeTimeout, "%s: another operation on %s is still in progress", model.CodeText(model.CodeTimeout), e.key)
			if cancelled(ctx) {
				r = interrupted(ctx, fmt.Sprintf("%s not started (another operation on %s was in progress)", req.Op, e.key))
			}
			return opledger.Outcome{Code: r.code, Message: r.msg, Cancelled: r.cancelled}, false
		}
		r := a.do(ctx, e, req.Op)
		e.release()
		// The answer (and the ledger's record of it) comes after what the
		// op changed is on disk: an answered op survives an agent crash.
		// A cancelled or late op changed things too: the wait is the
		// agent's (the writer takes registryDelay), not the request's.
		if err := a.waitPersisted(a.ctx); err != nil {
			a.log.Error("op answered before its change to the hosting registry was written", "proc", e.key, "op", req.Op.String(), "err", err)
		}
		// Whatever step the cancel interrupted, the op as a whole was
		// cancelled, unless it got through first.
		r.cancelled = r.code != model.CodeSuccess && cancelled(ctx)
		return opledger.Outcome{Code: r.code, Message: r.msg, Output: r.out, Cancelled: r.cancelled}, true
	})
	if err != nil {
		code := model.CodeAgentAbnormal // the ledger cannot record: nothing runs unrecorded
		if ctx.Err() != nil {
			code = model.CodeTimeout // the same op id is still running
		}
		return fail(code, "%s: %v", model.CodeText(code), err)
	}
	if repeat {
		a.log.Info("op answered from the ledger, not run again", "proc", e.key, "op", req.Op.String(), "op_id", req.OpID, "code", out.Code)
	}
	return result{code: out.Code, msg: out.Message, out: out.Output, cancelled: out.Cancelled}
}

// version runs version_cmd (at most 5 s) for a process st reports
// running (instance 1) and returns the first line it prints; "" when
// there is none or it fails.
func (a *Agent) version(ctx context.Context, p model.Process, st *model.ProcStatus) string {
	cmd := p.Spec.Control.VersionCmd
	if cmd == "" || st.PID <= 0 {
		return ""
	}
	status, out, err := a.run(ctx, p, cmd, a.envOf(p, 1), min(opTimeout(ctx, p), 5*time.Second), a.cfg.OutputLimit)
	if err != nil || status != 0 {
		a.log.Info("version_cmd failed", "proc", st.ProcKey, "status", status, "err", err)
		return ""
	}
	line, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(line)
}

func (a *Agent) reply(e *entry, r result) model.AgentReply {
	st := a.statusOf(e)
	msg := r.msg
	if msg == "" {
		msg = model.CodeText(r.code)
	}
	return model.AgentReply{Code: r.code, Message: msg, Output: r.out, Status: &st, Cancelled: r.cancelled}
}

// before is e as the op core (model/opsem) sees it: its state taken
// under the agent lock, its processes probed outside it.
//
// A restart is pending (b.Pending) in BACKOFF, and also when a hosted
// instance RUNNING on record has no live process: it died and its watcher
// has not handled the exit yet (in a crash storm that can take a while),
// so a restart is due. A stop then calls that restart off like one in
// BACKOFF: answered "not running" with the hosting kept, the restart came
// after the stop and the process ran on.
func (a *Agent) before(e *entry) opsem.Before {
	a.mu.Lock()
	b := opsem.Before{State: e.units[0].state, Instances: len(e.units), Hosted: e.hosted, Type: e.p.Spec.Policy.AutoType}
	held := false
	seen := make([]unitSeen, len(e.units))
	running := make([]bool, len(e.units))
	for i, u := range e.units {
		seen[i] = u.seenLocked()
		running[i] = u.state == model.ProcRunning
		b.Pending = b.Pending || u.state == model.ProcBackoff
		held = held || u.held != ""
	}
	b.Scheduled = e.stopPeriodic != nil && !held
	a.mu.Unlock()
	for i, s := range seen {
		if _, _, live := s.probe(); live {
			b.Live++
		} else if running[i] && b.Hosted && b.Type != model.AutoPeriodic {
			b.Pending = true // its exit not handled yet
		}
	}
	return b
}

// do carries out op on every instance of e as model/opsem decides; e.op
// is held.
func (a *Agent) do(ctx context.Context, e *entry, op model.OpType) result {
	a.mu.Lock()
	p := e.p
	units := append([]*unit(nil), e.units...)
	e.lastOp = op
	a.mu.Unlock()
	b := a.before(e) // e.op is held: nothing else changes e meanwhile
	d := opsem.Decide(op, b, opsem.CommandsIn(&p.Spec.Control), p.Spec.Identity.ProcName)
	a.log.Info("op", "proc", e.key, "op", op.String(), "action", d.Action.String(), "code", d.Code)
	if d.Action.Runs() || d.Action == opsem.Host {
		if msg := p.Spec.Control.UnsupportedShell(); msg != "" {
			return result{code: model.CodeCommandFailed, msg: msg}
		}
	}

	var r result
	switch d.Action {
	case opsem.Answer:
		if d.Code == model.CodeAlreadyRunning {
			return fail(d.Code, "%s (%s)", d.Message, a.runningText(units))
		}
		return result{code: d.Code, msg: d.Message}
	case opsem.Host:
		return a.register(e, d)
	case opsem.Unhost, opsem.CancelRestart:
		a.mu.Lock()
		defer a.mu.Unlock()
		a.unhostLocked(e, op.String())
		return ok()
	case opsem.Start:
		r = a.startAll(ctx, p, units, model.OpStart)
	case opsem.Stop, opsem.Kill:
		a.stopSchedule(e, d)
		for _, u := range units {
			var ur result
			if d.Action == opsem.Stop {
				ur = a.stopUnit(ctx, u, p, "stop requested")
			} else {
				ur = a.killUnit(ctx, u, p)
			}
			if ur.code != model.CodeSuccess && r.code == model.CodeSuccess {
				r = ur
			}
			if ur.out != "" {
				r.out = ur.out
			}
		}
	case opsem.RestartCmd, opsem.StopStart:
		a.stopSchedule(e, d)
		if d.Action == opsem.RestartCmd {
			r = a.startAll(ctx, p, units, model.OpRestart)
			break
		}
		for _, u := range units {
			if _, _, live := a.probe(u); !live {
				continue
			}
			if r = a.stopUnit(ctx, u, p, "restart: stop"); r.code != model.CodeSuccess {
				break
			}
		}
		if r.code == model.CodeSuccess {
			r = a.startAll(ctx, p, units, model.OpStart)
		}
	case opsem.Reload:
		r = a.reload(ctx, p, units)
	}
	a.settle(e, units, d, r.code)
	return r
}

// stopSchedule ends a periodic job's schedule before its runs are
// stopped or restarted (a restart starts it again on success).
func (a *Agent) stopSchedule(e *entry, d opsem.Decision) {
	if d.Schedule == opsem.Keep && d.Action != opsem.RestartCmd && d.Action != opsem.StopStart {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.stopPeriodic != nil {
		e.stopPeriodic()
		e.stopPeriodic = nil
	}
}

// settle applies what the op core says follows d's action ending with
// code: hosting, the schedule, the state of instances a failed start left
// down.
func (a *Agent) settle(e *entry, units []*unit, d opsem.Decision, code int) {
	res := d.Settle(code)
	a.mu.Lock()
	defer a.mu.Unlock()
	if code != model.CodeSuccess {
		if res.State != "" {
			for _, u := range units {
				if u.state == model.ProcExited {
					a.setStateLocked(u, res.State, u.msg)
				}
			}
		}
		a.persistLocked()
		return
	}
	switch res.Hosting {
	case opsem.On:
		was := e.hosted
		a.hostLocked(e, d.Op.String())
		if !was {
			a.superviseExitedLocked(e)
		}
	case opsem.Off:
		a.unhostLocked(e, d.Op.String())
	}
	if d.Schedule == opsem.On && e.hosted {
		a.startPeriodicLocked(e, true)
	}
	a.persistLocked()
}

// reload runs reload_cmd, or sends SIGHUP, for every live instance.
func (a *Agent) reload(ctx context.Context, p model.Process, units []*unit) result {
	timeout := opTimeout(ctx, p)
	if cmd, has := p.Command(model.OpReload); has {
		var r result
		for _, u := range units {
			if _, _, live := a.probe(u); !live {
				continue
			}
			status, out, err := a.run(ctx, p, cmd, a.env(p, u), timeout, a.cfg.OutputLimit)
			if ur := cmdResult("reload_cmd", status, out, err); ur.code != model.CodeSuccess {
				return ur
			} else if out != "" {
				r.out = out
			}
		}
		return r
	}
	for _, u := range units {
		if pid, _, live := a.probe(u); live {
			if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
				return fail(model.CodeCommandFailed, "reload: SIGHUP to pid %d: %v", pid, err)
			}
		}
	}
	return ok()
}

func (a *Agent) runningText(units []*unit) string {
	var pids []string
	for _, u := range units {
		if pid, _, live := a.probe(u); live {
			pids = append(pids, strconv.Itoa(pid))
		}
	}
	if len(pids) == 0 {
		return "scheduled"
	}
	return "pid " + strings.Join(pids, ",")
}

// register hosts e without running anything (d is the op core's Host
// decision); a resident process that is not running is then brought up by
// the restart policy.
func (a *Agent) register(e *entry, d opsem.Decision) result {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hostLocked(e, "registered")
	if d.Schedule == opsem.On {
		a.startPeriodicLocked(e, true)
	} else {
		for _, u := range e.units {
			u.held, u.done, u.attempts = "", false, 0
			if pid, st, live := a.probeLocked(u); live {
				if u.pid != pid || u.tick != st.StartTick || u.stopWatch == nil {
					u.pid, u.tick, u.upSince = pid, st.StartTick, time.Now()
					a.setStateLocked(u, model.ProcRunning, "registered while running")
					a.watchLocked(u)
				}
				continue
			}
			if d.Supervise {
				a.afterExitLocked(u, -1, "registered while not running")
			}
		}
	}
	publishLocked(e) // held cleared, whatever the state
	a.persistLocked()
	return ok()
}

func (a *Agent) hostLocked(e *entry, why string) {
	if !e.hosted {
		e.hosted = true
		e.registerTime = time.Now().Unix()
		a.log.Info("hosting registered", "proc", e.key, "reason", why)
	}
	publishLocked(e)
	a.persistLocked()
}

// superviseExitedLocked hands to the restart policy the instances of e,
// hosted by a start just now, whose process exited before the hosting was
// recorded (their watcher saw an unhosted process end and let it be): no
// hosted process is left dead unnoticed.
func (a *Agent) superviseExitedLocked(e *entry) {
	if !e.hosted || e.p.Spec.Policy.AutoType == model.AutoPeriodic {
		return
	}
	for _, u := range e.units {
		if u.state != model.ProcExited || u.done || u.held != "" {
			continue
		}
		if _, _, live := a.probeLocked(u); live {
			continue
		}
		a.afterExitLocked(u, u.exitStatus, "exited before its hosting was recorded: "+u.msg)
	}
}

func (a *Agent) unhostLocked(e *entry, why string) {
	if e.hosted {
		e.hosted = false
		a.log.Info("hosting cancelled", "proc", e.key, "reason", why)
	}
	if e.stopPeriodic != nil {
		e.stopPeriodic()
		e.stopPeriodic = nil
	}
	for _, u := range e.units {
		if u.state == model.ProcBackoff || u.state == model.ProcFatal {
			u.gen++ // cancel a pending restart
			a.setStateLocked(u, model.ProcStopped, "hosting cancelled")
		}
	}
	publishLocked(e)
	a.persistLocked()
}

// startAll starts every instance that is not running.
func (a *Agent) startAll(ctx context.Context, p model.Process, units []*unit, op model.OpType) result {
	r := ok()
	for _, u := range units {
		if op == model.OpStart {
			if _, _, live := a.probe(u); live {
				continue
			}
		}
		a.mu.Lock()
		u.held, u.done, u.attempts, u.breaches = "", false, 0, 0
		a.unwatchLocked(u) // a pending restart gives way to the operator
		a.setStateLocked(u, model.ProcStarting, op.String()+" requested")
		a.mu.Unlock()
		ur := a.startUnit(ctx, u, p, op)
		if ur.out != "" {
			r.out = ur.out
		}
		if ur.code != model.CodeSuccess {
			return ur
		}
	}
	return r
}

// opTimeout is the process's op_timeout, cut to ctx's deadline.
func opTimeout(ctx context.Context, p model.Process) time.Duration {
	d := time.Duration(p.Spec.Policy.OpTimeout) * time.Second
	if dl, has := ctx.Deadline(); has {
		if left := time.Until(dl); left < d {
			d = max(left, 0)
		}
	}
	return d
}

func cmdResult(what string, status int, out string, err error) result {
	if err != nil {
		var ext errShellExt
		if errors.As(err, &ext) {
			return result{code: model.CodeCommandFailed, msg: err.Error(), out: out}
		}
		return result{code: model.CodeCommandFailed, msg: what + ": " + err.Error(), out: out}
	}
	if status != 0 {
		return result{code: model.CodeCommandFailed,
			msg: fmt.Sprintf("Script exit code non-zero. Error msessage: [%s] (%s exit status %d)", out, what, status), out: out}
	}
	return result{code: model.CodeSuccess, out: out}
}

// hostVars are the agent's identity as variables: exported to every
// command and expanded in setup_path and pid_path, so that one definition
// can give each host its own paths (several agents on one machine).
func (a *Agent) hostVars() map[string]string {
	return map[string]string{
		"GSEPROC_HOST_IP":  a.host.IP,
		"GSEPROC_CLOUD_ID": strconv.Itoa(a.host.CloudID),
		"GSEPROC_AGENT_ID": a.host.AgentID(),
	}
}

// expand replaces $GSEPROC_HOST_IP, $GSEPROC_CLOUD_ID and $GSEPROC_AGENT_ID
// (or ${...}) in setup_path, pid_path and log_path; any other $ is left
// alone.
func (a *Agent) expand(p model.Process) model.Process {
	var vars map[string]string // made when a path names one: most do not
	f := func(s string) string {
		if !strings.Contains(s, "$GSEPROC_") && !strings.Contains(s, "${GSEPROC_") {
			return s
		}
		if vars == nil {
			vars = a.hostVars()
		}
		return os.Expand(s, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return "${" + k + "}"
		})
	}
	id := &p.Spec.Identity
	id.SetupPath, id.PidPath, id.LogPath = f(id.SetupPath), f(id.PidPath), f(id.LogPath)
	return p
}

// env is what every command of instance u sees.
func (a *Agent) env(p model.Process, u *unit) []string { return a.envOf(p, u.idx) }

// envOf is what every command of instance idx (1-based) sees.
func (a *Agent) envOf(p model.Process, idx int) []string {
	return []string{
		"GSEPROC_HOST_IP=" + a.host.IP,
		"GSEPROC_CLOUD_ID=" + strconv.Itoa(a.host.CloudID),
		"GSEPROC_AGENT_ID=" + a.host.AgentID(),
		"GSEPROC_PROC=" + p.Key(),
		"GSEPROC_INSTANCE=" + strconv.Itoa(idx),
		"GSEPROC_INSTANCE_NUM=" + strconv.Itoa(p.Spec.Policy.InstanceNum),
		"GSEPROC_PID_FILE=" + pidPathOf(p, idx),
	}
}

// pidFileIdleMax bounds the start check's back-off between looks at a
// pid file unchanged since it named no process of the start, once the
// command is done.
const pidFileIdleMax = time.Second

// startUnit runs start_cmd (or restart_cmd for op restart) for u and then
// the start check. For a resident process: within the window after the
// command (start_check_secs .. max(begin, end), at least min_start_wait)
// the pid file must name a live process started after the launch, alive
// at start_check_secs. For a periodic job (type 0): the command itself is
// the process; it must not fail within start_check_secs (at least
// min_start_wait). For a one-shot (type 2) the op's result is the
// command's exit status, whatever its timing: the op waits for it to end
// (0: success, done; other: 65535 with the status); a one-shot still
// running when op_timeout ends is answered running (success), and its
// exit goes to the restart policy like any hosted run's. u is in STARTING.
func (a *Agent) startUnit(ctx context.Context, u *unit, p model.Process, op model.OpType) result {
	cmd, has := p.Command(op)
	what := "start_cmd"
	if op == model.OpRestart {
		what = "restart_cmd"
	}
	fail0 := func(r result) result {
		a.mu.Lock()
		u.pid, u.tick = -1, 0
		a.setStateLocked(u, model.ProcExited, r.msg)
		a.mu.Unlock()
		return r
	}
	if !has {
		return fail0(fail(model.CodeCommandFailed, "%s is empty: nothing to run", what))
	}
	// The process running before (restart_cmd replaces it) does not count
	// as the new one, even when it started within the launch's clock tick.
	// A start has none: an op's start begins only once a probe found no
	// process alive (startAll), a supervisor's restart once the process
	// exited; a process the pid file names started before the launch's
	// tick is stale whatever the op (below). Not probing there saves a pid
	// file read and a /proc read per restart in a crash storm.
	var oldPid int
	var oldSt procStat
	var oldLive bool
	if op == model.OpRestart {
		oldPid, oldSt, oldLive = a.probe(u)
	}
	pidPath := pidPathOf(p, u.idx)
	c, err := launch(p, cmd, a.env(p, u), a.capture(p.Key(), u.idx))
	if err != nil {
		return fail0(cmdResult(what, -1, "", err))
	}
	job := p.Spec.Policy.AutoType != model.AutoResident
	oneShot := p.Spec.Policy.AutoType == model.AutoOneShot
	begin, end := p.CheckWindow()
	beginD := time.Duration(begin) * time.Second
	window := max(time.Duration(end)*time.Second, a.cfg.MinStartWait.D())
	timeout := opTimeout(ctx, p)
	poll := a.cfg.PollInterval.D()
	var cmdEnd time.Time
	var lastErr string
	// A job's run is up once it has run for up (at least min_start_wait,
	// so that a job failing at once is a failure whatever the timing of
	// the looks); a one-shot's result is its exit status: it is awaited
	// for the whole op_timeout.
	up := max(beginD, a.cfg.MinStartWait.D())
	if oneShot {
		up = timeout
	}
	// Look soon, then every poll: a daemon writes its pid file right
	// after the command, and a command that execs the process itself
	// (exec prog, its pid file written first) never exits; waiting a
	// whole poll first would leave either STARTING, unwatched, that long.
	// But nothing is decided before checkQuiet but by the command's
	// exit: until then the check waits for that exit alone.
	nap := time.Millisecond
	var until time.Time // nothing to decide before then but by the command's exit
	if q := checkQuiet(job, beginD, up, timeout); q > 0 {
		until = c.at.Add(q)
	}
	var seen pidFileSeen
	// watch is the pidfd of the process the pid file named at the last
	// look, while that process is live and may be the one started: a
	// later look at the same pid polls it instead of reading /proc, and
	// the watcher takes it over once the check passes (openPidWatch).
	var watch *pidWatch
	defer func() {
		if watch != nil {
			watch.close()
		}
	}()
	for first := true; ; first = false {
		var exited bool
		if !until.IsZero() {
			// Nothing to look at before the check is due: sleep until
			// then, woken by the command's exit (its status) or ctx.
			d := time.Until(until)
			until = time.Time{}
			exited = c.wait(ctx, d)
		} else if c.exited && !first {
			// The command is done; only the pid file is awaited now.
			// While it stays as it was when it named no process of this
			// start (seen), the look backs off to pidFileIdleMax, never
			// past the window's end: a start whose process died polled
			// every poll_interval for the whole window (30 s), and in a
			// crash storm on a loaded machine those polls were a large
			// part of the agent's cpu.
			limit := poll
			if seen.ok {
				limit = max(poll, min(pidFileIdleMax, time.Until(cmdEnd.Add(max(window, beginD)))))
			}
			nap = min(nap*2, limit)
			select {
			case <-time.After(nap):
			case <-ctx.Done():
			}
			exited = true
		} else {
			nap = min(nap*2, poll)
			exited = c.poll(nap)
		}
		now := time.Now()
		if exited && cmdEnd.IsZero() {
			cmdEnd = now
			if c.status != 0 {
				out := c.output(a.cfg.OutputLimit)
				c.close()
				if oneShot { // its status, as a run the watcher saw end would have it
					a.mu.Lock()
					u.exitStatus = c.status
					publishLocked(u.e)
					a.mu.Unlock()
				}
				return fail0(cmdResult(what, c.status, out, nil))
			}
		}
		if job {
			if exited { // finished within the check: a clean run
				out := c.output(a.cfg.OutputLimit)
				c.close()
				a.mu.Lock()
				u.pid, u.tick, u.exitStatus = -1, 0, 0
				u.lastStart = c.at.Unix()
				if p.Spec.Policy.AutoType == model.AutoOneShot {
					u.done = true
				}
				a.setStateLocked(u, model.ProcExited, what+" finished with status 0")
				a.mu.Unlock()
				return result{code: model.CodeSuccess, out: out}
			}
			// Up for the whole check (up, above).
			if now.Sub(c.at) >= up && !(oneShot && cancelled(ctx)) {
				tick := c.startTick() // a /proc read: not under the agent lock
				a.mu.Lock()
				u.pid, u.tick = c.pid, tick
				a.ownLocked(u, c)
				u.lastStart, u.upSince = c.at.Unix(), now
				msg := what + " running"
				if oneShot {
					msg = fmt.Sprintf("one-shot %s still running after op_timeout %s; its exit is handled as a hosted run's", what, timeout)
				}
				a.setStateLocked(u, model.ProcRunning, msg)
				a.watchLocked(u)
				a.mu.Unlock()
				return ok()
			}
		} else if exited && now.Sub(c.at) < beginD && ctx.Err() == nil {
			// The command is done (status 0) before start_check_secs:
			// nothing can be decided before then, when the pid file is
			// first looked at (not once at the exit and again then).
			until = c.at.Add(beginD)
		} else {
			pid, fi, err := 0, os.FileInfo(nil), error(nil)
			if seen.same(pidPath) {
				err = errUnchanged // not running, or stale: it still is
			} else {
				pid, fi, err = readPidFileInfo(pidPath)
				seen = pidFileSeen{}
			}
			if err == errUnchanged {
				// lastErr stands
			} else if err == nil {
				var st procStat
				var live bool
				if watch != nil && watch.pid == pid {
					st, live = watch.st, !watch.exited()
				} else {
					if watch != nil {
						watch.close()
					}
					watch, st, live = openPidWatch(pid)
				}
				if watch != nil && (!live || st.StartTick < c.launch) {
					watch.close() // not the process of this start
					watch = nil
				}
				switch {
				case !live:
					lastErr = fmt.Sprintf("pid %d in %s is not running", pid, pidPath)
					seen = seePidFile(fi, now)
				case st.StartTick < c.launch || (oldLive && pid == oldPid && st.StartTick == oldSt.StartTick):
					lastErr = fmt.Sprintf("pid %d in %s started before %s (stale pid file, written %s)", pid, pidPath, what, fi.ModTime().Format(time.TimeOnly))
					seen = seePidFile(fi, now)
				case now.Sub(c.at) >= beginD:
					out := c.output(a.cfg.OutputLimit) // before c changes hands
					a.mu.Lock()
					u.pid, u.tick = pid, st.StartTick
					u.lastStart, u.upSince = c.at.Unix(), now
					u.exitStatus = 0
					if pid == c.pid {
						a.ownLocked(u, c)
					} else {
						a.ownLocked(u, nil)
						a.reapLocked(c)
					}
					a.setStateLocked(u, model.ProcRunning, what+" succeeded, pid "+strconv.Itoa(pid))
					a.watchPidLocked(u, watch)
					watch = nil // the watcher's now
					a.mu.Unlock()
					return result{code: model.CodeSuccess, out: out}
				default:
					lastErr = fmt.Sprintf("pid %d up, waiting until start_check_secs %d", pid, begin)
					until = c.at.Add(beginD)
					if t := c.at.Add(timeout); !exited && t.Before(until) {
						until = t
					}
				}
			} else {
				lastErr = err.Error()
			}
			if exited && now.Sub(cmdEnd) >= max(window, beginD) {
				out := c.output(a.cfg.OutputLimit)
				c.close()
				return fail0(result{code: model.CodePostCheckFailed, out: out,
					msg: fmt.Sprintf("%s: process %s not running %s after %s: %s", model.CodeText(model.CodePostCheckFailed),
						p.Spec.Identity.ProcName, max(window, beginD), what, lastErr)})
			}
		}
		if ctx.Err() != nil || (!exited && now.Sub(c.at) >= timeout) {
			_ = signalGroup(c.pid, syscall.SIGKILL, a.m)
			c.poll(time.Second)
			out := c.output(a.cfg.OutputLimit)
			a.reap(c)
			if ctx.Err() != nil {
				r := interrupted(ctx, fmt.Sprintf("%s stopped (its process group %d killed)", what, c.pid))
				r.out = out
				return fail0(r)
			}
			return fail0(result{code: model.CodeCommandFailed, out: out,
				msg: fmt.Sprintf("%s did not finish within op_timeout %s and no process came up: killed", what, timeout)})
		}
	}
}

// checkQuiet is how long after its launch a start check has nothing to
// decide but by the command's exit (its status), so that it waits for
// that exit alone, not looking at the pid file and /proc every poll
// meanwhile (in a crash storm on a loaded machine, several looks per
// restart while the shell ran): a resident process is running at the
// earliest begin (start_check_secs) after the launch, a job's run once
// up for up; at timeout (op_timeout) a command still running with no
// process up is killed. 0: look at once (begin 0: a resident process is
// running as soon as its pid file names one started by the command).
func checkQuiet(job bool, begin, up, timeout time.Duration) time.Duration {
	q := begin
	if job {
		q = up
	}
	return max(0, min(q, timeout))
}

// stopUnit stops u: stop_cmd, or SIGTERM to the process group and SIGKILL
// after the grace; then the post-check. The unit ends STOPPED on success.
func (a *Agent) stopUnit(ctx context.Context, u *unit, p model.Process, why string) result {
	pid, st, live := a.probe(u)
	if !live {
		a.mu.Lock()
		if u.state.Up() || u.state == model.ProcBackoff {
			u.gen++
			a.setStateLocked(u, model.ProcStopped, why+": not running")
		}
		a.mu.Unlock()
		return ok()
	}
	a.stopping(u, pid, st.StartTick, why)

	timeout := opTimeout(ctx, p)
	var out string
	if cmd, has := p.Command(model.OpStop); has {
		status, o, err := a.run(ctx, p, cmd, a.env(p, u), timeout, a.cfg.OutputLimit)
		out = o
		if r := cmdResult("stop_cmd", status, out, err); r.code != model.CodeSuccess {
			a.restore(u, pid, st.StartTick, "stop_cmd failed")
			return r
		}
	} else {
		grace := time.Duration(p.Spec.Policy.StopCheckSecs) * time.Second
		if grace <= 0 {
			grace = min(timeout, 10*time.Second)
		}
		_ = signalGroup(pid, syscall.SIGTERM, a.m)
		if !a.waitDead(ctx, u, pid, st.StartTick, grace) {
			if cancelled(ctx) {
				// A cancelled stop does not escalate to SIGKILL.
				a.restore(u, pid, st.StartTick, "stop cancelled")
				return interrupted(ctx, fmt.Sprintf("stop: SIGTERM sent to pid %d, waiting for it to exit", pid))
			}
			a.log.Info("process ignored SIGTERM: SIGKILL to its group", "proc", u.e.key, "pid", pid, "grace", grace)
			_ = signalGroup(pid, syscall.SIGKILL, a.m)
		}
	}
	return a.stopped(ctx, u, p, pid, st.StartTick, out, "stop", why)
}

// killUnit runs kill_cmd, or SIGKILL to the process group.
func (a *Agent) killUnit(ctx context.Context, u *unit, p model.Process) result {
	pid, st, live := a.probe(u)
	if !live {
		return ok()
	}
	a.stopping(u, pid, st.StartTick, "kill requested")
	var out string
	if cmd, has := p.Command(model.OpKill); has {
		status, o, err := a.run(ctx, p, cmd, a.env(p, u), opTimeout(ctx, p), a.cfg.OutputLimit)
		out = o
		if r := cmdResult("kill_cmd", status, out, err); r.code != model.CodeSuccess {
			a.restore(u, pid, st.StartTick, "kill_cmd failed")
			return r
		}
	} else if err := signalGroup(pid, syscall.SIGKILL, a.m); err != nil {
		a.restore(u, pid, st.StartTick, "SIGKILL failed")
		return fail(model.CodeCommandFailed, "kill: SIGKILL to pid %d: %v", pid, err)
	}
	return a.stopped(ctx, u, p, pid, st.StartTick, out, "kill", "killed")
}

// stopping marks u STOPPING at pid, no longer watched, as a stop or kill
// begins.
func (a *Agent) stopping(u *unit, pid int, tick uint64, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unwatchLocked(u)
	u.pid, u.tick = pid, tick
	a.setStateLocked(u, model.ProcStopping, why)
}

// stopped is the post-check of a stop or kill (what): once pid is gone
// within the stop wait, u ends STOPPED for why; else u is RUNNING again and
// the result is a post-check failure. out is the command's output.
func (a *Agent) stopped(ctx context.Context, u *unit, p model.Process, pid int, tick uint64, out, what, why string) result {
	wait := max(time.Duration(p.Spec.Policy.StopCheckSecs)*time.Second, a.cfg.MinStopWait.D())
	if !a.waitDead(ctx, u, pid, tick, wait) {
		a.restore(u, pid, tick, what+" post-check: still running")
		how := ""
		if what == "kill" {
			how = " by kill"
		}
		return result{code: model.CodePostCheckFailed, out: out,
			msg: fmt.Sprintf("stop process(%s)%s failed: pid %d still running %s after %s (post-check)", p.Spec.Identity.ProcName, how, pid, wait, what)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u.pid, u.tick = -1, 0
	a.setStateLocked(u, model.ProcStopped, why)
	return result{code: model.CodeSuccess, out: out}
}

// restore puts u back to RUNNING after a stop that did not stop it.
func (a *Agent) restore(u *unit, pid int, tick uint64, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, live := alive(pid); live && st.StartTick == tick {
		u.pid, u.tick = pid, tick
		a.setStateLocked(u, model.ProcRunning, why)
		a.watchLocked(u)
		return
	}
	u.pid, u.tick = -1, 0
	a.setStateLocked(u, model.ProcStopped, why+" (but it is gone)")
}

// waitDead waits up to d for pid to exit, reaping it when it is our child.
func (a *Agent) waitDead(ctx context.Context, u *unit, pid int, tick uint64, d time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	a.mu.Lock()
	own := u.own
	a.mu.Unlock()
	if own != nil && own.pid == pid {
		deadline := time.Now().Add(d)
		for !own.poll(20 * time.Millisecond) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
		}
		a.mu.Lock()
		u.exitStatus = own.status
		own.close()
		u.own = nil
		publishLocked(u.e)
		a.mu.Unlock()
		return true
	}
	_ = waitGone(wctx, pid, tick, a.cfg.PollInterval.D())
	st, live := alive(pid)
	return !live || st.StartTick != tick
}

// unitSeen is what a probe of a unit needs, taken under the agent lock:
// the probe itself (reads of /proc and the pid file) runs outside it.
type unitSeen struct {
	pid     int
	tick    uint64
	pidPath string
}

func (u *unit) seenLocked() unitSeen { return unitSeen{pid: u.pid, tick: u.tick, pidPath: u.pidPath} }

// probe finds u's live process: the one it tracks (pid and start time
// match), else the pid file's, if that process started no later than the
// file was written (a later start means the pid was reused).
func (a *Agent) probe(u *unit) (int, procStat, bool) {
	a.mu.Lock()
	s := u.seenLocked()
	a.mu.Unlock()
	return s.probe()
}

// probeLocked is probe with a.mu held (rare paths: adoption, register).
func (a *Agent) probeLocked(u *unit) (int, procStat, bool) { return u.seenLocked().probe() }

func (s unitSeen) probe() (int, procStat, bool) {
	if s.pid > 0 {
		if st, live := alive(s.pid); live && (s.tick == 0 || st.StartTick == s.tick) {
			return s.pid, st, true
		}
	}
	pid, mtime, err := readPidFile(s.pidPath)
	if err != nil {
		return 0, procStat{}, false
	}
	st, live := alive(pid)
	if !live {
		return 0, procStat{}, false
	}
	if time.Since(tickTime(st.StartTick)) < time.Since(mtime)-time.Second {
		return 0, procStat{}, false // started after the pid file was written: reused
	}
	return pid, st, true
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
