package backend

import (
	"context"
	"fmt"
	"slices"

	"gseproc/model"
)

// Restrict returns be as seen by someone who may see and change only the
// namespaces allow accepts (an SSH operator, say): lists leave the rest
// out (a host shows only its allowed processes, and a host with none is
// left out), a task is shown only when every namespace it touched is
// allowed, and a change or operation outside them, or over every
// namespace, is refused with model.ErrForbidden before it reaches be.
// Host events that name no process (agents going on/offline) pass.
func Restrict(be Backend, allow func(ns string) bool) Backend {
	return &restricted{be: be, allow: allow}
}

// AllowNamespaces is the predicate of a namespace list; "*" allows all.
func AllowNamespaces(list []string) func(string) bool {
	if slices.Contains(list, "*") {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(list))
	for _, n := range list {
		set[n] = true
	}
	return func(ns string) bool { return set[ns] }
}

type restricted struct {
	be    Backend
	allow func(string) bool
}

// deny refuses a call (op) that reaches outside the allowed namespaces,
// and records the refusal in the audit trail.
func (r *restricted) deny(ctx context.Context, op, field, ns string) error {
	err := fmt.Errorf("%s: namespace %q: %w", field, ns, model.ErrForbidden)
	RecordRefusal(ctx, r.be, model.AuditEntry{Action: model.AuditScopeDenied, Op: op, Namespaces: []string{ns}, Summary: err.Error()})
	return err
}

// RecordRefusal passes a refusal on to the backend under r (see
// RefusalRecorder).
func (r *restricted) RecordRefusal(ctx context.Context, en model.AuditEntry) error {
	if rr, ok := r.be.(RefusalRecorder); ok {
		return rr.RecordRefusal(ctx, en)
	}
	return nil
}

// allowAll reports whether every namespace of nss is allowed (and there is one).
func (r *restricted) allowAll(nss []string) bool {
	for _, ns := range nss {
		if !r.allow(ns) {
			return false
		}
	}
	return len(nss) > 0
}

func (r *restricted) Info(ctx context.Context) (Info, error) {
	return ScopedInfo(ctx, r.be, r.allow, nil)
}

// ScopedTasks is how many of the latest tasks ScopedInfo looks through for
// running ones.
const ScopedTasks = 1000

// ScopedInfo is be's Info counted within a scope, for a caller who may see
// only the namespaces allow accepts (and, when owns is set, the hosts it
// owns): the hosts it sees (those carrying a process of an allowed
// namespace, or owned), those of them online, the definitions of allowed
// namespaces, and the tasks running (of the latest ScopedTasks) whose
// namespaces are all allowed. Counts of the rest of the fleet are not
// revealed; mode, endpoint, version and read-only are be's.
func ScopedInfo(ctx context.Context, be Backend, allow func(ns string) bool, owns func(model.HostInfo) bool) (Info, error) {
	info, err := be.Info(ctx)
	if err != nil {
		return Info{}, err
	}
	hosts, err := be.Hosts(ctx, HostQuery{})
	if err != nil {
		return Info{}, fmt.Errorf("info: %w", err)
	}
	info.Hosts, info.Online = 0, 0
	for _, h := range hosts {
		seen := owns != nil && owns(h.HostInfo)
		for _, p := range h.Procs {
			if ns, _, _ := model.SplitKey(p.Key); !seen && allow(ns) {
				seen = true
			}
		}
		if seen {
			info.Hosts++
			if h.State == model.AgentOnline {
				info.Online++
			}
		}
	}
	defs, err := be.Processes(ctx, ProcQuery{})
	if err != nil {
		return Info{}, fmt.Errorf("info: %w", err)
	}
	info.Processes = len(keep(defs, func(d model.ProcessDef) bool { return allow(d.Process.Meta.Namespace) }))
	tasks, err := be.Tasks(ctx, ScopedTasks)
	if err != nil {
		return Info{}, fmt.Errorf("info: %w", err)
	}
	info.Running = 0
	for _, t := range tasks {
		if !t.Status.Final() && len(t.Namespace) > 0 && !slices.ContainsFunc(t.Namespace, func(ns string) bool { return !allow(ns) }) {
			info.Running++
		}
	}
	return info, nil
}

func (r *restricted) Namespaces(ctx context.Context) ([]NamespaceSummary, error) {
	nss, err := r.be.Namespaces(ctx)
	return keep(nss, func(n NamespaceSummary) bool { return r.allow(n.Name) }), err
}

func (r *restricted) Hosts(ctx context.Context, q HostQuery) ([]HostView, error) {
	if q.Namespace != "" && !r.allow(q.Namespace) {
		return nil, r.deny(ctx, "hosts", "namespace", q.Namespace)
	}
	hv, err := r.be.Hosts(ctx, q)
	if err != nil {
		return nil, err
	}
	out := hv[:0:0]
	for _, h := range hv {
		h.Procs = keep(h.Procs, func(p ProcView) bool {
			ns, _, _ := model.SplitKey(p.Key)
			return r.allow(ns)
		})
		if len(h.Procs) > 0 {
			out = append(out, h)
		}
	}
	return out, nil
}

func (r *restricted) Processes(ctx context.Context, q ProcQuery) ([]model.ProcessDef, error) {
	if q.Namespace != "" && !r.allow(q.Namespace) {
		return nil, r.deny(ctx, "processes", "namespace", q.Namespace)
	}
	defs, err := r.be.Processes(ctx, q)
	return keep(defs, func(d model.ProcessDef) bool { return r.allow(d.Process.Meta.Namespace) }), err
}

