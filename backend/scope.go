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

func (r *restricted) deny(field, ns string) error {
	return fmt.Errorf("%s: namespace %q: %w", field, ns, model.ErrForbidden)
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

func (r *restricted) Info(ctx context.Context) (Info, error) { return r.be.Info(ctx) }

func (r *restricted) Namespaces(ctx context.Context) ([]NamespaceSummary, error) {
	nss, err := r.be.Namespaces(ctx)
	return keep(nss, func(n NamespaceSummary) bool { return r.allow(n.Name) }), err
}

func (r *restricted) Hosts(ctx context.Context, q HostQuery) ([]HostView, error) {
	if q.Namespace != "" && !r.allow(q.Namespace) {
		return nil, r.deny("namespace", q.Namespace)
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
		return nil, r.deny("namespace", q.Namespace)
	}
	defs, err := r.be.Processes(ctx, q)
	return keep(defs, func(d model.ProcessDef) bool { return r.allow(d.Process.Meta.Namespace) }), err
}

func (r *restricted) SaveProcess(ctx context.Context, def model.ProcessDef) error {
	if ns := def.Process.Meta.Namespace; !r.allow(ns) {
		return r.deny("process.meta.namespace", ns)
	}
	return r.be.SaveProcess(ctx, def)
}

func (r *restricted) DeleteProcess(ctx context.Context, key string) error {
	if ns, _, _ := model.SplitKey(key); !r.allow(ns) {
		return r.deny("key", ns)
	}
	return r.be.DeleteProcess(ctx, key)
}

func (r *restricted) Operate(ctx context.Context, req OperateRequest) (model.Task, error) {
	if len(req.Items) == 0 && req.Selector.Namespace == "" {
		return model.Task{}, r.deny("selector.namespace", "(every namespace)")
	}
	if ns := req.Selector.Namespace; ns != "" && !r.allow(ns) {
		return model.Task{}, r.deny("selector.namespace", ns)
	}
	for i, it := range req.Items {
		if ns := it.Process.Meta.Namespace; !r.allow(ns) {
			return model.Task{}, r.deny(fmt.Sprintf("items[%d].process.meta.namespace", i), ns)
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
		return nil, r.deny("namespace", q.Namespace)
	}
	es, err := r.be.Audit(ctx, q)
	return keep(es, func(e model.AuditEntry) bool { return r.allowAll(e.Namespaces) }), err
}

func (r *restricted) Simulate(ctx context.Context, req SimRequest) (model.SimOutcome, error) {
	if ns := req.Selector.Namespace; !r.allow(ns) {
		if ns == "" {
			ns = "(every namespace)"
		}
		return model.SimOutcome{}, r.deny("selector.namespace", ns)
	}
	return r.be.Simulate(ctx, req)
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
