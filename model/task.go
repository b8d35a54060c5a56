package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TaskIDPrefix starts every task id.
const TaskIDPrefix = "GSETASK:"

// FormatTaskID builds "GSETASK:YYYYMMDDHHMMSS:seq". Uniqueness across
// restarts comes from seq, which the engine draws from its store (a durable
// counter, or for the in-memory store a value seeded from the boot time).
func FormatTaskID(t time.Time, seq uint64) string {
	return TaskIDPrefix + t.UTC().Format("20060102150405") + ":" + strconv.FormatUint(seq, 10)
}

// ParseTaskID checks the format and returns its time and seq.
func ParseTaskID(id string) (time.Time, uint64, error) {
	rest, ok := strings.CutPrefix(id, TaskIDPrefix)
	if !ok {
		return time.Time{}, 0, fmt.Errorf("task id %q: want GSETASK:YYYYMMDDHHMMSS:seq", id)
	}
	ts, seqs, ok := strings.Cut(rest, ":")
	if !ok {
		return time.Time{}, 0, fmt.Errorf("task id %q: want GSETASK:YYYYMMDDHHMMSS:seq", id)
	}
	t, err := time.Parse("20060102150405", ts)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("task id %q: bad timestamp %q", id, ts)
	}
	seq, err := strconv.ParseUint(seqs, 10, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("task id %q: bad sequence %q", id, seqs)
	}
	return t, seq, nil
}

// ResultState is where one (host, process) sub-result is.
type ResultState string

// Result states: pending -> running -> one of the final ones.
const (
	StatePending     ResultState = "pending"
	StateRunning     ResultState = "running"
	StateSuccess     ResultState = "success"
	StateFailed      ResultState = "failed"
	StateTimeout     ResultState = "timeout"
	StateUnreachable ResultState = "unreachable"
	StateCancelled   ResultState = "cancelled"
	StateSkipped     ResultState = "skipped"
)

// Final reports whether the state is terminal.
func (s ResultState) Final() bool {
	switch s {
	case StatePending, StateRunning, "":
		return false
	}
	return true
}

// OK reports whether the state counts as a success.
func (s ResultState) OK() bool { return s == StateSuccess || s == StateSkipped }

// Target is one (host, process) pair of a task.
type Target struct {
	Host    Host   `json:"host"`
	ProcKey string `json:"proc"` // namespace:name
	// AgentID is the GSE 2.0 agent id the request named Host by (canonical),
	// empty when it named it "cloud:ip": results are keyed the way the
	// request named each host. It is not part of the pair's identity (Pair).
	AgentID string `json:"agent_id,omitempty"`
}

// Pair is the target's identity: its host and process, without how
// the request named the host.
func (t Target) Pair() Target { return Target{Host: t.Host, ProcKey: t.ProcKey} }

// HostRef is how the request named the target's host: its agent id, or
// "cloud:ip".
func (t Target) HostRef() string {
	if t.AgentID != "" {
		return t.AgentID
	}
	return t.Host.AgentID()
}

// Result is one sub-result of a task.
type Result struct {
	TaskID   string `json:"task_id"`
	Seq      int64  `json:"seq"` // order in which final results arrived, from 1; 0 while not final
	Host     Host   `json:"host"`
	ProcKey  string `json:"proc"`
	ValueKey string `json:"value_key,omitempty"`
	// AgentID is the agent id the request named Host by (Target.AgentID).
	AgentID string      `json:"agent_id,omitempty"`
	Op      OpType      `json:"op_type"`
	State   ResultState `json:"state"`
	Code    int         `json:"error_code"`
	Message string      `json:"error_msg"`
	// Proc is the identity of the definition the op ran with (what the
	// API's result content names).
	Proc ResultProc `json:"proc_identity,omitzero"`
	// Hosted says the process was hosted (supervised) after the op, as
	// its host reported it.
	Hosted bool `json:"hosted,omitempty"`
	// Status is the process's state, pid, start time and usage as the
	// agent reported it, on results of the status op.
	Status   *ProcStatus `json:"status,omitempty"`
	Started  time.Time   `json:"started,omitzero"`
	Finished time.Time   `json:"finished,omitzero"`
}

