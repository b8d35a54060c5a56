package server

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// The agent endpoints real clients call besides process operations:
// GSE 1.x get_agent_status / get_agent_info (keyed "cloud:ip"), GSE 2.0
// cluster/list_agent_state / list_agent_info and proc/upgrade_to_agent_id,
// and task/get_task_state. Agents are not namespaced: any authenticated app
// may read their state, as the native API's host list.

// agentRequest is the body of the agent endpoints; each reads its fields.
type agentRequest struct {
	SupplierAccount *flexString `json:"bk_supplier_account"`
	Hosts           []wire.Host `json:"hosts"`
	AgentIDList     []string    `json:"agent_id_list"`
	TaskID          string      `json:"task_id"`
}

// GSE 2.0 agent status codes (gse-api.md §6; the codes both clients agree
// on). Only agents the server hears from are listed: an offline or unknown
// agent is left out, which clients read as "not found" (not alive).
const (
	agentStatusRunning = 2
	agentStatusLossy   = 3
)

// CodeAgentsNotFound is list_agent_state's code when none of agent_id_list
// is known (gse-api.md §7.2).
const CodeAgentsNotFound = 1011003

// hostsRequest decodes a GSE 1.x hosts request (hosts required).
func (s *Server) hostsRequest(c *call) ([]model.Host, *apiError) {
	var req agentRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if len(req.Hosts) == 0 {
		v.Add("hosts", "required: at least one host")
	}
	hosts := wire.CanonicalHosts(v, "hosts", req.Hosts)
	s.checkHosts(v, "hosts", len(req.Hosts))
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	return hosts, nil
}

// fleetViews returns the fleet's view of hosts by "cloud:ip", only of the
// hosts the app sees (the others read as unknown).
func (s *Server) fleetViews(ctx context.Context, c *call, what string, q backend.HostQuery) (map[string]backend.HostView, *apiError) {
	views, err := s.b.Hosts(ctx, q)
	if err != nil {
		return nil, backendError(CodeGSE, what, err)
	}
	out := make(map[string]backend.HostView, len(views))
	for _, hv := range views {
		if !c.app.seesHost(hv) {
			continue
		}
		hv.Procs = nil
		out[hv.Host.AgentID()] = hv
	}
	return out, nil
}

// gseAgentStatus serves gse/get_agent_status: data {"cloud:ip": {ip,
// bk_cloud_id, bk_agent_alive}} for every host asked; 1 when its agent is
// online, 0 when offline, degraded or never heard from.
func (s *Server) gseAgentStatus(ctx context.Context, c *call) (any, *apiError) {
	hosts, aerr := s.hostsRequest(c)
	if aerr != nil {
		return nil, aerr
	}
	views, aerr := s.fleetViews(ctx, c, "get_agent_status", backend.HostQuery{Hosts: hosts})
	if aerr != nil {
		return nil, aerr
	}
	type status struct {
		IP      string `json:"ip"`
		CloudID int    `json:"bk_cloud_id"`
		Alive   int    `json:"bk_agent_alive"`
	}
	out := make(map[string]status, len(hosts))
	for _, h := range hosts {
		st := status{IP: h.IP, CloudID: h.CloudID}
		if hv, ok := views[h.AgentID()]; ok && hv.State == model.AgentOnline {
			st.Alive = 1
		}
		out[h.AgentID()] = st
	}
	return out, nil
}

// gseAgentInfo serves gse/get_agent_info: data {"cloud:ip": {ip,
// bk_cloud_id, version, parent_ip, parent_port, bk_agent_id}} for each host
// asked whose agent has reported (its last heartbeat); a host never heard
// from has no entry. Agents report straight to the server: parent_ip is ""
// and parent_port 0 (no proxy tier).
func (s *Server) gseAgentInfo(ctx context.Context, c *call) (any, *apiError) {
	hosts, aerr := s.hostsRequest(c)
	if aerr != nil {
		return nil, aerr
	}
	views, aerr := s.fleetViews(ctx, c, "get_agent_info", backend.HostQuery{Hosts: hosts})
	if aerr != nil {
		return nil, aerr
	}
	type info struct {
		IP         string `json:"ip"`
		CloudID    int    `json:"bk_cloud_id"`
		Version    string `json:"version"`
		ParentIP   string `json:"parent_ip"`
		ParentPort int    `json:"parent_port"`
		AgentID    string `json:"bk_agent_id"`
	}
	out := map[string]info{}
	for _, h := range hosts {
		if hv, ok := views[h.AgentID()]; ok && hv.State != model.AgentUnknown {
			out[h.AgentID()] = info{IP: h.IP, CloudID: h.CloudID, Version: hv.Version, AgentID: hv.AgentID}
		}
	}
	return out, nil
}

