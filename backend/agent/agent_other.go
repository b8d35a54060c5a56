//go:build !linux

package agent

import (
	"context"
	"errors"
	"log/slog"
	"runtime"

	"gseproc/backend/config"
	"gseproc/model"
)

// ErrUnsupported is New's answer outside Linux.
var ErrUnsupported = errors.New("the gseproc agent is not supported on this OS (" + runtime.GOOS + "): it needs Linux (pidfd, /proc, process groups)")

// Agent is the host agent; outside Linux it cannot be built (New fails).
type Agent struct{}

// New reports ErrUnsupported: the agent runs on Linux only.
func New(config.AgentConfig, *slog.Logger) (*Agent, error) { return nil, ErrUnsupported }

// Identity is empty: no agent runs here.
func (a *Agent) Identity() model.HostInfo { return model.HostInfo{} }

// Handle answers that the agent is not supported here.
func (a *Agent) Handle(context.Context, model.AgentRequest) model.AgentReply {
	return model.AgentReply{Code: model.CodeAgentAbnormal, Message: ErrUnsupported.Error()}
}

// Statuses is empty.
func (a *Agent) Statuses() []model.ProcStatus { return nil }

// SubscribeEvents returns at once: there are no events.
func (a *Agent) SubscribeEvents(context.Context, func(model.Event)) {}

// Run reports ErrUnsupported.
func (a *Agent) Run(context.Context) error { return ErrUnsupported }

// Close does nothing.
func (a *Agent) Close() error { return nil }
