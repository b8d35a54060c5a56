package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gseproc/model"
)

// Router is a dispatcher with an inventory: a simulated fleet, or the NATS
// Dispatcher.
type Router interface {
	Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error)
	Hosts(ctx context.Context) ([]model.HostInfo, error)
}

// Owner is implemented by a Router that can say cheaply whether it serves a
// host.
type Owner interface {
	Owns(host model.Host) bool
}

// Onliner is implemented by a Router that knows which of its hosts have a
// live agent (the NATS Dispatcher).
type Onliner interface {
	Online(host model.Host) bool
}

// Merged routes each host between a primary and a secondary Router: a host
// whose agent is online at the secondary (when it is an Onliner) goes
// there; else a host the primary lists (or Owns) goes to the primary; every
// other host to the secondary. Under --demo the primary is the simulated
// fleet and the secondary the NATS Dispatcher, so real agents join beside
// it, and a real agent that takes a simulated host's identity (e.g.
// 0:127.0.0.1) is the one operated.
type Merged struct {
	primary, secondary Router

	mu      sync.Mutex
	owned   map[model.Host]bool
	fetched time.Time
}

// ownedTTL is how long the primary's host list is trusted.
const ownedTTL = 2 * time.Second

// Merge combines primary and secondary; see Merged.
func Merge(primary, secondary Router) *Merged {
	return &Merged{primary: primary, secondary: secondary}
}

func (m *Merged) owns(ctx context.Context, h model.Host) (bool, error) {
	if o, ok := m.secondary.(Onliner); ok && o.Online(h) {
		return false, nil
	}
	if o, ok := m.primary.(Owner); ok {
		return o.Owns(h), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned == nil || time.Since(m.fetched) > ownedTTL {
		hs, err := m.primary.Hosts(ctx)
		if err != nil {
			return false, err
		}
		m.owned = make(map[model.Host]bool, len(hs))
		for _, hi := range hs {
			m.owned[hi.Host] = true
		}
		m.fetched = time.Now()
	}
	return m.owned[h], nil
}

// Dispatch sends req to the Router that owns host.
func (m *Merged) Dispatch(ctx context.Context, host model.Host, req model.AgentRequest) (model.AgentReply, error) {
	r, err := m.route(ctx, host)
	if err != nil {
		return model.AgentReply{}, fmt.Errorf("dispatch %s: route: %w", host, err)
	}
	return r.Dispatch(ctx, host, req)
}

// route is the side host goes to (see Merged).
func (m *Merged) route(ctx context.Context, host model.Host) (Router, error) {
	own, err := m.owns(ctx, host)
	switch {
	case err != nil:
		return nil, err
	case own:
		return m.primary, nil
	}
	return m.secondary, nil
}

// Hosts lists the primary's hosts, then the secondary's that the primary
// does not have; a host both have is listed once, as the side Dispatch
// routes it to says.
func (m *Merged) Hosts(ctx context.Context) ([]model.HostInfo, error) {
	a, err := m.primary.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	b, err := m.secondary.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	index := make(map[model.Host]int, len(a))
	for i, hi := range a {
		index[hi.Host] = i
	}
	out := append(make([]model.HostInfo, 0, len(a)+len(b)), a...)
	for _, hi := range b {
		i, dup := index[hi.Host]
		switch {
		case !dup:
			out = append(out, hi)
		case hi.State == model.AgentOnline:
			out[i] = hi // a live real agent wins
		}
	}
	return out, nil
}

// SubscribeEvents subscribes fn to both sides that deliver events.
func (m *Merged) SubscribeEvents(ctx context.Context, fn func(model.Event)) {
	type source interface {
		SubscribeEvents(ctx context.Context, fn func(model.Event))
	}
	for _, r := range []Router{m.primary, m.secondary} {
		if s, ok := r.(source); ok {
			s.SubscribeEvents(ctx, fn)
		}
	}
}

// SubscribeAckedEvents subscribes fn to both sides: with acknowledgements
// on a side that keeps its events until stored (the NATS dispatcher), as
// plain events (ack nil) on the other.
func (m *Merged) SubscribeAckedEvents(ctx context.Context, fn AckedEventFunc) {
	type acked interface {
		SubscribeAckedEvents(ctx context.Context, fn AckedEventFunc)
	}
	type source interface {
		SubscribeEvents(ctx context.Context, fn func(model.Event))
	}
	for _, r := range []Router{m.primary, m.secondary} {
		switch s := r.(type) {
		case acked:
			s.SubscribeAckedEvents(ctx, fn)
		case source:
			s.SubscribeEvents(ctx, func(e model.Event) { fn(e, nil) })
		}
	}
}

// Statuses reports host's process statuses from the side Dispatch routes
// it to (engine.StatusSource), when that side reports any.
func (m *Merged) Statuses(host model.Host) []model.ProcStatus {
	type source interface {
		Statuses(host model.Host) []model.ProcStatus
	}
	r, err := m.route(context.Background(), host)
	if err != nil {
		return nil
	}
	if s, ok := r.(source); ok {
		return s.Statuses(host)
	}
	return nil
}

// AppendListStatuses is Statuses' list form (engine.ListStatusAppender):
// the side Dispatch routes host to lists it slim when it can (the
// simulator and the dispatcher both do); else its full statuses of the
// keys asked are cut down to what a list shows.
func (m *Merged) AppendListStatuses(dst []model.ProcStatus, host model.Host, keys []string) []model.ProcStatus {
	type lister interface {
		AppendListStatuses(dst []model.ProcStatus, host model.Host, keys []string) []model.ProcStatus
	}
	r, err := m.route(context.Background(), host)
	if err != nil {
		return dst
	}
	switch src := r.(type) {
	case lister:
		return src.AppendListStatuses(dst, host, keys)
	case interface {
		Statuses(host model.Host) []model.ProcStatus
	}:
		return appendListStatuses(dst, src.Statuses(host), keys)
	}
	return dst
}

// SubscribeLate subscribes fn to the late answers of both sides that
// deliver them (see Dispatcher.SubscribeLate).
func (m *Merged) SubscribeLate(ctx context.Context, fn func(model.LateReply)) {
	type source interface {
		SubscribeLate(ctx context.Context, fn func(model.LateReply))
	}
	for _, r := range []Router{m.primary, m.secondary} {
		if s, ok := r.(source); ok {
			s.SubscribeLate(ctx, fn)
		}
	}
}
