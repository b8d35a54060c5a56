package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// jobRequest is the process_infos form (JOB operate_proc, operate_process,
// manage_proc, get_proc_result): bk_biz_id, or bk_scope_type + bk_scope_id.
type jobRequest struct {
	BizID        *flexInt           `json:"bk_biz_id"`
	ScopeType    string             `json:"bk_scope_type"`
	ScopeID      *flexString        `json:"bk_scope_id"`
	OpType       *int               `json:"op_type"`
	ProcessInfos []wire.ProcessInfo `json:"process_infos"`
	TaskID       string             `json:"bk_gse_taskid"`
}

// scope resolves the request's scope: bk_scope_type + bk_scope_id when
// either is given, else bk_biz_id.
func (r jobRequest) scope(v *model.Validator) (wire.Scope, bool) {
	if r.ScopeType != "" || r.ScopeID != nil {
		s := wire.Scope{Type: r.ScopeType}
		if r.ScopeID != nil {
			s.ID = string(*r.ScopeID)
		}
		before := len(v.Errors())
		s.Validate(v)
		return s, len(v.Errors()) == before
	}
	if r.BizID == nil {
		v.Add("bk_biz_id", "required (or bk_scope_type + bk_scope_id)")
		return wire.Scope{}, false
	}
	if *r.BizID <= 0 {
		v.Addf("bk_biz_id", "%d must be > 0", int64(*r.BizID))
		return wire.Scope{}, false
	}
	return wire.Scope{Type: wire.ScopeBiz, ID: strconv.FormatInt(int64(*r.BizID), 10)}, true
}

// jobOperate serves operate_proc (commands synthesised), operate_process
// (pass-through) and manage_proc (1 register, 2 unregister).
func (s *Server) jobOperate(form wire.InfoForm, name string) handlerFunc {
	return func(ctx context.Context, c *call) (any, *apiError) {
		var req jobRequest
		if err := decodeInto(c.body, c.obj, &req); err != nil {
			return nil, validationError(CodeArgument, err)
		}
		v := &model.Validator{}
		scope, ok := req.scope(v)
		if ok && !c.app.allowScope(scope) {
			return nil, scopeDenied(c.app, scope)
		}
		var op model.OpType
		switch {
		case req.OpType == nil:
			v.Add("op_type", "required")
		case form == wire.FormManageProc:
			o, ok := model.ManageOp(*req.OpType).ToOpType()
			if !ok {
				v.Addf("op_type", "%d is not one of 1 register, 2 unregister", *req.OpType)
			}
			op = o
		default:
			op = model.OpType(*req.OpType)
			if !op.Valid() {
				_, err := model.ParseOp(strconv.Itoa(*req.OpType))
				v.Add("op_type", err.Error())
			}
		}
		procs := wire.ValidateInfos(v, form, scope, req.ProcessInfos, s.cfg.MaxHosts)
		items, sup := mergeItems(v, req.ProcessInfos, procs)
		if err := v.Err(); err != nil {
			return nil, validationError(CodeIllegalParam, err)
		}
		t, err := s.operate(ctx, backend.OperateRequest{Op: op, Items: items, Source: "api:" + name, Operator: c.operator, Suppliers: sup})
		if err != nil {
			return nil, backendError(CodeIllegalParam, name, err)
		}
		return map[string]string{"bk_gse_taskid": t.ID}, nil
	}
}

// mergeItems turns process_infos into definitions with their hosts; entries
// naming the same process (same value_key in the scope) merge when their
// fields are the same and are refused in v when they differ. sup holds the
// supplier ids the hosts were given. procs holds each entry's definition
// (wire.ValidateInfos).
func mergeItems(v *model.Validator, infos []wire.ProcessInfo, procs []model.Process) (items []model.ProcessDef, sup map[string]int) {
	index := map[string]int{} // process key -> its item
	first := map[string]int{} // process key -> its first entry
	for i, pi := range infos {
		p := procs[i]
		hosts := pi.Hosts()
		sup = wire.Suppliers(sup, pi.IPList)
		if j, ok := index[p.Key()]; ok {
			if p.Meta.Name != "" && !sameProcess(items[j].Process, p) {
				v.Addf(fmt.Sprintf("process_infos[%d]", i), "same process (value_key %q) as process_infos[%d] with different fields: give it its own value_key", p.Meta.Name, first[p.Key()])
			}
			items[j].Hosts = unionHosts(items[j].Hosts, hosts)
			continue
		}
		index[p.Key()], first[p.Key()] = len(items), i
		items = append(items, model.ProcessDef{Process: p, Hosts: unionHosts(nil, hosts)})
	}
	return items, sup
}

