package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"gseproc/backend"
	"gseproc/model"
)

// The audit trail is recorded here, in the engine, and nowhere else: every
// path that changes something (the API's forms and native calls, the CLI,
// the console, the SSH console; locally or through a server) ends in
// Operate, SaveProcess, DeleteProcess or Cancel, so none can skip it. The
// actor is the one the call's context carries (backend.WithActor), with
// the request's Operator and Source filling what it lacks.
//
// An operation is recorded before its task is stored (with a TaskCreator
// store, together with the task's lease and targets, and the task record
// only once all three are stored): one that cannot be recorded is not run. A change to the registry or a cancel is recorded
// once done, with its outcome; refusals are recorded too (best effort).

// actor is who makes a call: ctx's actor, completed by the request.
func actor(ctx context.Context, operator, source string) model.Actor {
	a := backend.ActorFrom(ctx)
	if a.Operator == "" {
		a.Operator = operator
	}
	if a.Via == "" {
		a.Via = source
	}
	if a.Via == "" {
		a.Via = "engine"
	}
	return a
}

// outcome maps an error to an audit result and summary.
func outcome(err error) (string, string) {
	var ve model.ValidationError
	switch {
	case err == nil:
		return model.AuditOK, ""
	case errors.As(err, &ve), errors.Is(err, model.ErrReadOnly), errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrConflict),
		errors.Is(err, model.ErrForbidden), errors.Is(err, model.ErrNotSimulated):
		return model.AuditRefused, err.Error()
	}
	return model.AuditError, err.Error()
}

// record appends e to the trail, stamped with the engine's clock.
func (e *Engine) record(ctx context.Context, en model.AuditEntry) error {
	en = e.stamp(en)
	if _, err := e.st.AppendAudit(context.WithoutCancel(ctx), en); err != nil {
		e.notAudited(en, err)
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// notAudited logs that entry en was not stored (err).
func (e *Engine) notAudited(en model.AuditEntry, err error) {
	e.log.Error("audit trail: entry not stored", "action", en.Action, "actor", en.Actor.String(), "task", en.TaskID, "err", err)
}

// stamp is en as recorded: stamped with the engine's clock, its
// namespaces sorted once each, its targets capped.
func (e *Engine) stamp(en model.AuditEntry) model.AuditEntry {
	en.Time = e.now()
	sort.Strings(en.Namespaces)
	en.Namespaces = slices.Compact(en.Namespaces)
	en.Targets = model.CapTargets(en.Targets)
	return en
}

// recordRefusal records an operation that was refused or failed before
// its task existed.
func (e *Engine) recordRefusal(ctx context.Context, req backend.OperateRequest, err error) {
	en := operateEntry(ctx, req)
	en.Result, en.Summary = outcome(err)
	_ = e.record(ctx, en)
}

// operateEntry is the entry of an operation, from its request alone.
func operateEntry(ctx context.Context, req backend.OperateRequest) model.AuditEntry {
	en := model.AuditEntry{Actor: actor(ctx, req.Operator, req.Source), Action: model.AuditOperate, Op: req.Op.String()}
	if len(req.Items) > 0 {
		for _, it := range req.Items {
			en.Namespaces = append(en.Namespaces, it.Process.Meta.Namespace)
			en.Targets = append(en.Targets, it.Process.Key())
		}
		return en
	}
	if req.Selector.Namespace != "" {
		en.Namespaces = []string{req.Selector.Namespace}
	}
	en.Targets = []string{selectorText(req.Selector)}
	return en
}

// selectorText says what a selector picks, in one line: every field it
// narrows by, each host and (host, process) pair named.
func selectorText(s backend.Selector) string {
	// A builder, not +=: a selector can name tens of thousands of hosts,
	// and appending to a string copies it whole each time.
	var b strings.Builder
	add := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	if s.Namespace != "" {
		add("namespace", s.Namespace)
	}
	if s.Name != "" {
		add("name", s.Name)
	}
	for _, l := range model.SortedLabels(s.Labels) {
		add("label", l)
	}
	for _, h := range s.Hosts {
		add("host", h.AgentID())
	}
	for _, t := range s.Targets {
		add("target", t.Host.AgentID()+"/"+t.ProcKey)
	}
	if b.Len() == 0 {
		return "(everything)"
	}
	return b.String()
}

// countsText is a task's outcome in one line.
func countsText(t model.Task) string {
	c := t.Counts
	return fmt.Sprintf("%s: %d targets, %d success, %d failed, %d timeout, %d unreachable, %d cancelled",
		t.Status, t.Targets, c.Success, c.Failed, c.Timeout, c.Unreachable, c.Cancelled)
}

// recordFinished records a task's end.
func (e *Engine) recordFinished(t model.Task) {
	_ = e.record(e.ctx, finishedEntry(t))
}

// finishedEntry is the audit entry of task t's end.
func finishedEntry(t model.Task) model.AuditEntry {
	en := model.AuditEntry{Actor: model.Actor{Operator: t.Operator, Via: t.Source}, Action: model.AuditTaskFinished,
		Op: t.Op.String(), Namespaces: t.Namespace, TargetCount: t.Targets, TaskID: t.ID,
		Result: model.AuditOK, Summary: countsText(t)}
	if t.Status == model.TaskFailed {
		en.Result = model.AuditError
	}
	return en
}

// RecordRefusal records a request refused before it reached the engine
// because it reached outside the caller's scopes (backend.RefusalRecorder):
// the actor is ctx's, the result refused; the caller's texts are capped.
func (e *Engine) RecordRefusal(ctx context.Context, en model.AuditEntry) error {
	en.Seq, en.TaskID, en.Result = 0, "", model.AuditRefused
	en.Actor = actor(ctx, en.Actor.Operator, en.Actor.Via)
	en.Op = capText(en.Op)
	en.Summary = capText(en.Summary)
	for i := range en.Namespaces {
		en.Namespaces[i] = capText(en.Namespaces[i])
	}
	for i := range en.Targets {
		en.Targets[i] = capText(en.Targets[i])
	}
	return e.record(ctx, en)
}

// maxAuditText bounds one text of an entry that quotes a request.
const maxAuditText = 1024

// capText cuts s to maxAuditText bytes (on a rune boundary) and says so.
func capText(s string) string {
	if len(s) <= maxAuditText {
		return s
	}
	cut := maxAuditText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d bytes)", len(s))
}

// Audit lists the audit trail's entries matching q, newest first.
func (e *Engine) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEntry, error) {
	v := &model.Validator{}
	q.ValidateInto(v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	out, err := e.st.Audit(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}
