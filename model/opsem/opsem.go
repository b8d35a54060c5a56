// Package opsem is gseproc's operation semantics, written once: for every
// op type (0 start, 1 stop, 2 status, 3 register, 4 unregister, 7 restart,
// 8 reload, 9 kill) and every state of a process on a host (the state
// machine stopped, starting, running, backoff, stopping, exited, fatal;
// hosted or not) it decides what happens: which command runs, the result
// code, the state after and whether hosting changes. The restart policy of
// hosted processes (exponential, jittered backoff with a cap, reset after
// staying up, give-up after start_retries) is a pure decision too, in
// restart.go.
//
// It does no I/O, starts no goroutine and reads no clock: time and random
// draws are passed in. The agent (backend/agent) carries the decisions out
// with real processes, the simulator (backend/simulator) with simulated
// ones; neither holds a rule of its own. The conformance table
// (conformance.go) is run against both.
//
// The rules, with the reference they follow (../shared/reference/gse-api.md):
//
//	op          process before                     action             code   after (on success)
//	start 0     every instance up (or scheduled)   none               828    unchanged
//	            otherwise                          start_cmd + check  0      running, hosted    (§4.1 [S4] "启动成功会注册托管")
//	stop 1      an instance up                     stop_cmd + check   0      stopped, unhosted  (§4.1 [S4] "停止成功会取消托管")
//	            none up, a restart pending         cancel restart     0      stopped, unhosted  (supervisord: stop in BACKOFF)
//	            none up                            none               829    unchanged, hosting kept (§4.4: GSE's 829 content says "isAuto":true)
//	status 2    any                                none               0      unchanged
//	register 3  hosted                             none               850    unchanged          (§4.7 [S13][S31])
//	            not hosted                         host               0      hosted; a resident process that is down is brought up by the restart policy (§8.5 "check X not running, and restart it")
//	unregister 4 hosted                            unhost             0      unhosted, still running; a pending restart is cancelled
//	            not hosted                         none               829    unchanged          (§4.7: nodeman counts 829 as success for unregister [S13])
//	restart 7   any                                restart_cmd, or stop + start_cmd  0  running, hosting unchanged (§8.1 gsekit [S12])
//	reload 8    an instance up                     reload_cmd or SIGHUP 0    unchanged
//	            none up                            none               829    unchanged
//	kill 9      as stop, with kill_cmd or SIGKILL                             (§4.1 [S4] "杀死成功会取消托管")
//	any but 2   stopping                           none               1015012 unchanged (§7.1)
//	other       any                                none               832    unchanged
//
// A command that fails answers 65535 (its output in the message), a start
// or stop whose post-check fails 836, one cut short by the deadline 116;
// hosting never changes on a failure (§0.5: hosting changes "on success").
package opsem

import (
	"fmt"

	"gseproc/model"
)

// Before is what the executor knows of one process on one host as an op
// arrives.
type Before struct {
	// State is the process's state (its first instance's, as reported).
	State model.ProcState
	// Live is how many instances are alive, of Instances (at least 1).
	Live, Instances int
	// Hosted: the agent supervises the process (isAuto).
	Hosted bool
	// Scheduled: a periodic job's schedule is active, which counts as
	// running (a start answers 828, a stop ends the schedule).
	Scheduled bool
	// Pending: a restart by the restart policy is waiting (BACKOFF), or
	// due (a hosted process died and its exit is not handled yet).
	Pending bool
	// Type is the process's auto_type.
	Type model.AutoType
}

// Commands says which control commands a definition has.
type Commands struct {
	Start, Stop, Restart, Reload, Kill bool
}

// CommandsIn reads the commands of a process's control c (by pointer:
// the process is not copied).
func CommandsIn(c *model.Control) Commands {
	has := func(op model.OpType) bool { _, ok := c.Command(op); return ok }
	return Commands{Start: has(model.OpStart), Stop: has(model.OpStop), Restart: has(model.OpRestart),
		Reload: has(model.OpReload), Kill: has(model.OpKill)}
}

// Action is what the executor does for an op.
type Action uint8

// Actions.
const (
	// Answer: nothing runs; Decision.Code is the answer.
	Answer Action = iota
	// Start: start_cmd for every instance that is not alive, then the
	// start check.
	Start
	// RestartCmd: restart_cmd for every instance, then the start check.
	RestartCmd
	// StopStart: stop every live instance (as Stop), then Start.
	StopStart
	// Stop: stop_cmd (SIGTERM to the process group, SIGKILL after the
	// grace, when there is none) for every live instance, then the stop
	// check.
	Stop
	// Kill: kill_cmd (SIGKILL to the process group when there is none) for
	// every live instance, then the stop check.
	Kill
	// Reload: reload_cmd (SIGHUP when there is none) for every live instance.
	Reload
	// CancelRestart: a pending restart is called off; nothing runs.
	CancelRestart
	// Host: hosting is registered; nothing runs.
	Host
	// Unhost: hosting is cancelled; nothing runs, the process keeps running.
	Unhost
)

