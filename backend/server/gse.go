package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// metaRequest is the meta form (GSE 1.x through ESB): one body type for
// every endpoint of the family; each reads the fields it needs.
type metaRequest struct {
	wire.ProcRequest
	TaskID         string             `json:"task_id"`
	Page           *pageWire          `json:"page"`
	ProcOperateReq []wire.ProcRequest `json:"proc_operate_req"`
}

type pageWire struct {
	Start *int `json:"start"`
	Limit *int `json:"limit"`
}

// MaxSyncPage is sync_proc_status's largest page (gse-api.md §4.6).
const MaxSyncPage = 1000

// checkMeta validates meta.namespace (and meta.name) and refuses a
// namespace the app may not touch.
func checkMeta(v *model.Validator, c *call, m model.Meta, prefix string, nameRequired bool) *apiError {
	m.ValidateInto(v, strings.TrimSuffix(prefix, "."), nameRequired)
	return allowMeta(c, m, prefix)
}

// checkDefMeta is checkMeta for a request that carries a definition
// (register/update_proc_info, operate_proc_v2, operate_proc_multi): the
// name is held to the name rule (model.CheckDefName), as the engine will;
// a request that names a process stored earlier (checkMeta) is not, so a
// definition stored before the rule stays operable.
func checkDefMeta(v *model.Validator, c *call, m model.Meta, id model.Identity, prefix string) *apiError {
	m.ValidateDefInto(v, strings.TrimSuffix(prefix, "."), id)
	return allowMeta(c, m, prefix)
}

// allowMeta refuses a namespace the app may not touch.
func allowMeta(c *call, m model.Meta, prefix string) *apiError {
	if m.Namespace != "" && !c.app.allowNamespace(m.Namespace) {
		return namespaceDenied(c.app, prefix+"meta.namespace", m.Namespace)
	}
	return nil
}

func checkOp(v *model.Validator, field string, p *int) model.OpType {
	if p == nil {
		v.Add(field, "required")
		return 0
	}
	op := model.OpType(*p)
	if !op.Valid() {
		_, err := model.ParseOp(strconv.Itoa(*p))
		v.Add(field, err.Error())
	}
	return op
}

func (s *Server) checkHosts(v *model.Validator, field string, n int) {
	if n > s.cfg.MaxHosts {
		v.Addf(field, "%d hosts in one request, more than the limit of %d", n, s.cfg.MaxHosts)
	}
}

// policyNames names the policy fields as the request spelled the policy
// (alive_monitor_policy in operate_proc_v2/multi).
func policyNames(r wire.ProcRequest) model.FieldNames {
	if r.Spec == nil || r.Spec.MonitorPolicy != nil || r.Spec.AliveMonitorPolicy == nil {
		return nil
	}
	names := model.FieldNames{}
	for _, f := range []string{"auto_type", "start_check_secs", "start_check_end_secs", "stop_check_secs",
		"start_retries", "start_interval", "cycle_time", "instance_num", "op_timeout"} {
		names["spec.monitor_policy."+f] = "spec.alive_monitor_policy." + f
	}
	return names
}

// processLender is a backend that lends one definition of its registry
// without copying it (the engine, the node): a definition deployed on
// 10,000 hosts copied per operate_proc was most of the call's CPU.
type processLender interface {
	LendProcess(ctx context.Context, key string) (model.ProcessDef, bool, error)
}

// lent returns the definition namespace:name, if any, for reading only:
// it may be the registry's own.
func (s *Server) lent(ctx context.Context, ns, name string) (model.ProcessDef, bool, error) {
	if l, ok := s.b.(processLender); ok {
		return l.LendProcess(ctx, ns+":"+name)
	}
	return s.registered(ctx, ns, name)
}

// registered returns a copy of the definition namespace:name, if any.
func (s *Server) registered(ctx context.Context, ns, name string) (model.ProcessDef, bool, error) {
	defs, err := s.b.Processes(ctx, backend.ProcQuery{Namespace: ns, Name: name})
	if err != nil {
		return model.ProcessDef{}, false, err
	}
	for _, d := range defs {
		if d.Process.Meta.Namespace == ns && d.Process.Meta.Name == name {
			return d, true, nil
		}
	}
	return model.ProcessDef{}, false, nil
}

