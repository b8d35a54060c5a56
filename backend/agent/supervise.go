//go:build linux

package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"time"

	"gseproc/model"
	"gseproc/model/opsem"
)

// watchLocked starts a watcher for u's current pid: when that process
// exits, onExit decides what happens. Any previous watcher is stopped.
func (a *Agent) watchLocked(u *unit) { a.watchPidLocked(u, nil) }

// watchPidLocked is watchLocked with the pidfd of u's process already
// open (w, nil: none; openPidWatch checked it names the process of
// u.tick), which the watcher takes over: it neither opens another nor
// reads /proc to check it. w is closed when it is not u's pid.
func (a *Agent) watchPidLocked(u *unit, w *pidWatch) {
	a.unwatchLocked(u)
	if w != nil && (w.pid != u.pid || w.st.StartTick != u.tick) {
		w.close()
		w = nil
	}
	if a.closed || u.pid <= 0 {
		if w != nil {
			w.close()
		}
		return
	}
	u.gen++
	gen, pid, tick := u.gen, u.pid, u.tick
	ctx, cancel := context.WithCancel(a.ctx)
	u.stopWatch = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancel()
		var err error
		if w != nil {
			err = w.wait(ctx)
		} else {
			w, err = waitGoneWatch(ctx, pid, tick, a.cfg.PollInterval.D())
		}
		fd := -1
		if w != nil {
			fd = w.fd
		}
		if err != nil {
			if w != nil {
				w.close()
			}
			return // cancelled: someone else owns the process now
		}
		// An orphan we inherited (a daemon whose shell exited) is reaped
		// now, not at the reaper's next sweep; our own command's child is
		// left to its owner (onExit).
		children.reapExited(pid, fd)
		restart := a.onExit(u, gen, pid)
		if w != nil {
			w.close() // not held through a restart's backoff
			w = nil
		}
		if restart != nil {
			restart() // here: no goroutine of its own to start and wake
		}
	}()
}

func (a *Agent) unwatchLocked(u *unit) {
	u.gen++
	if u.stopWatch != nil {
		u.stopWatch()
		u.stopWatch = nil
	}
}

// reap collects a child of ours that is no longer what a unit tracks
// (the sh of a start_cmd that is still running, a command killed that had
// not exited within its wait, a run an op took over) when it exits, so
// that no child is left a zombie. Once the agent closes, what is left
// unreaped stays so until its process exits (or a subreaper collects it).
func (a *Agent) reap(c *child) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reapLocked(c)
}

func (a *Agent) reapLocked(c *child) {
	if c.exited || a.closed {
		c.close()
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer c.close()
		for !c.poll(200 * time.Millisecond) {
			if a.ctx.Err() != nil {
				return
			}
		}
	}()
}

// ownLocked makes c (nil: none) the child behind u's process; a former
// one, no longer tracked, is reaped.
func (a *Agent) ownLocked(u *unit, c *child) {
	if u.own != nil && u.own != c {
		a.reapLocked(u.own)
	}
	u.own = c
}