func (r *restricted) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	if ns := def.Process.Meta.Namespace; !r.allow(ns) {
		return r.deny(ctx, "save_process", "process.meta.namespace", ns)
	}
	return r.be.SaveProcess(ctx, def)
}

func (r *restricted) DeleteProcess(ctx context.Context, key string) error {
	if ns, _, _ := model.SplitKey(key); !r.allow(ns) {
		return r.deny(ctx, "delete_process", "key", ns)
	}
	return r.be.DeleteProcess(ctx, key)
}

func (r *restricted) Operate(ctx context.Context, req OperateRequest) (model.Task, error) {
	if len(req.Items) == 0 && req.Selector.Namespace == "" {
		return model.Task{}, r.deny(ctx, "operate", "selector.namespace", "(every namespace)")
	}
	if ns := req.Selector.Namespace; ns != "" && !r.allow(ns) {
		return model.Task{}, r.deny(ctx, "operate", "selector.namespace", ns)
	}
	for i, it := range req.Items {
		if ns := it.Process.Meta.Namespace; !r.allow(ns) {
			return model.Task{}, r.deny(ctx, "operate", fmt.Sprintf("items[%d].process.meta.namespace", i), ns)
		}
	}
	return r.be.Operate(ctx, req)
}

// task loads a task the caller may see; one it may not is not found.
func (r *restricted) task(ctx context.Context, id string) (TaskView, error) {
	tv, err := r.be.Task(ctx, id)
	if err != nil {
		return tv, err
	}
	if !r.allowAll(tv.Task.Namespace) {
		return TaskView{}, fmt.Errorf("task %s: %w", id, model.ErrNotFound)
	}
	return tv, nil
}

func (r *restricted) Task(ctx context.Context, id string) (TaskView, error) { return r.task(ctx, id) }

func (r *restricted) Tasks(ctx context.Context, limit int) ([]model.Task, error) {
	ts, err := r.be.Tasks(ctx, limit)
	return keep(ts, func(t model.Task) bool { return r.allowAll(t.Namespace) }), err
}

func (r *restricted) Watch(ctx context.Context, id string, after int64) (<-chan model.Result, error) {
	if _, err := r.task(ctx, id); err != nil {
		return nil, err
	}
	return r.be.Watch(ctx, id, after)
}

func (r *restricted) ControlRoll(ctx context.Context, id string, act model.RollAction) (model.Task, error) {
	if _, err := r.task(ctx, id); err != nil {
		return model.Task{}, err
	}
	return r.be.ControlRoll(ctx, id, act)
}

func (r *restricted) Cancel(ctx context.Context, id string) error {
	if _, err := r.task(ctx, id); err != nil {
		return err
	}
	return r.be.Cancel(ctx, id)
}

// event reports whether the caller may see an event.
func (r *restricted) event(e model.Event) bool {
	ns, _, _ := model.SplitKey(e.ProcKey)
	return e.ProcKey == "" || r.allow(ns)
}

// Events filters the stream through a goroutine that ends with ctx or
// when be's channel closes.
func (r *restricted) Events(ctx context.Context) (<-chan model.Event, error) {
	in, err := r.be.Events(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan model.Event, cap(in))
	go func() {
		defer close(out)
		for e := range in {
			if !r.event(e) {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				for range in { // be closes in once ctx ends
				}
				return
			}
		}
	}()
	return out, nil
}

func (r *restricted) RecentEvents(ctx context.Context, n int) ([]model.Event, error) {
	evs, err := r.be.RecentEvents(ctx, n)
	return keep(evs, r.event), err
}

func (r *restricted) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	if q.Namespace != "" && !r.allow(q.Namespace) {
		return nil, r.deny(ctx, "audit", "namespace", q.Namespace)
	}
	es, err := r.be.Audit(ctx, q)
	return keep(es, func(e model.AuditEntry) bool { return r.allowAll(e.Namespaces) }), err
}

func (r *restricted) Simulate(ctx context.Context, req SimRequest) (model.SimOutcome, error) {
	if ns := req.Selector.Namespace; !r.allow(ns) {
		if ns == "" {
			ns = "(every namespace)"
		}
		return model.SimOutcome{}, r.deny(ctx, "simulate", "selector.namespace", ns)
	}
	return r.be.Simulate(ctx, req)
}

func (r *restricted) SetProcessGroups(ctx context.Context, req GroupRequest) ([]GroupResult, error) {
	if !r.allow(req.Namespace) {
		return nil, r.deny(ctx, "set_process_group", "namespace", req.Namespace)
	}
	return r.be.SetProcessGroups(ctx, req)
}

func (r *restricted) ProcessGroups(ctx context.Context, q GroupQuery) ([]model.ProcessGroup, error) {
	if q.Namespace != "" && !r.allow(q.Namespace) {
		return nil, r.deny(ctx, "process_groups", "namespace", q.Namespace)
	}
	gs, err := r.be.ProcessGroups(ctx, q)
	return keep(gs, func(g model.ProcessGroup) bool { return r.allow(g.Namespace) }), err
}

// keep returns the elements of xs f accepts (a new slice).
func keep[T any](xs []T, f func(T) bool) []T {
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if f(x) {
			out = append(out, x)
		}
	}
	return out
}

func (r *restricted) Logs(ctx context.Context, q LogQuery) (<-chan model.TailChunk, error) {
	if ns, _, _ := model.SplitKey(q.Process); !r.allow(ns) {
		return nil, r.deny(ctx, "logs", "proc", ns)
	}
	return r.be.Logs(ctx, q)
}
