package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// groupTimeout bounds how long one agent may take to take a process group
// (it only records it), before the deadline slack.
const groupTimeout = 10 * time.Second

// SetProcessGroups tells each host's agent the process group of
// req.Namespace and stores it for the hosts whose agent took it (see
// backend.Backend). The request is recorded in the audit trail before any
// agent is told; one that cannot be recorded is not sent.
func (e *Engine) SetProcessGroups(ctx context.Context, req backend.GroupRequest) ([]backend.GroupResult, error) {
	en := model.AuditEntry{Actor: actor(ctx, "", ""), Action: model.AuditSetGroup, Namespaces: []string{req.Namespace},
		TargetCount: len(req.Hosts)}
	for _, h := range req.Hosts {
		en.Targets = append(en.Targets, h.AgentID())
	}
	req, err := e.checkGroupRequest(req)
	if err != nil {
		en.Result, en.Summary = outcome(err)
		_ = e.record(ctx, en)
		return nil, err
	}
	r := req.Resource
	en.Result, en.Summary = model.AuditOK, fmt.Sprintf("cpu_pool_limit %g%% (weight %d), mem_pool_limit %g%% (weight %d) on %d hosts",
		r.CPUPoolLimit, r.CPUPoolWeight, r.MemPoolLimit, r.MemPoolWeight, len(req.Hosts))
	if !r.Limited() {
		en.Summary = fmt.Sprintf("cleared on %d hosts", len(req.Hosts))
	}
	if err := e.record(ctx, en); err != nil {
		return nil, fmt.Errorf("set process group %s: %w", req.Namespace, err)
	}
	return e.setGroups(ctx, req)
}

// checkGroupRequest refuses a read-only engine and returns req in
// canonical form, or every bad field.
func (e *Engine) checkGroupRequest(req backend.GroupRequest) (backend.GroupRequest, error) {
	if err := e.refuseReadOnly("set process group " + req.Namespace); err != nil {
		return req, err
	}
	v := &model.Validator{}
	model.ValidateNamespace(v, "namespace", req.Namespace)
	if len(req.Hosts) == 0 {
		v.Add("hosts", "required: at least one host")
	}
	hosts := model.CanonicalHosts(v, "hosts", req.Hosts)
	req.Resource.Validate(v, "resource")
	if err := v.Err(); err != nil {
		return req, err
	}
	seen := make(map[model.Host]bool, len(hosts))
	req.Hosts = hosts[:0]
	for _, h := range hosts {
		if !seen[h] {
			seen[h] = true
			req.Hosts = append(req.Hosts, h)
		}
	}
	return req, nil
}

// setGroups sends the group to every host, at most cfg.Concurrency at a
// time, and stores it for those that took it.
func (e *Engine) setGroups(ctx context.Context, req backend.GroupRequest) ([]backend.GroupResult, error) {
	now := e.now()
	out := make([]backend.GroupResult, len(req.Hosts))
	sem := make(chan struct{}, max(1, min(e.cfg.Concurrency, len(req.Hosts))))
	var wg sync.WaitGroup
	for i, h := range req.Hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = e.setGroup(ctx, h, model.ProcessGroup{Namespace: req.Namespace, Host: h, Resource: req.Resource, Updated: now.Unix()})
		})
	}
	wg.Wait()
	var took []model.ProcessGroup
	for _, r := range out {
		if r.Code == model.CodeSuccess {
			took = append(took, model.ProcessGroup{Namespace: req.Namespace, Host: r.Host, Resource: req.Resource,
				SupplierID: req.Suppliers[r.Host.AgentID()], Updated: now.Unix()})
		}
	}
	if err := e.st.PutGroups(context.WithoutCancel(ctx), took); err != nil {
		// The agents enforce it already; what failed is the server's record.
		return out, fmt.Errorf("set process group %s: taken by %d agents, not stored: %w", req.Namespace, len(took), err)
	}
	e.log.Info("process group set", "namespace", req.Namespace, "hosts", len(req.Hosts), "taken", len(took),
		"cpu_pool_limit", req.Resource.CPUPoolLimit, "mem_pool_limit", req.Resource.MemPoolLimit)
	return out, nil
}

// setGroup tells one host's agent.
func (e *Engine) setGroup(ctx context.Context, h model.Host, g model.ProcessGroup) backend.GroupResult {
	budget := groupTimeout + e.cfg.DeadlineSlack.D()
	dctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	rep, err := e.d.Dispatch(dctx, h, model.AgentRequest{Group: &g, Deadline: time.Now().Add(budget)})
	switch {
	case err == nil:
		msg := rep.Message
		if msg == "" {
			msg = model.CodeText(rep.Code)
		}
		return backend.GroupResult{Host: h, Code: rep.Code, Message: msg}
	case errors.Is(err, model.ErrUnreachable):
		return backend.GroupResult{Host: h, Code: model.CodeAgentAbnormal, Message: err.Error()}
	case dctx.Err() != nil:
		return backend.GroupResult{Host: h, Code: model.CodeTimeout, Message: fmt.Sprintf("no reply within %s", budget)}
	}
	return backend.GroupResult{Host: h, Code: model.CodeCommandFailed, Message: fmt.Sprintf("dispatch: %v", err)}
}

// ProcessGroups lists the stored process groups matching q.
func (e *Engine) ProcessGroups(ctx context.Context, q backend.GroupQuery) ([]model.ProcessGroup, error) {
	v := &model.Validator{}
	if q.Namespace != "" {
		model.ValidateNamespace(v, "namespace", q.Namespace)
	}
	hosts := model.CanonicalHosts(v, "hosts", q.Hosts)
	if err := v.Err(); err != nil {
		return nil, err
	}
	gs, err := e.st.Groups(ctx, q.Namespace)
	if err != nil {
		return nil, fmt.Errorf("process groups: %w", err)
	}
	if len(hosts) == 0 {
		return gs, nil
	}
	want := make(map[model.Host]bool, len(hosts))
	for _, h := range hosts {
		want[h] = true
	}
	out := gs[:0]
	for _, g := range gs {
		if want[g.Host] {
			out = append(out, g)
		}
	}
	return out, nil
}