// onExit handles the exit of the process u was watching. It returns the
// restart the policy decided (nil: none), for the caller to run.
func (a *Agent) onExit(u *unit, gen uint64, pid int) (restart func()) {
	a.mu.Lock()
	if u.gen != gen || a.closed {
		a.mu.Unlock()
		return nil // an op took over, or the agent is closing
	}
	// Our own child is reaped outside the agent lock: taken from u first,
	// so that no one else waits for it meanwhile.
	own := u.own
	if own != nil && own.pid == pid {
		u.own = nil
	} else {
		own = nil
	}
	a.mu.Unlock()
	status := -1 // unknown: not our child
	if own != nil {
		if own.poll(time.Second) {
			status = own.status
			own.close()
		} else {
			a.reap(own) // exited, says the pidfd; the wait is late
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if u.gen != gen || a.closed {
		return nil
	}
	u.stopWatch = nil
	u.exitStatus = status
	u.pid, u.tick = -1, 0
	u.cpu, u.mem, u.rss, u.threads, u.breaches = 0, 0, 0, 0, 0
	why := "process exited"
	if status >= 0 {
		why += " with status " + strconv.Itoa(status)
	}
	why += " (pid " + strconv.Itoa(pid) + ")"
	a.setStateLocked(u, model.ProcExited, why)
	return a.decideLocked(u, opsem.Exit{Status: status}, why)
}

// afterExitLocked tells the restart policy (model/opsem) that u's process
// ended with status (-1 when unknown) and carries out its answer: nothing
// (not hosted, held, a periodic run), a one-shot done, a restart after
// the backoff, or give-up.
func (a *Agent) afterExitLocked(u *unit, status int, why string) {
	a.decideRestartLocked(u, opsem.Exit{Status: status}, why)
}

func (a *Agent) policy(p model.Process) opsem.Policy {
	return opsem.PolicyOf(p, a.cfg.BackoffBase.D(), a.cfg.BackoffMax.D(), a.cfg.StableAfter.D())
}

func (a *Agent) decideRestartLocked(u *unit, ex opsem.Exit, why string) {
	if restart := a.decideLocked(u, ex, why); restart != nil {
		go restart()
	}
}

// decideLocked is decideRestartLocked that returns the restart decided
// (nil: none) for the caller to run once it released the agent lock.
func (a *Agent) decideLocked(u *unit, ex opsem.Exit, why string) (restart func()) {
	e := u.e
	pol := a.policy(e.p)
	ex.Hosted, ex.Held, ex.Type, ex.Now = e.hosted && !a.closed, u.held != "", e.p.Spec.Policy.AutoType, time.Now()
	next, t := pol.OnExit(opsem.Tracker{Attempts: u.attempts, UpSince: u.upSince}, ex, rand.Float64())
	u.attempts, u.upSince = t.Attempts, t.UpSince
	switch next.Verdict {
	case opsem.Leave:
		msg := why
		if next.Reason != "" {
			msg += "; " + next.Reason
		}
		a.setStateLocked(u, next.State, msg)
		if ex.Type == model.AutoPeriodic && ex.Status > 0 {
			a.log.Warn("periodic run failed", "proc", e.key, "status", ex.Status)
		}
	case opsem.Done:
		u.done = true
		a.setStateLocked(u, next.State, why+"; "+next.Reason)
		a.persistLocked()
	case opsem.GiveUp:
		u.held = next.Reason + ": " + why
		a.setStateLocked(u, next.State, u.held)
		a.emitLocked(u, model.EventGiveUp,
			fmt.Sprintf("%s not running, restart given up after %d attempts (start_retries %d); a manual start brings it back",
				e.p.Spec.Identity.ProcName, next.Attempt, pol.Retries), float64(next.Attempt))
		a.persistLocked()
	case opsem.Restart:
		u.gen++
		a.setStateLocked(u, next.State, why+"; "+next.Reason)
		a.persistSupervisedLocked()
		a.wg.Add(1)
		gen, delay := u.gen, next.Delay
		return func() { a.restartAfter(u, gen, delay) }
	}
	return nil
}

// restartAfter is one restart attempt of a hosted process.
func (a *Agent) restartAfter(u *unit, gen uint64, delay time.Duration) {
	defer a.wg.Done()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-a.ctx.Done():
			t.Stop()
			return
		}
	}
	e := u.e
	if !e.acquire(a.ctx) {
		return
	}
	defer e.release()
	a.mu.Lock()
	if u.gen != gen || !e.hosted || u.held != "" || a.closed {
		a.mu.Unlock()
		return
	}
	p := e.p
	// No guess from the pid file here: a live pid there may be a reused
	// one. start_cmd runs and the start check wants a process started
	// after it.
	a.setStateLocked(u, model.ProcStarting, fmt.Sprintf("restart attempt %d", u.attempts))
	a.mu.Unlock()

	ctx, cancel := context.WithTimeout(a.ctx, time.Duration(p.Deadline(model.OpStart))*time.Second)
	r := a.startUnit(ctx, u, p, model.OpStart)
	cancel()

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	name := p.Spec.Identity.ProcName
	if r.code == model.CodeSuccess {
		u.restarts++
		publishLocked(e)
		a.emitLocked(u, model.EventRestartSuccess, fmt.Sprintf("check %s not running, and restart it success", name), float64(u.restarts))
		a.persistSupervisedLocked()
		return
	}
	a.emitLocked(u, model.EventRestartFailed, fmt.Sprintf("check %s not running, and restart it failed: %s", name, r.msg), float64(u.attempts))
	if e.hosted && u.held == "" {
		a.decideRestartLocked(u, opsem.Exit{Status: -1, StartFailed: true}, "restart failed: "+r.msg)
	}
}