func (s *Server) started(t model.Task) (any, *apiError) {
	return map[string]string{"task_id": t.ID}, nil
}

// metaHostsRequest decodes and checks a meta + hosts request (operate_proc,
// unregister_proc_info, get_proc_status): meta (its name required when
// needName), the hosts or agent_id_list (agent ids resolved to hosts), and
// what extra checks; every bad field is named in one error. named holds
// the hosts the request named by agent id, with the id.
func (s *Server) metaHostsRequest(ctx context.Context, c *call, needName bool, extra func(*model.Validator, metaRequest)) (req metaRequest, hosts []model.Host, named map[model.Host]string, aerr *apiError) {
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return req, nil, nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if aerr := checkMeta(v, c, req.Meta, "", needName); aerr != nil {
		return req, nil, nil, aerr
	}
	if extra != nil {
		extra(v, req)
	}
	refs := req.Targets(v, "")
	s.checkHosts(v, "hosts", len(refs))
	if err := v.Err(); err != nil {
		return req, nil, nil, validationError(CodeArgument, err)
	}
	known, aerr := s.agentHosts(ctx, agentIDsOf(refs))
	if aerr != nil {
		return req, nil, nil, aerr
	}
	named = map[model.Host]string{}
	hosts = hostsOf(v, "", refs, known, named)
	if err := v.Err(); err != nil {
		return req, nil, nil, validationError(CodeArgument, err)
	}
	return req, hosts, named, nil
}

