package engine

import (
	"context"
	"fmt"

	"gseproc/backend"
	"gseproc/model"
)

// Simulate carries out a live control of the simulated fleet
// (backend.Backend): the request is checked at the entrance, its selector
// resolved against the registry (every host of the inventory when empty),
// and the fleet picks and changes the hosts. It is refused on a fleet of
// real agents (model.ErrNotSimulated) and in read-only mode, and recorded
// in the audit trail either way.
func (e *Engine) Simulate(ctx context.Context, req backend.SimRequest) (model.SimOutcome, error) {
	out, err := e.simulate(ctx, &req)
	en := model.AuditEntry{Actor: actor(ctx, req.Operator, req.Source), Action: model.AuditSimulate, Op: string(req.Action),
		Targets: []string{req.Selector.Scope()}, TargetCount: len(out.Picked)}
	if req.Selector.Namespace != "" {
		en.Namespaces = []string{req.Selector.Namespace}
	}
	en.Result, en.Summary = outcome(err)
	if err == nil {
		en.Summary = out.Message
	}
	if rerr := e.record(ctx, en); rerr != nil && err == nil {
		return out, fmt.Errorf("simulate %s: done, but %w", req.Action, rerr)
	}
	return out, err
}

func (e *Engine) simulate(ctx context.Context, req *backend.SimRequest) (model.SimOutcome, error) {
	if e.sim == nil {
		return model.SimOutcome{}, fmt.Errorf("simulate %s: %w", req.Action, model.ErrNotSimulated)
	}
	if err := e.refuseReadOnly("simulate " + string(req.Action)); err != nil {
		return model.SimOutcome{}, err
	}
	if err := req.Validate(); err != nil {
		return model.SimOutcome{}, err
	}
	var targets []model.Target
	if req.Selector.Empty() {
		his, err := e.inv.Hosts(ctx)
		if err != nil {
			return model.SimOutcome{}, fmt.Errorf("simulate %s: list hosts: %w", req.Action, err)
		}
		targets = make([]model.Target, len(his))
		for i, h := range his {
			targets[i] = model.Target{Host: h.Host}
		}
	} else {
		defs, err := e.st.Processes(ctx)
		if err != nil {
			return model.SimOutcome{}, fmt.Errorf("simulate %s: load registry: %w", req.Action, err)
		}
		targets, _ = resolve(defs, req.Selector, &e.hosts)
	}
	out, err := e.sim.Control(ctx, req.SimChange, targets, req.Selector.Scope())
	if err != nil {
		return out, fmt.Errorf("simulate %s: %w", req.Action, err)
	}
	return out, nil
}