// startPeriodicLocked schedules e's job every cycle_time seconds. now
// means the first run already happened (a start op) and the next is one
// cycle away; otherwise (agent start) the first run is one cycle away too.
func (a *Agent) startPeriodicLocked(e *entry, _ bool) {
	if e.stopPeriodic != nil {
		e.stopPeriodic()
	}
	if a.closed {
		return
	}
	cycle := time.Duration(e.p.Spec.Policy.CycleTime) * time.Second
	if cycle <= 0 {
		cycle = time.Second
	}
	ctx, cancel := context.WithCancel(a.ctx)
	e.stopPeriodic = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTicker(cycle)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			a.periodicTick(ctx, e)
		}
	}()
}

// periodicTick launches a run of e's job unless the previous one is alive.
func (a *Agent) periodicTick(ctx context.Context, e *entry) {
	select {
	case e.op <- struct{}{}:
	default:
		a.log.Info("periodic tick skipped: an operation is in progress", "proc", e.key)
		return
	}
	defer e.release()
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil || !e.hosted || a.closed {
		return
	}
	p := e.p
	launched := false
	// The run's pid goes to the registry: an agent that dies during the
	// run re-adopts it at its start and skips the ticks while it is alive.
	defer func() {
		if launched {
			a.persistLocked()
		}
	}()
	var due []*unit
	for _, u := range e.units {
		if u.held != "" {
			continue
		}
		if pid, _, live := a.probeLocked(u); live {
			a.log.Info("periodic tick skipped: previous run still alive", "proc", e.key, "pid", pid)
			continue
		}
		due = append(due, u)
	}
	env := make([][]string, len(due))
	for i, u := range due {
		env[i] = a.env(p, u)
	}
	// Nothing forks under the agent-wide lock; e.op (held) keeps every op
	// and supervisor action on e out meanwhile.
	a.mu.Unlock()
	kids := make([]*child, len(due))
	errs := make([]error, len(due))
	for i := range due {
		kids[i], errs[i] = launch(p, p.Spec.Control.StartCmd, env[i], a.capture(p.Key(), due[i].idx))
		if errs[i] == nil {
			kids[i].startTick() // a /proc read: here, not under the agent lock below
		}
	}
	a.mu.Lock()
	for i, u := range due {
		c, err := kids[i], errs[i]
		if err != nil {
			a.setStateLocked(u, model.ProcExited, "periodic run: "+err.Error())
			a.emitLocked(u, model.EventRestartFailed, "periodic run of "+p.Spec.Identity.ProcName+" failed: "+err.Error(), 0)
			continue
		}
		u.pid, u.tick = c.pid, c.startTick()
		a.ownLocked(u, c)
		u.lastStart, u.upSince = c.at.Unix(), c.at
		a.setStateLocked(u, model.ProcRunning, "periodic run")
		a.watchLocked(u)
		launched = true
	}
}

// sampler measures cpu (delta of utime+stime over wall time and cpus) and
// memory (RSS over MemTotal) of every running process of the agent, for
// its process group when the group is its own, and enforces limits.
func (a *Agent) sampler() {
	defer a.wg.Done()
	t := time.NewTicker(a.cfg.SampleInterval.D())
	defer t.Stop()
	for check := 0; ; check++ {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		a.sample()
		if a.cfg.LogCapture {
			a.rotateLogs(check)
		}
	}
}