// gseOperate serves GSE operate_proc (v1, seed 004): meta + hosts + op_type
// on a process registered earlier; the commands come from its spec.
func (s *Server) gseOperate(ctx context.Context, c *call) (any, *apiError) {
	// The definition is read here and again by the engine resolving the
	// targets, with nothing written in between: one probe of the registry.
	ctx = backend.WithRegistryRead(ctx)
	var op model.OpType
	req, hosts, named, aerr := s.metaHostsRequest(ctx, c, true, func(v *model.Validator, req metaRequest) {
		op = checkOp(v, "op_type", req.OpType)
	})
	if aerr != nil {
		return nil, aerr
	}
	def, ok, err := s.lent(ctx, req.Meta.Namespace, req.Meta.Name)
	if err != nil {
		return nil, backendError(CodeGSE, "operate_proc", err)
	}
	if !ok {
		return nil, &apiError{status: http.StatusBadRequest, code: CodeArgument,
			msg: fmt.Sprintf("meta: process %s:%s is not registered: register it first with register_proc_info (or send its spec with operate_proc_v2)", req.Meta.Namespace, req.Meta.Name)}
	}
	deployed := s.hosts.Positions(def)
	v := &model.Validator{}
	for i, h := range hosts {
		if _, ok := deployed.Find(h); !ok {
			v.Addf(fmt.Sprintf("hosts[%d]", i), "process %s is not registered on host %s: register it there first with register_proc_info", def.Process.Key(), h.AgentID())
		}
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	t, err := s.operate(ctx, backend.OperateRequest{Op: op, Source: "api:gse.operate_proc", Operator: c.operator,
		Suppliers: wire.Suppliers(nil, req.Hosts),
		Selector:  backend.Selector{Namespace: req.Meta.Namespace, Name: req.Meta.Name, Hosts: hosts},
		ByAgentID: namedTargets(def.Process.Key(), hosts, named)})
	if err != nil {
		return nil, backendError(CodeArgument, "operate_proc", err)
	}
	return s.started(t)
}

// checkProcRequest validates one meta+spec element and returns its
// definition (without hosts) and the hosts as the element names them.
func (s *Server) checkProcRequest(v *model.Validator, c *call, r wire.ProcRequest, prefix string, needOp bool) (model.ProcessDef, model.OpType, []wire.HostRef, *apiError) {
	dot := prefix
	if dot != "" {
		dot += "."
	}
	var id model.Identity
	if r.Spec != nil {
		id = r.Spec.Identity
	}
	if aerr := checkDefMeta(v, c, r.Meta, id, dot); aerr != nil {
		return model.ProcessDef{}, 0, nil, aerr
	}
	var op model.OpType
	if needOp {
		op = checkOp(v, dot+"op_type", r.OpType)
	}
	refs := r.Targets(v, dot)
	if r.Spec == nil {
		v.Add(dot+"spec", "required: this call carries the definition (use operate_proc for a registered process)")
		return model.ProcessDef{}, op, refs, nil
	}
	p := r.ToProcess()
	p.ValidateSpecInto(v, prefix, policyNames(r)) // meta.namespace and meta.name: checkDefMeta above
	return model.ProcessDef{Process: p}, op, refs, nil
}

// singleProcRequest decodes and checks a meta request for one process
// (operate_proc_v2, register/update_proc_info): every bad field named.
// sup holds the supplier ids the hosts were given.
func (s *Server) singleProcRequest(ctx context.Context, c *call, needOp bool) (def model.ProcessDef, op model.OpType, hosts []model.Host, named map[model.Host]string, sup map[string]int, aerr *apiError) {
	var req metaRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return def, 0, nil, nil, nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	def, op, refs, aerr := s.checkProcRequest(v, c, req.ProcRequest, "", needOp)
	if aerr != nil {
		return def, 0, nil, nil, nil, aerr
	}
	s.checkHosts(v, "hosts", len(refs))
	if err := v.Err(); err != nil {
		return def, 0, nil, nil, nil, validationError(CodeArgument, err)
	}
	known, aerr := s.agentHosts(ctx, agentIDsOf(refs))
	if aerr != nil {
		return def, 0, nil, nil, nil, aerr
	}
	named = map[model.Host]string{}
	hosts = hostsOf(v, "", refs, known, named)
	if err := v.Err(); err != nil {
		return def, 0, nil, nil, nil, validationError(CodeArgument, err)
	}
	def.Hosts = unionHosts(nil, hosts)
	return def, op, hosts, named, wire.Suppliers(nil, req.Hosts), nil
}

// gseOperateV2 serves operate_proc_v2: meta + spec + hosts in one call.
func (s *Server) gseOperateV2(ctx context.Context, c *call) (any, *apiError) {
	def, op, hosts, named, sup, aerr := s.singleProcRequest(ctx, c, true)
	if aerr != nil {
		return nil, aerr
	}
	t, err := s.operate(ctx, backend.OperateRequest{Op: op, Items: []model.ProcessDef{def},
		Source: "api:gse.operate_proc_v2", Operator: c.operator, Suppliers: sup, ByAgentID: namedTargets(def.Process.Key(), hosts, named)})
	if err != nil {
		return nil, backendError(CodeArgument, "operate_proc_v2", err)
	}
	return s.started(t)
}

// gseOperateMulti serves operate_proc_multi: {proc_operate_req: [...]}, one
// task. Every element must carry the same op_type.
func (s *Server) gseOperateMulti(ctx context.Context, c *call) (any, *apiError) {
	var req metaRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if len(req.ProcOperateReq) == 0 {
		v.Add("proc_operate_req", "required: at least one element")
	}
	defs := make([]model.ProcessDef, len(req.ProcOperateReq))
	refs := make([][]wire.HostRef, len(req.ProcOperateReq))
	var op0 model.OpType
	n := 0
	for i, r := range req.ProcOperateReq {
		prefix := fmt.Sprintf("proc_operate_req[%d]", i)
		def, op, rs, aerr := s.checkProcRequest(v, c, r, prefix, true)
		if aerr != nil {
			return nil, aerr
		}
		defs[i], refs[i] = def, rs
		n += len(rs)
		if i == 0 {
			op0 = op
		} else if r.OpType != nil && req.ProcOperateReq[0].OpType != nil && op != op0 {
			v.Addf(prefix+".op_type", "%d differs from proc_operate_req[0].op_type %d: one call runs one op type", int(op), int(op0))
		}
	}
	s.checkHosts(v, "proc_operate_req", n)
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	known, aerr := s.agentHosts(ctx, agentIDsOf(refs...))
	if aerr != nil {
		return nil, aerr
	}
	var items []model.ProcessDef
	var sup map[string]int
	var byID []model.Target
	index := map[string]int{}
	for i, r := range req.ProcOperateReq {
		prefix := fmt.Sprintf("proc_operate_req[%d]", i)
		named := map[model.Host]string{} // per element: each names its hosts its own way
		hosts := hostsOf(v, prefix+".", refs[i], known, named)
		byID = append(byID, namedTargets(r.Meta.Namespace+":"+r.Meta.Name, hosts, named)...)
		sup = wire.Suppliers(sup, r.Hosts)
		if r.Spec == nil {
			continue
		}
		def := defs[i]
		def.Hosts = unionHosts(nil, hosts)
		key := def.Process.Key()
		if j, ok := index[key]; ok {
			if !sameProcess(items[j].Process, def.Process) {
				v.Addf(prefix+".spec", "process %s also appears with a different spec earlier in proc_operate_req", key)
				continue
			}
			items[j].Hosts = unionHosts(items[j].Hosts, def.Hosts)
			continue
		}
		index[key] = len(items)
		items = append(items, def)
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	t, err := s.operate(ctx, backend.OperateRequest{Op: op0, Items: items,
		Source: "api:gse.operate_proc_multi", Operator: c.operator, Suppliers: sup, ByAgentID: byID})
	if err != nil {
		return nil, backendError(CodeArgument, "operate_proc_multi", err)
	}
	return s.started(t)
}

func sameProcess(a, b model.Process) bool { return a.Spec == b.Spec }

// taskForQuery loads a task for a result query and checks the app may see it.
func (s *Server) taskForQuery(ctx context.Context, c *call, id string) (backend.TaskView, *apiError) {
	v := &model.Validator{}
	if strings.TrimSpace(id) == "" {
		v.Add("task_id", "required")
	} else if _, _, err := model.ParseTaskID(id); err != nil {
		v.Add("task_id", err.Error())
	}
	if err := v.Err(); err != nil {
		return backend.TaskView{}, validationError(CodeArgument, err)
	}
	tv, err := s.b.Task(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return tv, &apiError{status: http.StatusBadRequest, code: CodeArgument, msg: fmt.Sprintf("task_id: no task %s", id)}
		}
		return tv, backendError(CodeGSE, "task "+id, err)
	}
	for _, ns := range taskNamespaces(tv) {
		if !c.app.allowNamespace(ns) {
			return tv, namespaceDenied(c.app, "task_id", ns)
		}
	}
	return tv, nil
}

// gseResult serves get_proc_operate_result (v1 keys
// cloud:supplier:ip:namespace:name) and _v2 (cloud:ip:namespace:name).
// Top-level code 1000115 until the task is dispatched; entries 115 until
// their host answers.
func (s *Server) gseResult(v1 bool) handlerFunc {
	return func(ctx context.Context, c *call) (any, *apiError) {
		var req metaRequest
		if err := decodeInto(c.body, c.obj, &req); err != nil {
			return nil, validationError(CodeArgument, err)
		}
		tv, aerr := s.taskForQuery(ctx, c, req.TaskID)
		if aerr != nil {
			return nil, aerr
		}
		if !dispatched(tv) {
			return nil, &apiError{status: http.StatusOK, code: CodeTaskNotDispatched,
				msg: fmt.Sprintf("task %s is waiting to be dispatched; poll again", tv.Task.ID), data: map[string]entry{}}
		}
		out := make(map[string]entry, len(tv.Results))
		for _, r := range tv.Results {
			ns, name, _ := model.SplitKey(r.ProcKey)
			key := r.HostRef() + ":" + ns + ":" + name
			if v1 {
				key = v1Key(r.Host, tv.Task.Suppliers, ns, name)
			}
			out[key] = resultEntry(r)
		}
		return out, nil
	}
}

// v1Key is a v1 result key cloud:supplier:ip:namespace:name; sup holds
// the supplier ids the request gave (wire.Suppliers).
func v1Key(h model.Host, sup map[string]int, ns, name string) string {
	return groupKey(h, sup, ns) + ":" + name
}

type infoKind int

const (
	infoRegister infoKind = iota
	infoUpdate
)

// saveDef re-reads namespace:name, lets change edit it and saves it,
// retrying when the definition changed in between.
func (s *Server) saveDef(ctx context.Context, ns, name string, change func(def *model.ProcessDef, exists bool) (save bool)) error {
	var err error
	for range 5 {
		def, ok, rerr := s.registered(ctx, ns, name)
		if rerr != nil {
			return rerr
		}
		if !change(&def, ok) {
			return nil
		}
		if len(def.Hosts) == 0 && ok {
			err = s.b.DeleteProcess(ctx, ns+":"+name)
			if isNotFound(err) {
				err = nil
			}
		} else {
			err = s.b.SaveProcess(ctx, def)
		}
		if !errors.Is(err, model.ErrConflict) {
			return err
		}
	}
	return err
}

// gseProcInfo serves register_proc_info (850 for hosts already
// registered) and update_proc_info (upsert): synchronous, one entry per
// host keyed cloud:supplier:ip:namespace:name. Only the registry changes;
// the agents get the definition with the next operation.
func (s *Server) gseProcInfo(kind infoKind) handlerFunc {
	name := map[infoKind]string{infoRegister: "register_proc_info", infoUpdate: "update_proc_info"}[kind]
	return func(ctx context.Context, c *call) (any, *apiError) {
		def, _, hosts, _, sup, aerr := s.singleProcRequest(ctx, c, false)
		if aerr != nil {
			return nil, aerr
		}
		ns, pname := def.Process.Meta.Namespace, def.Process.Meta.Name
		out := map[string]entry{}
		err := s.saveDef(ctx, ns, pname, func(cur *model.ProcessDef, exists bool) bool {
			clear(out)
			have := map[string]bool{}
			if exists {
				for _, h := range cur.Hosts {
					have[h.AgentID()] = true
				}
			} else {
				*cur = model.ProcessDef{Process: def.Process}
			}
			if kind == infoUpdate {
				cur.Process = def.Process
			}
			add := make([]model.Host, 0, len(hosts))
			for _, h := range hosts {
				k := v1Key(h, sup, ns, pname)
				if kind == infoRegister && have[h.AgentID()] {
					out[k] = entry{Code: model.CodeAlreadyRegistered, Message: model.CodeText(model.CodeAlreadyRegistered)}
					continue
				}
				out[k] = entry{Code: 0, Message: "success"}
				add = append(add, h)
			}
			cur.Hosts = unionHosts(cur.Hosts, add) // once: a union per host was quadratic in the request's hosts
			return true
		})
		if err != nil {
			return nil, backendError(CodeArgument, name, err)
		}
		return out, nil
	}
}

// gseUnregister serves unregister_proc_info: the agents stop hosting the
// process (op 4, waited for up to sync_timeout), then the hosts leave the
// definition (which is deleted with its last host). Entries: the agent's
// code, 115 if it did not answer in time.
func (s *Server) gseUnregister(ctx context.Context, c *call) (any, *apiError) {
	req, hosts, _, aerr := s.metaHostsRequest(ctx, c, true, nil)
	if aerr != nil {
		return nil, aerr
	}
	sup := wire.Suppliers(nil, req.Hosts)
	ns, name := req.Meta.Namespace, req.Meta.Name
	def, ok, err := s.lent(ctx, ns, name)
	if err != nil {
		return nil, backendError(CodeGSE, "unregister_proc_info", err)
	}
	deployed := map[string]bool{}
	if ok {
		for _, h := range def.Hosts {
			deployed[h.AgentID()] = true
		}
	}
	out := map[string]entry{}
	var targets []model.Host
	for _, h := range hosts {
		if deployed[h.AgentID()] {
			targets = append(targets, h)
			continue
		}
		out[v1Key(h, sup, ns, name)] = entry{Code: 0, Message: "success: not registered on this host"}
	}
	if len(targets) == 0 {
		return out, nil
	}
	t, err := s.operate(ctx, backend.OperateRequest{Op: model.OpUnregister, Source: "api:gse.unregister_proc_info",
		Operator: c.operator, Selector: backend.Selector{Namespace: ns, Name: name, Hosts: targets}})
	if err != nil {
		return nil, backendError(CodeArgument, "unregister_proc_info", err)
	}
	results := s.waitTask(ctx, t.ID)
	remove := map[string]bool{}
	for _, h := range hosts {
		if !deployed[h.AgentID()] {
			continue
		}
		r, ok := results[h.AgentID()]
		if !ok {
			out[v1Key(h, sup, ns, name)] = entry{Code: model.CodeRunning, Message: model.CodeText(model.CodeRunning)}
			continue
		}
		out[v1Key(h, sup, ns, name)] = resultEntry(r)
		if r.State.OK() {
			remove[h.AgentID()] = true
		}
	}
	if len(remove) > 0 {
		err := s.saveDef(ctx, ns, name, func(cur *model.ProcessDef, exists bool) bool {
			if !exists {
				return false
			}
			kept := cur.Hosts[:0:0]
			for _, h := range cur.Hosts {
				if !remove[h.AgentID()] {
					kept = append(kept, h)
				}
			}
			cur.Hosts = kept
			return true
		})
		if err != nil {
			return nil, backendError(CodeGSE, "unregister_proc_info: update registry", err)
		}
	}
	return out, nil
}

// waitTask waits (up to sync_timeout) for a task's results and returns
// them by agent id.
func (s *Server) waitTask(ctx context.Context, id string) map[string]model.Result {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout.D())
	defer cancel()
	out := map[string]model.Result{}
	if ch, err := s.b.Watch(wctx, id, 0); err == nil {
		for r := range ch {
			out[r.Host.AgentID()] = r
		}
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if tv, err := s.b.Task(rctx, id); err == nil {
		for _, r := range tv.Results {
			if r.State.Final() {
				out[r.Host.AgentID()] = r
			}
		}
	}
	return out
}

// procInfo is one entry of get_proc_status / sync_proc_status (§4.5).
type procInfo struct {
	Meta          model.Meta `json:"meta"`
	Host          wire.Host  `json:"host"`
	AgentID       string     `json:"bk_agent_id"`
	Flag          int        `json:"flag"`
	Status        int        `json:"status"`
	IsAuto        bool       `json:"isauto"`
	Message       string     `json:"message"`
	PID           int        `json:"pid"`
	Version       string     `json:"version"`
	RegisterTime  int64      `json:"register_time"`
	LastStartTime int64      `json:"last_start_time"`
	ReportTime    int64      `json:"report_time"`
	CPUUsage      float64    `json:"cpu_usage"`
	MemUsage      float64    `json:"mem_usage"`
	FD            int        `json:"fd"`
	Disk          int        `json:"disk"`
	Net           int        `json:"net"`
}

// Proc status values (flag: expected, status: dynamic).
const (
	procUnregistered = 0
	procRunning      = 1
	procStopped      = 2
)

// toProcInfo is pv on host h (with its v1 supplier id, 0 for none);
// agentID is bk_agent_id ("cloud:ip" when empty).
func toProcInfo(h model.Host, supplier int, agentID string, pv backend.ProcView) procInfo {
	ns, name, _ := model.SplitKey(pv.Key)
	st := pv.Status
	if agentID == "" {
		agentID = h.AgentID()
	}
	pi := procInfo{Meta: model.Meta{Namespace: ns, Name: name, Labels: pv.Labels}, Host: wire.Host{IP: h.IP, CloudID: h.CloudID, SupplierID: supplier}, AgentID: agentID,
		Flag: procStopped, Status: procStopped, IsAuto: st.Hosted, Message: st.Message, PID: st.PID, Version: st.Version,
		RegisterTime: st.RegisterTime, LastStartTime: st.LastStartTime, ReportTime: st.ReportTime,
		CPUUsage: st.CPU, MemUsage: st.Mem}
	if pi.Meta.Labels == nil {
		pi.Meta.Labels = map[string]string{}
	}
	if st.Hosted {
		pi.Flag = procRunning
	}
	if st.State.Up() {
		pi.Status = procRunning
	} else if pi.PID == 0 {
		pi.PID = -1
	}
	if pi.ReportTime == 0 {
		pi.ReportTime = pv.Updated
	}
	return pi
}

// gseStatus serves get_proc_status (v1: hosts with bk_supplier_id) and
// get_proc_status_v2: the last known state of meta's processes on the
// hosts; a host without the process has no entry (unregistered).
// bk_agent_id is each host as the request named it: by its agent id, or
// "cloud:ip".
func (s *Server) gseStatus(v1 bool) handlerFunc {
	return func(ctx context.Context, c *call) (any, *apiError) {
		req, hosts, named, aerr := s.metaHostsRequest(ctx, c, false, nil)
		if aerr != nil {
			return nil, aerr
		}
		views, err := s.b.Hosts(ctx, backend.HostQuery{Namespace: req.Meta.Namespace, Name: req.Meta.Name, Hosts: hosts})
		if err != nil {
			return nil, backendError(CodeGSE, "get_proc_status", err)
		}
		var sup map[string]int
		if v1 {
			sup = wire.Suppliers(nil, req.Hosts)
		}
		asked := map[string]model.Host{}
		for _, h := range hosts {
			asked[h.AgentID()] = h
		}
		infos := []procInfo{}
		for _, hv := range views {
			h, ok := asked[hv.Host.AgentID()]
			if !ok {
				continue
			}
			id := named[hv.Host]
			for _, pv := range hv.Procs {
				if matchProc(pv.Key, req.Meta) {
					infos = append(infos, toProcInfo(h, sup[h.AgentID()], id, pv))
				}
			}
		}
		sortInfos(infos)
		return map[string]any{"proc_infos": infos}, nil
	}
}

func matchProc(key string, m model.Meta) bool {
	ns, name, _ := model.SplitKey(key)
	return ns == m.Namespace && (m.Name == "" || name == m.Name)
}

func sortInfos(infos []procInfo) {
	sort.Slice(infos, func(i, j int) bool {
		a, b := infos[i], infos[j]
		if a.Meta.Name != b.Meta.Name {
			return a.Meta.Name < b.Meta.Name
		}
		return model.CompareHosts(a.Host.Model(), b.Host.Model()) < 0
	})
}

// gseSync serves sync_proc_status: every process of meta.namespace (and
// meta.name) on every host, paged by page{start, limit<=1000}:
// data{count, proc_infos}.
func (s *Server) gseSync(ctx context.Context, c *call) (any, *apiError) {
	var req metaRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if aerr := checkMeta(v, c, req.Meta, "", false); aerr != nil {
		return nil, aerr
	}
	start, limit := 0, MaxSyncPage
	if req.Page != nil {
		if req.Page.Start != nil {
			start = *req.Page.Start
		}
		if req.Page.Limit != nil {
			limit = *req.Page.Limit
		}
	}
	if start < 0 {
		v.Addf("page.start", "%d must be >= 0", start)
	}
	if limit < 1 || limit > MaxSyncPage {
		v.Addf("page.limit", "%d is out of range [1,%d]", limit, MaxSyncPage)
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	views, err := s.b.Hosts(ctx, backend.HostQuery{Namespace: req.Meta.Namespace, Name: req.Meta.Name})
	if err != nil {
		return nil, backendError(CodeGSE, "sync_proc_status", err)
	}
	infos := []procInfo{}
	for _, hv := range views {
		for _, pv := range hv.Procs {
			if matchProc(pv.Key, req.Meta) {
				infos = append(infos, toProcInfo(hv.Host, 0, hv.AgentID, pv))
			}
		}
	}
	sortInfos(infos)
	count := len(infos)
	if start > count {
		start = count
	}
	end := min(start+limit, count)
	return map[string]any{"count": count, "proc_infos": infos[start:end]}, nil
}