// agentListRequest decodes agent_id_list (required; "cloud:ip" or agent
// ids) and returns the fleet's view of each entry, by entry; entries no
// agent answers for are absent.
func (s *Server) agentListRequest(ctx context.Context, c *call, what string) ([]string, map[string]backend.HostView, *apiError) {
	var req agentRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if len(req.AgentIDList) == 0 {
		v.Add("agent_id_list", "required: at least one agent id (or cloud:ip)")
	}
	s.checkHosts(v, "agent_id_list", len(req.AgentIDList))
	refs := make([]wire.HostRef, len(req.AgentIDList))
	var ids []string
	var hosts []model.Host
	for i, e := range req.AgentIDList {
		r, err := wire.ParseHostRef(e)
		if err != nil {
			v.Addf(fmt.Sprintf("agent_id_list[%d]", i), "%v", err)
			continue
		}
		refs[i] = r
		if r.AgentID != "" {
			ids = append(ids, r.AgentID)
		} else {
			hosts = append(hosts, r.Host)
		}
	}
	if err := v.Err(); err != nil {
		return nil, nil, validationError(CodeArgument, err)
	}
	found := map[string]backend.HostView{}
	if len(ids) > 0 {
		views, err := s.b.Hosts(ctx, backend.HostQuery{AgentIDs: ids})
		if err != nil {
			return nil, nil, backendError(CodeGSE, what, err)
		}
		for _, hv := range views {
			if !c.app.seesHost(hv) {
				continue
			}
			hv.Procs = nil
			found[hv.AgentID] = hv
		}
	}
	if len(hosts) > 0 {
		byHost, aerr := s.fleetViews(ctx, c, what, backend.HostQuery{Hosts: hosts})
		if aerr != nil {
			return nil, nil, aerr
		}
		for k, hv := range byHost {
			found[k] = hv
		}
	}
	entries := make([]string, 0, len(refs))
	seen := map[string]bool{}
	for _, r := range refs {
		k := r.String()
		if hv, ok := found[k]; ok && !seen[k] && (hv.State == model.AgentOnline || hv.State == model.AgentDegraded) {
			seen[k] = true
			entries = append(entries, k)
		}
	}
	return entries, found, nil
}

func agentStatusCode(st model.AgentState) int {
	if st == model.AgentDegraded {
		return agentStatusLossy
	}
	return agentStatusRunning
}

// notFound is list_agent_state's refusal when no entry is known.
func agentsNotFound(what string) *apiError {
	return &apiError{status: http.StatusOK, code: CodeAgentsNotFound,
		msg: what + ": none of agent_id_list is an agent this server hears from", data: []any{}}
}

// gse2ListAgentState serves cluster/list_agent_state: data [{bk_agent_id
// (as asked), bk_cloud_id, version, run_mode, status_code}] for the agents
// the server hears from (2 running, 3 degraded); 1011003 when none is.
func (s *Server) gse2ListAgentState(ctx context.Context, c *call) (any, *apiError) {
	entries, found, aerr := s.agentListRequest(ctx, c, "list_agent_state")
	if aerr != nil {
		return nil, aerr
	}
	if len(entries) == 0 {
		return nil, agentsNotFound("list_agent_state")
	}
	type state struct {
		AgentID    string `json:"bk_agent_id"`
		CloudID    int    `json:"bk_cloud_id"`
		Version    string `json:"version"`
		RunMode    int    `json:"run_mode"`
		StatusCode int    `json:"status_code"`
	}
	out := make([]state, 0, len(entries))
	for _, k := range entries {
		hv := found[k]
		out = append(out, state{AgentID: k, CloudID: hv.Host.CloudID, Version: hv.Version, StatusCode: agentStatusCode(hv.State)})
	}
	return out, nil
}

// gse2ListAgentInfo serves cluster/list_agent_info: list_agent_state's
// entries with the host's IP, labels and the time of its last heartbeat.
func (s *Server) gse2ListAgentInfo(ctx context.Context, c *call) (any, *apiError) {
	entries, found, aerr := s.agentListRequest(ctx, c, "list_agent_info")
	if aerr != nil {
		return nil, aerr
	}
	if len(entries) == 0 {
		return nil, agentsNotFound("list_agent_info")
	}
	type info struct {
		AgentID    string            `json:"bk_agent_id"`
		CloudID    int               `json:"bk_cloud_id"`
		IP         string            `json:"bk_host_innerip"`
		Version    string            `json:"version"`
		RunMode    int               `json:"run_mode"`
		StatusCode int               `json:"status_code"`
		LastUpdate int64             `json:"last_update_timestamp"`
		Labels     map[string]string `json:"labels"`
	}
	out := make([]info, 0, len(entries))
	for _, k := range entries {
		hv := found[k]
		labels := hv.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, info{AgentID: k, CloudID: hv.Host.CloudID, IP: hv.Host.IP, Version: hv.Version,
			StatusCode: agentStatusCode(hv.State), LastUpdate: hv.LastSeen, Labels: labels})
	}
	return out, nil
}

// upgradeRequest is upgrade_to_agent_id's body.
type upgradeRequest struct {
	Hosts []struct {
		IP      string `json:"ip"`
		CloudID int    `json:"bk_cloud_id"`
		AgentID string `json:"bk_agent_id"`
	} `json:"hosts"`
}