type sampleTarget struct {
	u   *unit
	pid int
	gen uint64
}

func (a *Agent) sample() {
	a.mu.Lock()
	var targets []sampleTarget
	for _, e := range a.procs {
		for _, u := range e.units {
			if u.state == model.ProcRunning && u.pid > 0 {
				targets = append(targets, sampleTarget{u, u.pid, u.gen})
			}
		}
	}
	a.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	tab, err := readProcTable() // once for every process sampled
	if err != nil {
		a.log.Warn("sample", "err", err)
		return
	}
	for _, t := range targets {
		ticks, rss, threads, err := tab.groupUsage(t.pid, a.m)
		now := time.Now()
		a.mu.Lock()
		u := t.u
		if err != nil || u.gen != t.gen || u.pid != t.pid {
			a.mu.Unlock()
			continue
		}
		haveCPU := !u.lastSample.IsZero() && ticks >= u.lastTicks
		if haveCPU {
			wall := now.Sub(u.lastSample).Seconds()
			u.cpu = float64(ticks-u.lastTicks) / clkTck / wall / float64(a.m.ncpu) * 100
		}
		u.lastTicks, u.lastSample = ticks, now
		u.rss, u.threads = rss*a.m.pageSize, threads
		if a.m.memTotal > 0 {
			u.mem = float64(u.rss) * 100 / float64(a.m.memTotal)
		}
		publishLocked(u.e)
		res := u.e.p.Spec.Resource
		what, value, limit := "", 0.0, 0.0
		switch {
		case res.Mem > 0 && u.mem > res.Mem:
			what, value, limit = "mem", u.mem, res.Mem
		case haveCPU && res.CPU > 0 && u.cpu > res.CPU:
			what, value, limit = "cpu", u.cpu, res.CPU
		}
		if what == "" || !u.e.hosted {
			u.breaches = 0
			a.mu.Unlock()
			continue
		}
		u.breaches++
		a.log.Info("resource limit breached", "proc", u.e.key, "pid", t.pid, "resource", what,
			"value", round2(value), "limit", limit, "breaches", u.breaches, "of", a.cfg.BreachCount)
		if u.breaches >= a.cfg.BreachCount && !a.closed {
			u.breaches = 0
			msg := fmt.Sprintf("%s %s usage %.2f%% over limit %.2f%% for %d samples: stopped, not restarted until a manual start",
				u.e.p.Spec.Identity.ProcName, what, value, limit, a.cfg.BreachCount)
			u.held = msg
			publishLocked(u.e)
			a.emitLocked(u, model.EventLimitExceeded, msg, round2(value))
			a.persistLocked()
			a.wg.Add(1)
			go a.enforce(u, t.gen, msg)
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	a.checkPoolsLocked()
	a.mu.Unlock()
}

// enforce stops a process over its limits: stop_cmd (or SIGTERM), then
// SIGKILL to its process group if anything is left.
func (a *Agent) enforce(u *unit, gen uint64, msg string) {
	defer a.wg.Done()
	e := u.e
	if !e.acquire(a.ctx) {
		return
	}
	defer e.release()
	a.mu.Lock()
	if u.gen != gen || a.closed {
		a.mu.Unlock()
		return
	}
	p, pid, tick := e.p, u.pid, u.tick
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, time.Duration(p.Deadline(model.OpStop))*time.Second)
	defer cancel()
	r := a.stopUnit(ctx, u, p, "limit exceeded")
	if r.code != model.CodeSuccess {
		a.log.Warn("stop over limit did not stop it: SIGKILL to its group", "proc", e.key, "pid", pid, "result", r.msg)
		_ = signalGroup(pid, syscall.SIGKILL, a.m)
		a.waitDead(ctx, u, pid, tick, 2*time.Second)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unwatchLocked(u)
	u.pid, u.tick = -1, 0
	u.held = msg
	a.setStateLocked(u, model.ProcStopped, msg)
	a.persistLocked()
}