// ResultProc is the part of a definition's identity a result keeps.
type ResultProc struct {
	ProcName   string `json:"proc_name,omitempty"`
	SetupPath  string `json:"setup_path,omitempty"`
	FuncID     string `json:"func_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
}

// ResultProcOf is the identity a result of p keeps.
func ResultProcOf(p Process) ResultProc {
	id := p.Spec.Identity
	return ResultProc{ProcName: id.ProcName, SetupPath: id.SetupPath, FuncID: id.FuncID, InstanceID: id.InstanceID}
}

// HostRef is how the request named the result's host: its agent id, or
// "cloud:ip".
func (r Result) HostRef() string {
	return Target{Host: r.Host, AgentID: r.AgentID}.HostRef()
}

// Duration is how long the host took (0 while not final).
func (r Result) Duration() time.Duration {
	if r.Started.IsZero() || r.Finished.IsZero() {
		return 0
	}
	return r.Finished.Sub(r.Started)
}

// TaskStatus summarises a task.
type TaskStatus string

// Task statuses.
const (
	TaskPending  TaskStatus = "pending" // created, not yet dispatched
	TaskRunning  TaskStatus = "running"
	TaskDone     TaskStatus = "done"   // every sub-result final, all OK
	TaskFailed   TaskStatus = "failed" // every sub-result final, some not OK
	TaskCanceled TaskStatus = "cancelled"
)

// Final reports whether the task is over: done, failed or cancelled.
func (s TaskStatus) Final() bool {
	return s == TaskDone || s == TaskFailed || s == TaskCanceled
}

// Task is one operation over N hosts x M processes.
type Task struct {
	ID        string   `json:"task_id"`
	Op        OpType   `json:"op_type"`
	Targets   int      `json:"targets"`
	Namespace []string `json:"namespaces,omitempty"`
	Source    string   `json:"source,omitempty"`   // cli, console, api:<endpoint>
	Operator  string   `json:"operator,omitempty"` // bk_username / app code / local user
	// Suppliers holds the bk_supplier_id a v1 API request gave a host
	// (by "cloud:ip"; none for 0): an API detail the engine stores with the
	// task and never reads, so the v1 result keys are the same through
	// every server and after a restart.
	Suppliers map[string]int `json:"bk_supplier_ids,omitempty"`
	// Selection is what the request selected beyond the namespaces, in
	// one line ("name nginx · labels app=nginx · hosts 0:10.0.0.1"), so a
	// list of tasks says what each acted on.
	Selection string     `json:"selection,omitempty"`
	Status    TaskStatus `json:"status"`
	Created   time.Time  `json:"created"`
	Finished  time.Time  `json:"finished,omitzero"`
	Counts    Counts     `json:"counts"`
	// Rollout makes the task a roll: batch by batch (see DecideRoll);
	// Roll is its progress. Both nil for an ordinary task.
	Rollout *Rollout   `json:"rollout,omitempty"`
	Roll    *RollState `json:"roll,omitempty"`
}

// Counts tallies sub-results by state.
type Counts struct {
	Pending     int `json:"pending"`
	Running     int `json:"running"`
	Success     int `json:"success"`
	Failed      int `json:"failed"`
	Timeout     int `json:"timeout"`
	Unreachable int `json:"unreachable"`
	Cancelled   int `json:"cancelled"`
	Skipped     int `json:"skipped"`
}

// Add counts one state.
func (c *Counts) Add(s ResultState, n int) {
	switch s {
	case StatePending:
		c.Pending += n
	case StateRunning:
		c.Running += n
	case StateSuccess:
		c.Success += n
	case StateFailed:
		c.Failed += n
	case StateTimeout:
		c.Timeout += n
	case StateUnreachable:
		c.Unreachable += n
	case StateCancelled:
		c.Cancelled += n
	case StateSkipped:
		c.Skipped += n
	}
}

// Final is the number of final results.
func (c Counts) Final() int {
	return c.Success + c.Failed + c.Timeout + c.Unreachable + c.Cancelled + c.Skipped
}

// Bad is the number of final results that are not OK.
func (c Counts) Bad() int { return c.Failed + c.Timeout + c.Unreachable + c.Cancelled }

// Outcome is the status of a task whose every target is final with these
// counts: canceled when it was cancelled and some target was, failed when
// any target is not OK, else done.
func (c Counts) Outcome(cancelled bool) TaskStatus {
	switch {
	case cancelled && c.Cancelled > 0:
		return TaskCanceled
	case c.Bad() > 0:
		return TaskFailed
	}
	return TaskDone
}

// Total is every result.
func (c Counts) Total() int { return c.Final() + c.Pending + c.Running }

// StateForCode classifies an agent reply code for op.
func StateForCode(op OpType, code int) ResultState {
	switch {
	case Benign(op, code):
		return StateSuccess
	case code == CodeTimeout:
		return StateTimeout
	case code == CodeAgentAbnormal:
		return StateUnreachable
	case code == CodeRunning:
		return StateRunning
	}
	return StateFailed
}
