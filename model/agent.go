package model

import (
	"time"
	"unicode/utf8"
)

// AgentRequest is what the engine sends one host for one process.
type AgentRequest struct {
	TaskID string `json:"task_id"`
	// OpID names this operation (OpID): an agent runs an op id at most
	// once and answers a repeat with the recorded outcome.
	OpID     string    `json:"op_id,omitempty"`
	Op       OpType    `json:"op_type"`
	Process  Process   `json:"process"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Group, when set, is the whole request: set the process group of
	// Group.Namespace on the host (cleared when its resource limits
	// nothing); Op and Process are not read. Setting a group is idempotent.
	Group *ProcessGroup `json:"process_group,omitempty"`
	// Tail, when set, asks for a piece of Process's log (see TailRequest):
	// a read, never an op; Op is not read and no op id is used.
	Tail *TailRequest `json:"tail,omitempty"`
	// CancelOp, when set, cancels op OpID instead of running it: sent by a
	// server that took over a task whose cancel was asked while no server
	// ran it, for every target another server may have sent. The host
	// stops the op if it runs (its command's process group killed), never
	// runs it later, and answers the op's outcome: the recorded one when
	// it had finished, else cancelled (Cancelled set).
	CancelOp bool `json:"cancel_op,omitempty"`
	// ProcessJSON, when set, is Process's encoding (json.Marshal of it),
	// made once for every host of a task by its sender:
	// AppendRequestJSON writes it instead of encoding Process again for
	// each host. It is no part of the request itself: never encoded.
	ProcessJSON []byte `json:"-"`
}

// OpID is the operation id of task taskID on one target: the same every
// time the target is dispatched for the task, also by another server that
// resumes the task, so that the host runs it at most once.
func OpID(taskID string, host Host, procKey string) string {
	// One allocation (the string), not three (the agent id, the
	// concatenation's): made for every target of every op.
	var buf [128]byte
	b := append(buf[:0], taskID...)
	b = append(b, '/')
	b = host.AppendAgentID(b)
	b = append(b, '/')
	b = append(b, procKey...)
	return string(b)
}

// AgentReply is one host's answer.
type AgentReply struct {
	Code    int         `json:"error_code"`
	Message string      `json:"error_msg"`
	Output  string      `json:"output,omitempty"` // command screen output
	Status  *ProcStatus `json:"status,omitempty"` // the process after the op
	// Cancelled: the op was stopped by a cancel of its task before it
	// finished (its command's process group killed); Code and Message say
	// where it stood.
	Cancelled bool `json:"cancelled,omitempty"`
	// Tail is the answer to a tail request (Code 0); a refused one has
	// a non-zero Code and the reason in Message.
	Tail *TailChunk `json:"tail,omitempty"`
}

// LateReply is an agent's answer to the op OpID of task TaskID on Host
// that came after the dispatch had given up waiting (its deadline
// passed): the timeout recorded then can be corrected with it.
type LateReply struct {
	Host   Host
	TaskID string
	OpID   string
	Reply  AgentReply
}

// CancelRequest asks a host's agent to stop an operation it is running
// (or about to run): the op of OpID, of task TaskID.
type CancelRequest struct {
	TaskID string `json:"task_id"`
	OpID   string `json:"op_id"`
}

// ProcState is the agent's state machine for one hosted process, after
// supervisord's: stopped, starting, running, backoff, stopping, exited, fatal.
type ProcState string

// Process states.
const (
	ProcStopped  ProcState = "stopped"
	ProcStarting ProcState = "starting"
	ProcRunning  ProcState = "running"
	ProcBackoff  ProcState = "backoff"
	ProcStopping ProcState = "stopping"
	ProcExited   ProcState = "exited"
	ProcFatal    ProcState = "fatal"
	ProcUnknown  ProcState = "unknown"
)

// Up reports whether the process is alive in this state.
func (s ProcState) Up() bool { return s == ProcRunning || s == ProcStarting || s == ProcStopping }

// ProcStatus is one process on one host.
type ProcStatus struct {
	ProcKey       string    `json:"proc"`
	ProcName      string    `json:"proc_name"`
	State         ProcState `json:"state"`
	PID           int       `json:"pid"` // -1 when not running
	Hosted        bool      `json:"is_auto"`
	StartTime     time.Time `json:"start_time,omitzero"`
	RegisterTime  int64     `json:"register_time,omitempty"`
	LastStartTime int64     `json:"last_start_time,omitempty"`
	ReportTime    int64     `json:"report_time,omitempty"`
	CPU           float64   `json:"cpu_usage"` // percent of the whole machine
	Mem           float64   `json:"mem_usage"` // percent of the whole machine
	MemRSS        uint64    `json:"mem_rss,omitempty"`
	Restarts      int       `json:"restarts,omitempty"`
	ExitStatus    int       `json:"exit_status,omitempty"`
	Version       string    `json:"version,omitempty"`
	Cmdline       string    `json:"cmdline,omitempty"` // at most MaxCmdline bytes: an agent clips a longer one
	Threads       int       `json:"threads,omitempty"`
	Message       string    `json:"message,omitempty"`
}

// MaxCmdline bounds a status's command line (ProcStatus.Cmdline): a
// process sets its own, up to megabytes (a Java class path), and every
// heartbeat carries every hosted process's status, within one NATS
// message.
const MaxCmdline = 4096

// MaxHostProcs bounds the statuses a host reports in one heartbeat (one
// for each process definition its agent knows; an agent is built and
// measured to hold 1,000): a server keeps the first MaxHostProcs and
// leaves the rest out. Without it a heartbeat of "{}" statuses within
// the 8 MiB payload of the embedded NATS server made millions of them,
// kept for the host. An agent (and a simulated host) knows at most
// MaxHostProcs definitions: an op on one more is refused (opsem.Admit).
const MaxHostProcs = 4096

// MaxStatusText bounds a status's other texts (its key, name, state,
// version and message) and a host's agent version: a key is a
// namespace and a name of at most 512 bytes each.
const MaxStatusText = 2048

// ClipText is s clipped to at most max bytes (max >= 3), at a character
// boundary, ending in "..." when clipped; s itself when it fits.
func ClipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// MaxOutput bounds a command's output an agent reports in a reply
// (AgentReply.Output: its tail) and the message with it: an agent keeps
// at most its output_limit (4 KiB by default, at most MaxOutput), and a
// server keeps at most MaxOutput of whatever an agent (untrusted) sends,
// which a NATS payload (8 MiB embedded) otherwise bounds, for every target
// of every task.
const MaxOutput = 64 << 10

// ClipOutput is a command's output s clipped as an agent clips it: its
// last MaxOutput bytes at most, from a character boundary, after "..."
// when clipped; s itself when it fits.
func ClipOutput(s string) string {
	if len(s) <= MaxOutput {
		return s
	}
	n := len(s) - (MaxOutput - 3)
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return "..." + s[n:]
}

// BoundReply makes rep what a server keeps of an agent's reply: its
// output clipped (ClipOutput), its message at most MaxOutput bytes
// (ClipText), its status by PlainStatus, and a log tail's chunk within
// the tail protocol's bounds (CheckTailChunk) or refused: the reply then
// says why (CodeCommandFailed) and carries no chunk. Its path is kept
// plain and clipped to MaxStatusText. It names the first field it
// changed ("" when none, the usual reply: no allocation).
func BoundReply(rep *AgentReply) (changed string) {
	if c := rep.Tail; c != nil {
		if err := CheckTailChunk(c); err != nil {
			rep.Tail = nil
			rep.Code = CodeCommandFailed
			rep.Message = "log tail refused by the server: " + err.Error()
			changed = "tail"
		} else if p := ClipText(PlainText(c.Path), MaxStatusText); p != c.Path {
			c.Path, changed = p, "tail.path"
		}
	}
	if o := ClipOutput(rep.Output); o != rep.Output {
		rep.Output = o
		if changed == "" {
			changed = "output"
		}
	}
	if m := ClipText(rep.Message, MaxOutput); m != rep.Message {
		rep.Message = m
		if changed == "" {
			changed = "error_msg"
		}
	}
	if rep.Status != nil {
		if f := PlainStatus(rep.Status); f != "" && changed == "" {
			changed = "status." + f
		}
	}
	return changed
}

// PlainStatus makes st what a server keeps of a status an agent reports
// (untrusted): each text plain (PlainText: no escape sequence, no control
// character but newline and tab) and clipped to its bound (MaxCmdline,
// MaxStatusText). It names the first field it changed ("" when none: the
// usual status, changed in nothing and without allocation).
func PlainStatus(st *ProcStatus) (changed string) {
	note := func(field string, s *string, max int) {
		if c := ClipText(PlainText(*s), max); c != *s {
			*s = c
			if changed == "" {
				changed = field
			}
		}
	}
	note("proc", &st.ProcKey, MaxStatusText)
	note("proc_name", &st.ProcName, MaxStatusText)
	state := string(st.State)
	note("state", &state, MaxStatusText)
	st.State = ProcState(state)
	note("version", &st.Version, MaxStatusText)
	note("cmdline", &st.Cmdline, MaxCmdline)
	note("message", &st.Message, MaxStatusText)
	return changed
}

// Event is something that happened on a host without an operator asking:
// a hosted process restarted, failed to restart, was given up, broke a limit.
type Event struct {
	// ID names the event once, wherever it travels: an agent's events are
	// published, retried and replayed under it and the store keeps one
	// event per ID. The server sets it (see transport.EventID): an agent's
	// own id is scoped to its host there, so no host can name another's
	// events; "" only for an event from a source that names none.
	ID      string    `json:"id,omitempty"`
	Time    time.Time `json:"time"`
	Host    Host      `json:"host"`
	ProcKey string    `json:"proc"`
	Kind    EventKind `json:"event_name"`
	Message string    `json:"content"`
	Value   float64   `json:"value,omitempty"` // the measured value, for limit events
}

// EventKind names an event as bk-monitor does.
type EventKind string

// Event kinds.
const (
	EventRestartSuccess EventKind = "process_restart_success"
	EventRestartFailed  EventKind = "process_restart_failed"
	EventGiveUp         EventKind = "process_cancel_restart"
	EventLimitExceeded  EventKind = "process_resource_limit_exceed"
	// EventGroupLimitExceeded: a process group (the namespace's pool) was
	// over its limit; the event names the process stopped for it.
	EventGroupLimitExceeded EventKind = "process_group_resource_limit_exceed"
	EventAgentOnline        EventKind = "agent_online"
	EventAgentOffline       EventKind = "agent_offline"
	// EventResultCorrected: a host answered after its op's deadline; the
	// timeout recorded for it was replaced by its real outcome.
	EventResultCorrected EventKind = "result_corrected"
)