// unionHosts is a's hosts then b's, each agent once (the first seen).
func unionHosts(a, b []model.Host) []model.Host {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]model.Host, 0, len(a)+len(b))
	for _, hs := range [][]model.Host{a, b} {
		for _, h := range hs {
			if id := h.AgentID(); !seen[id] {
				seen[id] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// entry is one per-host result of the GSE family: content is the JSON
// text the agent produced.
type entry struct {
	Code    int    `json:"error_code"`
	Message string `json:"error_msg"`
	Content string `json:"content"`
}

// jobEntry is one per-host result of JOB get_proc_result: content parsed.
type jobEntry struct {
	Content json.RawMessage `json:"content"`
	Code    int             `json:"error_code"`
	Message string          `json:"error_msg"`
}

// resultEntry is a result as the result queries show it: 115 "handling"
// until final.
func resultEntry(r model.Result) entry {
	if !r.State.Final() {
		return entry{Code: model.CodeRunning, Message: model.CodeText(model.CodeRunning), Content: ""}
	}
	msg := r.Message
	if msg == "" {
		msg = model.CodeText(r.Code)
	}
	return entry{Code: r.Code, Message: msg, Content: wire.Content(r)}
}

// dispatched reports whether any host of the task has been contacted (or
// the task is over): until then the result queries answer 1000115.
func dispatched(tv backend.TaskView) bool {
	if tv.Task.Status == model.TaskPending {
		return false
	}
	if tv.Task.Status.Final() {
		return true
	}
	if len(tv.Results) == 0 {
		return tv.Task.Targets == 0
	}
	for _, r := range tv.Results {
		if r.State != model.StatePending {
			return true
		}
	}
	return false
}

// valueKey is the process_infos index key of a result: value_key, or the
// name of its "namespace:name".
func valueKey(r model.Result) string {
	if r.ValueKey != "" {
		return r.ValueKey
	}
	_, name, _ := model.SplitKey(r.ProcKey)
	return name
}

// jobResult serves get_proc_result: data {status, result{"{value_key}:{cloud}:{ip}":
// {content (parsed JSON), error_code, error_msg}}}. As JOB does, the
// envelope is a success while the task runs; data.status is 1000115 until
// the task is dispatched, 115 while a host is still running, 0 when over.
func (s *Server) jobResult(ctx context.Context, c *call) (any, *apiError) {
	var req jobRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	scope, ok := req.scope(v)
	if ok && !c.app.allowScope(scope) {
		return nil, scopeDenied(c.app, scope)
	}
	if strings.TrimSpace(req.TaskID) == "" {
		v.Add("bk_gse_taskid", "required")
	} else if _, _, err := model.ParseTaskID(req.TaskID); err != nil {
		v.Add("bk_gse_taskid", err.Error())
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeIllegalParam, err)
	}
	tv, err := s.b.Task(ctx, req.TaskID)
	if err != nil || !slices.Contains(taskNamespaces(tv), scope.Namespace()) {
		if err == nil || isNotFound(err) {
			return nil, &apiError{status: http.StatusBadRequest, code: CodeIllegalParam,
				msg: fmt.Sprintf("bk_gse_taskid: no task %s in %s %s", req.TaskID, scope.Type, scope.ID)}
		}
		return nil, backendError(CodeGSE, "get_proc_result", err)
	}
	status := 0
	switch {
	case !dispatched(tv):
		status = model.CodeTaskNotDispatched
	case !tv.Task.Status.Final():
		status = model.CodeRunning
	}
	out := make(map[string]jobEntry, len(tv.Results))
	for _, r := range tv.Results {
		e := resultEntry(r)
		content := json.RawMessage(`""`) // rendered by wire: JSON when not empty
		if e.Content != "" {
			content = json.RawMessage(e.Content)
		}
		out[valueKey(r)+":"+r.Host.AgentID()] = jobEntry{Content: content, Code: e.Code, Message: e.Message}
	}
	return map[string]any{"status": status, "result": out}, nil
}

// taskNamespaces lists the namespaces a task touches.
func taskNamespaces(tv backend.TaskView) []string {
	out := append([]string(nil), tv.Task.Namespace...)
	for _, r := range tv.Results {
		if ns, _, ok := model.SplitKey(r.ProcKey); ok && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, model.ErrNotFound) }