// gse2UpgradeToAgentID serves proc/upgrade_to_agent_id: data {success,
// failed}, each a list of "cloud:ip". gseproc's hosting state is keyed by
// namespace:name on each agent, never by IP, so there is nothing to move:
// a host succeeds when its agent reports the bk_agent_id given, and fails
// when it reports another id or none (offline hosts keep the id they last
// reported).
func (s *Server) gse2UpgradeToAgentID(ctx context.Context, c *call) (any, *apiError) {
	var req upgradeRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	v := &model.Validator{}
	if len(req.Hosts) == 0 {
		v.Add("hosts", "required: at least one host")
	}
	s.checkHosts(v, "hosts", len(req.Hosts))
	hosts := make([]model.Host, len(req.Hosts))
	ids := make([]string, len(req.Hosts))
	for i, h := range req.Hosts {
		f := fmt.Sprintf("hosts[%d]", i)
		hosts[i] = model.Host{IP: h.IP, CloudID: h.CloudID}.Canonicalize(v, f)
		id, err := model.CheckAgentID(h.AgentID)
		if err != nil {
			v.Add(f+".bk_agent_id", err.Error())
		}
		ids[i] = id
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	views, aerr := s.fleetViews(ctx, c, "upgrade_to_agent_id", backend.HostQuery{Hosts: hosts})
	if aerr != nil {
		return nil, aerr
	}
	success, failed := []string{}, []string{}
	for i, h := range hosts {
		if hv, ok := views[h.AgentID()]; ok && hv.AgentID == ids[i] {
			success = append(success, h.AgentID())
		} else {
			failed = append(failed, h.AgentID())
		}
	}
	return map[string][]string{"success": success, "failed": failed}, nil
}

// gse2TaskState serves task/get_task_state: data.result {state,
// successed_agents, timeout_agents, failed_agents, pending_agents,
// offline_agents, restarted_agents}. Agents are named as agent_id_list
// names them (every host of the task when it is empty, named as the task
// named them). A host is pending while any of its processes is, then
// timeout (116), offline (117), failed, or successed, in that order. state
// is pending until the task is dispatched, executing while it runs, then
// failed (some host failed or offline), timeout (some host timed out) or
// successed.
func (s *Server) gse2TaskState(ctx context.Context, c *call) (any, *apiError) {
	var req agentRequest
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	tv, aerr := s.taskForQuery(ctx, c, req.TaskID)
	if aerr != nil {
		return nil, aerr
	}
	v := &model.Validator{}
	refs := make([]wire.HostRef, 0, len(req.AgentIDList))
	for i, e := range req.AgentIDList {
		r, err := wire.ParseHostRef(e)
		if err != nil {
			v.Addf(fmt.Sprintf("agent_id_list[%d]", i), "%v", err)
		}
		refs = append(refs, r)
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	// Each host's outcome over its processes, by "cloud:ip".
	rank := map[string]int{"successed": 0, "failed": 1, "offline": 2, "timeout": 3, "pending": 4}
	outcome := map[string]string{}
	named := map[string]string{} // "cloud:ip" -> the host as the task named it (by agent id when any target did)
	for _, r := range tv.Results {
		k := r.Host.AgentID()
		if cur, ok := named[k]; !ok || cur == k {
			named[k] = r.HostRef()
		}
		o := "successed"
		switch {
		case !r.State.Final():
			o = "pending"
		case r.State == model.StateTimeout || r.Code == model.CodeTimeout:
			o = "timeout"
		case r.State == model.StateUnreachable || r.Code == model.CodeAgentAbnormal:
			o = "offline"
		case !r.State.OK():
			o = "failed"
		}
		if cur, ok := outcome[k]; !ok || rank[o] > rank[cur] {
			outcome[k] = o
		}
	}
	lists := map[string][]string{}
	for _, l := range []string{"successed", "timeout", "failed", "pending", "offline", "restarted"} {
		lists[l] = []string{}
	}
	add := func(k, name string) {
		if o, ok := outcome[k]; ok {
			lists[o] = append(lists[o], name)
		}
	}
	if len(refs) > 0 {
		idHosts, aerr := s.agentHosts(ctx, agentIDsOf(refs))
		if aerr != nil {
			return nil, aerr
		}
		for _, r := range refs {
			h := r.Host
			if r.AgentID != "" {
				h = idHosts[r.AgentID]
			}
			add(h.AgentID(), r.String())
		}
	} else {
		for k, name := range named {
			add(k, name)
		}
		for _, l := range lists {
			sort.Strings(l)
		}
	}
	state := "successed"
	switch {
	case !dispatched(tv):
		state = "pending"
	case !tv.Task.Status.Final():
		state = "executing"
	case len(lists["failed"]) > 0 || len(lists["offline"]) > 0 || tv.Task.Status == model.TaskFailed && len(lists["timeout"]) == 0:
		state = "failed"
	case len(lists["timeout"]) > 0:
		state = "timeout"
	}
	result := map[string]any{"state": state}
	for l, names := range lists {
		result[l+"_agents"] = names
	}
	return map[string]any{"result": result}, nil
}
