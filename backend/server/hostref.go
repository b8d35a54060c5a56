package server

import (
	"context"
	"fmt"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// Hosts named by agent id (GSE 2.0 agent_id_list) are resolved against the
// fleet: every agent reports its id in its heartbeats. A request's ids are
// resolved with one fleet query, however many elements name them.

// agentIDsOf lists the agent ids among refs.
func agentIDsOf(refs ...[]wire.HostRef) []string {
	var ids []string
	for _, rs := range refs {
		for _, r := range rs {
			if r.AgentID != "" {
				ids = append(ids, r.AgentID)
			}
		}
	}
	return ids
}

// agentHosts maps each known agent id to its host; an id two hosts report
// maps to the zero Host (ambiguous).
func (s *Server) agentHosts(ctx context.Context, ids []string) (map[string]model.Host, *apiError) {
	if len(ids) == 0 {
		return nil, nil
	}
	views, err := s.b.Hosts(ctx, backend.HostQuery{AgentIDs: ids})
	if err != nil {
		return nil, backendError(CodeGSE, "resolve agent ids", err)
	}
	out := make(map[string]model.Host, len(views))
	for _, hv := range views {
		if _, dup := out[hv.AgentID]; dup {
			out[hv.AgentID] = model.Host{}
			continue
		}
		out[hv.AgentID] = hv.Host
	}
	return out, nil
}

// hostsOf turns refs into hosts: an agent id becomes its agent's host; one
// no agent reports (or two do) is named in v under
// prefix + "agent_id_list[i]". byAgentID says whether any ref was an id.
func hostsOf(v *model.Validator, prefix string, refs []wire.HostRef, known map[string]model.Host) (hosts []model.Host, byAgentID bool) {
	hosts = make([]model.Host, 0, len(refs))
	for i, r := range refs {
		if r.AgentID == "" {
			hosts = append(hosts, r.Host)
			continue
		}
		byAgentID = true
		h, ok := known[r.AgentID]
		switch {
		case !ok:
			v.Addf(fmt.Sprintf("%sagent_id_list[%d]", prefix, i), "no agent with id %s has reported to this server", r.AgentID)
		case h.IP == "":
			v.Addf(fmt.Sprintf("%sagent_id_list[%d]", prefix, i), "agent id %s is reported by more than one host: refused until that is fixed", r.AgentID)
		default:
			hosts = append(hosts, h)
		}
	}
	return hosts, byAgentID
}

// hostForm is the task's HostForm for a request that did or did not name
// hosts by agent id.
func hostForm(byAgentID bool) string {
	if byAgentID {
		return model.HostFormAgentID
	}
	return ""
}

// resultAgentIDs returns the agent id of each host of a task whose hosts
// were named by agent id (keyed by "cloud:ip"); nil otherwise.
func (s *Server) resultAgentIDs(ctx context.Context, tv backend.TaskView) (map[string]string, *apiError) {
	if tv.Task.HostForm != model.HostFormAgentID {
		return nil, nil
	}
	seen := map[model.Host]bool{}
	var hosts []model.Host
	for _, r := range tv.Results {
		if h := r.Host; !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return s.hostAgentIDs(ctx, hosts)
}

// hostAgentIDs returns the agent id each of hosts reports, by "cloud:ip".
func (s *Server) hostAgentIDs(ctx context.Context, hosts []model.Host) (map[string]string, *apiError) {
	if len(hosts) == 0 {
		return map[string]string{}, nil
	}
	views, err := s.b.Hosts(ctx, backend.HostQuery{Hosts: hosts})
	if err != nil {
		return nil, backendError(CodeGSE, "agent ids of the task's hosts", err)
	}
	out := make(map[string]string, len(views))
	for _, hv := range views {
		if hv.AgentID != "" {
			out[hv.Host.AgentID()] = hv.AgentID
		}
	}
	return out, nil
}

// hostKey is the host part of a GSE 2.0 result key: the agent id when the
// task named hosts by agent id and the host has one, else "cloud:ip".
func hostKey(h model.Host, ids map[string]string) string {
	k := h.AgentID()
	if id := ids[k]; id != "" {
		return id
	}
	return k
}