var actionNames = [...]string{"answer", "start", "restart_cmd", "stop+start", "stop", "kill", "reload", "cancel-restart", "host", "unhost"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Runs reports whether the action runs commands (so it can fail).
func (a Action) Runs() bool { return a >= Start && a <= Reload }

// Hosting is a change of hosting.
type Hosting uint8

// Hosting changes.
const (
	Keep Hosting = iota
	On
	Off
)

func (h Hosting) String() string { return [...]string{"keep", "on", "off"}[h] }

// Apply is hosted after the change.
func (h Hosting) Apply(hosted bool) bool {
	switch h {
	case On:
		return true
	case Off:
		return false
	}
	return hosted
}

// Decision is what an op does to a process.
type Decision struct {
	Op     model.OpType
	Action Action
	// Code is the answer when Action is Answer, else the code on success (0).
	Code int
	// Message explains a non-zero Code ("" for success).
	Message string
	// What happens once the action succeeded:
	Hosting Hosting
	// State is the process's state after success ("" when it does not
	// change). For a job (auto_type 0, 2) that ran to its end within the
	// start check the executor reports exited instead of running.
	State model.ProcState
	// Supervise: the restart policy takes over now, so a resident process
	// that is down is brought up (register of a process not running).
	Supervise bool
	// Schedule: a periodic job's schedule starts (On), ends (Off) or stays.
	Schedule Hosting
	// ResetRetries: the restart policy's count of failed attempts starts
	// again (an operator's start or restart; a given-up process comes back).
	ResetRetries bool
}

// Decide decides op for a process in state b with commands c. name is the
// process's proc_name, for messages.
func Decide(op model.OpType, b Before, c Commands, name string) Decision {
	d := Decision{Op: op, Action: Answer}
	if !op.Valid() {
		return d.answer(model.CodeIllegalOp, fmt.Sprintf("%s: op_type %d is not one of 0,1,2,3,4,7,8,9", model.CodeText(model.CodeIllegalOp), int(op)))
	}
	if op == model.OpStatus {
		return d
	}
	if b.State == model.ProcStopping {
		return d.answer(model.CodeStopping, fmt.Sprintf("%s: process(%s) is stopping", model.CodeText(model.CodeStopping), name))
	}
	n := max(b.Instances, 1)
	up := b.Live
	if b.Scheduled && b.Type == model.AutoPeriodic {
		up = n // a scheduled job counts as running
	}
	periodic := b.Type == model.AutoPeriodic
	switch op {
	case model.OpStart:
		if up >= n || b.State == model.ProcStarting {
			return d.answer(model.CodeAlreadyRunning, fmt.Sprintf("no need to start the process(%s) that is already running", name))
		}
		if !c.Start {
			return d.answer(model.CodeCommandFailed, "start_cmd is empty: nothing to run")
		}
		d.Action, d.Hosting, d.State, d.ResetRetries = Start, On, model.ProcRunning, true
		if periodic {
			d.Schedule = On
		}
	case model.OpStop, model.OpKill:
		switch {
		case up > 0:
			d.Action = Stop
			if op == model.OpKill {
				d.Action = Kill
			}
		case b.Pending:
			d.Action = CancelRestart
		default:
			return d.answer(model.CodeNotRunning, fmt.Sprintf("no need to %s the process(%s) that is not running", op, name))
		}
		d.Hosting, d.State = Off, model.ProcStopped
		if periodic {
			d.Schedule = Off
		}
	case model.OpRegister:
		if b.Hosted {
			return d.answer(model.CodeAlreadyRegistered, model.CodeText(model.CodeAlreadyRegistered))
		}
		d.Action, d.Hosting = Host, On
		switch b.Type {
		case model.AutoPeriodic:
			d.Schedule = On
		case model.AutoResident:
			d.Supervise, d.ResetRetries = b.Live < n, true
		}
	case model.OpUnregister:
		if !b.Hosted {
			return d.answer(model.CodeNotRunning, fmt.Sprintf("no need to unregister the process(%s) that is not hosted", name))
		}
		d.Action, d.Hosting = Unhost, Off
		if b.Pending || b.State == model.ProcFatal {
			d.State = model.ProcStopped // the pending restart is called off
		}
		if periodic {
			d.Schedule = Off
		}
	case model.OpRestart:
		switch {
		case c.Restart:
			d.Action = RestartCmd
		case !c.Start:
			return d.answer(model.CodeCommandFailed, "restart_cmd and start_cmd are empty: nothing to run")
		default:
			d.Action = StopStart
		}
		d.State, d.ResetRetries = model.ProcRunning, true
		if periodic && b.Hosted {
			d.Schedule = On
		}
	case model.OpReload:
		if b.Live == 0 {
			return d.answer(model.CodeNotRunning, fmt.Sprintf("no need to reload the process(%s) that is not running", name))
		}
		d.Action = Reload
	}
	return d
}

func (d Decision) answer(code int, msg string) Decision {
	d.Action, d.Code, d.Message = Answer, code, msg
	return d
}

// Result is the end of an op: its code and what it left behind.
type Result struct {
	Code    int
	Hosting Hosting
	// State is the state after ("" when unchanged).
	State model.ProcState
}

// Settle is the decision's result once its action ended with code (0, or
// the executor's 65535, 836 or 116). Nothing changes on a failure, except
// that a start that failed leaves the process stopped (restart: the stop
// part went through, or restart_cmd replaced it and it did not come up).
func (d Decision) Settle(code int) Result {
	if d.Action == Answer {
		return Result{Code: d.Code}
	}
	if code == model.CodeSuccess {
		return Result{Code: code, Hosting: d.Hosting, State: d.State}
	}
	r := Result{Code: code}
	switch d.Action {
	case Start, StopStart:
		r.State = model.ProcStopped
	case RestartCmd:
		if code == model.CodePostCheckFailed {
			r.State = model.ProcStopped
		}
	}
	return r
}
