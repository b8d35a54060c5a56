package model

import "errors"

// Sentinel errors shared by the engine, transports and clients. Wrap them
// with what was being done; test with errors.Is.
var (
	// ErrUnreachable: no agent answers for the host (NATS: no responders). -> 117
	ErrUnreachable = errors.New("agent unreachable")
	// ErrNotFound: no such task, process or host.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly: the backend refuses changes.
	ErrReadOnly = errors.New("read-only mode")
	// ErrConflict: the definition changed since it was read.
	ErrConflict = errors.New("conflict")
	// ErrCancelled: an operator cancelled the task. It is the cause
	// (context.Cause) of the context of an operation cancelled while it
	// runs: the agent stops the command and answers AgentReply.Cancelled.
	ErrCancelled = errors.New("cancelled by the operator")
	// ErrUnavailable: the store (NATS, JetStream) did not answer within
	// the caller's bound; nothing says whether a write was applied. -> 503
	ErrUnavailable = errors.New("store unavailable")
)

// ErrForbidden: the caller may not see or change that scope.
var ErrForbidden = errors.New("not allowed")
