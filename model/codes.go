package model

// Per-host result codes, as the real system reports them in error_code.
const (
	CodeSuccess           = 0
	CodeRunning           = 115 // still running: poll again
	CodeTimeout           = 116 // gseproc: the per-host deadline passed with no reply (GSE itself leaves 115 forever)
	CodeAgentAbnormal     = 117 // agent not found, offline or unreachable
	CodeAlreadyRunning    = 828 // start of a running process
	CodeNotRunning        = 829 // stop of a process that is not running
	CodeIllegalOp         = 832 // op type the agent does not know
	CodePostCheckFailed   = 836 // start/stop post-check failed; message starts with "stop" for stop
	CodeAlreadyRegistered = 850 // register of a process already hosted
	CodeCommandFailed     = 65535
	CodeStopping          = 1015012 // a stop/start is in progress
)

// Top-level codes of the result queries.
const (
	CodeTaskNotDispatched = 1000115 // task not yet dispatched: poll again
)

// CodeText is the canonical message for a code.
func CodeText(code int) string {
	switch code {
	case CodeSuccess:
		return "success"
	case CodeRunning:
		return "handling"
	case CodeTimeout:
		return "operation timed out"
	case CodeAgentAbnormal:
		return "agent abnormal or unreachable"
	case CodeAlreadyRunning:
		return "process already running, no need to start"
	case CodeNotRunning:
		return "process not running, no need to stop"
	case CodeIllegalOp:
		return "illegal op type"
	case CodePostCheckFailed:
		return "post-check failed"
	case CodeAlreadyRegistered:
		return "Fail to register, for the process info already exists."
	case CodeCommandFailed:
		return "command failed"
	case CodeStopping:
		return "process is stopping"
	}
	return "error"
}

// Benign reports whether a non-zero code still leaves the process where the
// operator asked it to be (828 on start, 829 on stop/kill, 850 on register),
// as the real clients treat them.
func Benign(op OpType, code int) bool {
	switch code {
	case CodeSuccess:
		return true
	case CodeAlreadyRunning:
		return op == OpStart
	case CodeNotRunning:
		return op == OpStop || op == OpKill || op == OpUnregister
	case CodeAlreadyRegistered:
		return op == OpRegister
	}
	return false
}
