package opsem

import "gseproc/model"

// Given is how a conformance case's process starts out on its host; every
// executor knows how to bring a resident process there.
type Given string

// Starting points.
const (
	// Fresh: never operated on: stopped, not hosted.
	Fresh Given = "stopped"
	// Running: started by an op: running, hosted.
	Running Given = "running"
	// RunningUnhosted: started, then unregistered.
	RunningUnhosted Given = "running-unhosted"
	// InBackoff: hosted, it died and a restart failed; the next one waits
	// (start_retries 3, start_interval 60 s).
	InBackoff Given = "backoff"
	// Fatal: hosted, it died and the restart failed with start_retries 1:
	// given up.
	Fatal Given = "fatal"
)

// Step is one op of a conformance case and what every executor (the
// simulator, the agent in process, the agent over NATS) must answer.
type Step struct {
	Op model.OpType
	// Outcome is what the op's command does when it runs: 0 it works,
	// model.CodeCommandFailed it exits non-zero, model.CodePostCheckFailed
	// the process does not come up (start) or does not go (stop).
	Outcome int
	// Code is the answer.
	Code int
	// State and Hosted are the process once things settled (the restart
	// policy's immediate restart included).
	State  model.ProcState
	Hosted bool
	// Why is the rule and its reference.
	Why string
}

// Case is a starting point and a sequence of steps.
type Case struct {
	Name  string
	Given Given
	Steps []Step
}

const (
	ok      = model.CodeSuccess
	c828    = model.CodeAlreadyRunning
	c829    = model.CodeNotRunning
	c832    = model.CodeIllegalOp
	c836    = model.CodePostCheckFailed
	c850    = model.CodeAlreadyRegistered
	c65535  = model.CodeCommandFailed
	up      = model.ProcRunning
	down    = model.ProcStopped
	fatal   = model.ProcFatal
	backoff = model.ProcBackoff
)

// Conformance is the table every executor runs. The first case is the
// sequence of ordinary operations on which the agent and the simulator
// once disagreed at 7 of 18 steps (issue 11).
var Conformance = []Case{
	{Name: "ordinary sequence", Given: Fresh, Steps: []Step{
		{Op: model.OpStatus, Code: ok, State: down, Why: "status changes nothing"},
		{Op: model.OpStop, Code: c829, State: down, Why: "§7.1 829 not running"},
		{Op: model.OpKill, Code: c829, State: down, Why: "§7.1 829 not running"},
		{Op: model.OpReload, Code: c829, State: down, Why: "§7.1 829 not running"},
		{Op: model.OpUnregister, Code: c829, State: down, Why: "§4.7: unregister of a process not hosted answers 829 (nodeman counts it as success [S13])"},
		{Op: model.OpRegister, Code: ok, State: up, Hosted: true, Why: "§4.1 op 3 hosts it; §8.5 the agent starts a hosted process it finds not running"},
		{Op: model.OpRegister, Code: c850, State: up, Hosted: true, Why: "§4.7 850 already registered"},
		{Op: model.OpStart, Code: c828, State: up, Hosted: true, Why: "§7.1 828 already running"},
		{Op: model.OpUnregister, Code: ok, State: up, Why: "op 4 cancels hosting; the process keeps running"},
		{Op: model.OpUnregister, Code: c829, State: up, Why: "§4.7 second unregister: not hosted"},
		{Op: model.OpRestart, Code: ok, State: up, Why: "§8.1 restart leaves hosting unchanged [S12]"},
		{Op: model.OpRegister, Code: ok, State: up, Hosted: true, Why: "op 3 of a running process hosts it"},
		{Op: model.OpStop, Code: ok, State: down, Why: "§4.1 stop cancels hosting on success"},
		{Op: model.OpStart, Outcome: c65535, Code: c65535, State: down, Why: "§7.1 65535 start_cmd failed; hosting unchanged"},
		{Op: model.OpStart, Outcome: c836, Code: c836, State: down, Why: "§7.1 836 post-check: not running after start"},
		{Op: model.OpStart, Code: ok, State: up, Hosted: true, Why: "§4.1 start hosts it on success"},
		{Op: model.OpReload, Code: ok, State: up, Hosted: true, Why: "reload of a running process"},
		{Op: model.OpStop, Outcome: c65535, Code: c65535, State: up, Hosted: true, Why: "stop_cmd failed: still running, still hosted"},
		{Op: model.OpStop, Outcome: c836, Code: c836, State: up, Hosted: true, Why: "§7.1 836 stop post-check: still running"},
		{Op: model.OpKill, Code: ok, State: down, Why: "§4.1 kill cancels hosting on success"},
		{Op: model.OpRestart, Code: ok, State: up, Why: "restart of a stopped process starts it, hosting unchanged"},
		{Op: model.OpStop, Code: ok, State: down, Why: "stop"},
		{Op: model.OpType(5), Code: c832, State: down, Why: "§7.1 832 illegal op type"},
	}},
	{Name: "running, not hosted", Given: RunningUnhosted, Steps: []Step{
		{Op: model.OpStart, Code: c828, State: up, Why: "828"},
		{Op: model.OpStop, Code: ok, State: down, Why: "stop of a running process not hosted"},
	}},
	{Name: "restart fails", Given: Running, Steps: []Step{
		{Op: model.OpRestart, Outcome: c836, Code: c836, State: down, Hosted: true, Why: "836: restarted, not up; hosting unchanged"},
		{Op: model.OpStart, Code: ok, State: up, Hosted: true, Why: "a manual start"},
		{Op: model.OpKill, Outcome: c65535, Code: c65535, State: up, Hosted: true, Why: "kill_cmd failed: still running, still hosted"},
		{Op: model.OpStop, Code: ok, State: down, Why: "stop"},
	}},
	{Name: "hosted, given up", Given: Fatal, Steps: []Step{
		{Op: model.OpStatus, Code: ok, State: fatal, Hosted: true, Why: "given up after start_retries: FATAL, still hosted"},
		{Op: model.OpStop, Code: c829, State: fatal, Hosted: true, Why: "§4.4: GSE's 829 to a stop of a process not running carries \"isAuto\":true: hosting changes only on success (§0.5)"},
		{Op: model.OpKill, Code: c829, State: fatal, Hosted: true, Why: "as stop"},
		{Op: model.OpRegister, Code: c850, State: fatal, Hosted: true, Why: "850"},
		{Op: model.OpUnregister, Code: ok, State: down, Why: "op 4: no longer hosted, nothing to restart"},
	}},
	{Name: "hosted, given up, started again", Given: Fatal, Steps: []Step{
		{Op: model.OpStart, Code: ok, State: up, Hosted: true, Why: "an operator's start brings a given-up process back"},
		{Op: model.OpStop, Code: ok, State: down, Why: "stop"},
	}},
	{Name: "hosted, restart pending", Given: InBackoff, Steps: []Step{
		{Op: model.OpStatus, Code: ok, State: backoff, Hosted: true, Why: "the next restart waits"},
		{Op: model.OpReload, Code: c829, State: backoff, Hosted: true, Why: "nothing to reload"},
		{Op: model.OpStop, Code: ok, State: down, Why: "stop calls the pending restart off and cancels hosting (supervisord: stop in BACKOFF)"},
	}},
	{Name: "hosted, restart pending, unregistered", Given: InBackoff, Steps: []Step{
		{Op: model.OpUnregister, Code: ok, State: down, Why: "op 4 calls the pending restart off"},
	}},
}
