//go:build linux

package agent

import (
	"context"
	"fmt"
	"sync"

	"gseproc/model"
)

// Local adapts in-process agents to the engine's Dispatcher (and
// Inventory, EventSource), for tests and single-machine demos.
type Local struct {
	mu     sync.RWMutex
	agents map[string]*Agent // by AgentID
	order  []*Agent
}

// NewLocal serves the given agents.
func NewLocal(agents ...*Agent) *Local {
	l := &Local{agents: map[string]*Agent{}}
	for _, a := range agents {
		l.Add(a)
	}
	return l
}

// Add serves one more agent (replacing one with the same identity).
func (l *Local) Add(a *Agent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := a.host.AgentID()
	if old, ok := l.agents[id]; ok {
		for i, o := range l.order {
			if o == old {
				l.order = append(l.order[:i], l.order[i+1:]...)
				break
			}
		}
	}
	l.agents[id] = a
	l.order = append(l.order, a)
}

// Dispatch hands req to host's agent. An unknown host is
// model.ErrUnreachable (wrapped); a passed deadline is ctx.Err().
func (l *Local) Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error) {
	l.mu.RLock()
	a, ok := l.agents[host.AgentID()]
	l.mu.RUnlock()
	if !ok {
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w", host, model.ErrUnreachable)
	}
	if err := ctx.Err(); err != nil {
		return model.AgentReply{}, fmt.Errorf("dispatch %s: %w", host, err)
	}
	rep := a.Handle(ctx, req)
	if rep.Code == model.CodeTimeout && ctx.Err() != nil {
		return rep, fmt.Errorf("dispatch %s: %w", host, ctx.Err())
	}
	return rep, nil
}

// Hosts lists the agents' identities.
func (l *Local) Hosts(ctx context.Context) ([]model.HostInfo, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]model.HostInfo, 0, len(l.order))
	for _, a := range l.order {
		out = append(out, a.Identity())
	}
	return out, nil
}

// SubscribeEvents subscribes fn to every agent's events until ctx ends.
func (l *Local) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var mu sync.Mutex // fn sees one event at a time
	for _, a := range l.order {
		a.SubscribeEvents(ctx, func(e model.Event) {
			mu.Lock()
			defer mu.Unlock()
			fn(e)
		})
	}
}
