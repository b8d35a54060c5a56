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
// prefix + "agent_id_list[i]". named maps each host the refs named by agent
// id to that id (the first, when a host is named twice), so that replies
// key each host the way the request named it.
func hostsOf(v *model.Validator, prefix string, refs []wire.HostRef, known map[string]model.Host, named map[model.Host]string) (hosts []model.Host) {
	hosts = make([]model.Host, 0, len(refs))
	for i, r := range refs {
		if r.AgentID == "" {
			hosts = append(hosts, r.Host)
			continue
		}
		h, ok := known[r.AgentID]
		switch {
		case !ok:
			v.Addf(fmt.Sprintf("%sagent_id_list[%d]", prefix, i), "no agent with id %s has reported to this server", r.AgentID)
		case h.IP == "":
			v.Addf(fmt.Sprintf("%sagent_id_list[%d]", prefix, i), "agent id %s is reported by more than one host: refused until that is fixed", r.AgentID)
		default:
			hosts = append(hosts, h)
			if _, dup := named[h]; !dup {
				named[h] = r.AgentID
			}
		}
	}
	return hosts
}

// namedTargets lists the targets of process key on hosts that the request
// named by agent id (backend.OperateRequest.ByAgentID).
func namedTargets(key string, hosts []model.Host, named map[model.Host]string) []model.Target {
	var out []model.Target
	for _, h := range hosts {
		if id, ok := named[h]; ok {
			out = append(out, model.Target{Host: h, ProcKey: key, AgentID: id})
		}
	}
	return out
}
