package server

import (
	"context"
	"strconv"

	"gseproc/backend"
	"gseproc/backend/server/wire"
	"gseproc/model"
)

// Process groups (gse-api.md §4.8): set_process_group_info sets the
// resource pool of meta.namespace's processes on each host, synchronously
// (each host's agent takes it at once and enforces it); get_process_group_info
// reads what is set. A group is the processes of one namespace on one
// host: its id is the namespace (the agent's events name the group so,
// process_group_id), so spec.process_group holds at most one group, whose
// id must be meta.namespace; an empty list clears the group.

// groupWire is the body of both endpoints.
type groupWire struct {
	Meta  model.Meta  `json:"meta"`
	Hosts []wire.Host `json:"hosts"`
	Spec  *struct {
		ProcessGroup []struct {
			ID       *string              `json:"id"`
			Resource *model.GroupResource `json:"resource"`
		} `json:"process_group"`
	} `json:"spec"`
}

// groupRequest decodes the body of either endpoint and checks what they
// share: meta (a namespace the app may touch) and hosts, canonical (the
// supplier ids left out). Bad fields are recorded in v, for the caller to
// add its own and refuse them all at once.
func (s *Server) groupRequest(v *model.Validator, c *call) (groupWire, []model.Host, *apiError) {
	var req groupWire
	if err := decodeInto(c.body, c.obj, &req); err != nil {
		return req, nil, validationError(CodeArgument, err)
	}
	if aerr := checkMeta(v, c, req.Meta, "", false); aerr != nil {
		return req, nil, aerr
	}
	hosts := wire.CanonicalHosts(v, "hosts", req.Hosts)
	s.checkHosts(v, "hosts", len(req.Hosts))
	return req, hosts, nil
}

// groupKey is set_process_group_info's key cloud:supplier:ip:namespace
// (a v1 result key without the process name, see v1Key); sup holds the
// supplier ids the request gave (wire.Suppliers).
func groupKey(h model.Host, sup map[string]int, ns string) string {
	return strconv.Itoa(h.CloudID) + ":" + strconv.Itoa(sup[h.AgentID()]) + ":" + h.IP + ":" + ns
}

// gseSetGroup serves set_process_group_info: data {"cloud:supplier:ip:ns":
// {error_code, error_msg, content}}, one entry per host: 0 when its agent
// took the group, 117 when it is unreachable, 116 when it did not answer
// in time (the group is then not stored for it).
func (s *Server) gseSetGroup(ctx context.Context, c *call) (any, *apiError) {
	v := &model.Validator{}
	req, hosts, aerr := s.groupRequest(v, c)
	if aerr != nil {
		return nil, aerr
	}
	ns := req.Meta.Namespace
	if req.Meta.Name != "" {
		v.Addf("meta.name", "%q: a process group covers the whole namespace; leave meta.name empty", req.Meta.Name)
	}
	if len(req.Hosts) == 0 {
		v.Add("hosts", "required: at least one host")
	}
	var res model.GroupResource
	switch {
	case req.Spec == nil || req.Spec.ProcessGroup == nil:
		v.Add("spec.process_group", "required: the namespace's group, or [] to clear it")
	case len(req.Spec.ProcessGroup) > 1:
		v.Addf("spec.process_group", "%d groups: a namespace has one process group on a host (its id is the namespace)", len(req.Spec.ProcessGroup))
	case len(req.Spec.ProcessGroup) == 1:
		g := req.Spec.ProcessGroup[0]
		switch {
		case g.ID == nil:
			v.Add("spec.process_group[0].id", "required: the namespace, "+strconv.Quote(ns))
		case *g.ID != ns:
			v.Addf("spec.process_group[0].id", "%q differs from meta.namespace %q: a process group is the processes of one namespace on a host, and its id is that namespace", *g.ID, ns)
		}
		if g.Resource == nil {
			v.Add("spec.process_group[0].resource", "required")
		} else {
			res = *g.Resource
			res.Validate(v, "spec.process_group[0].resource")
		}
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	sup := wire.Suppliers(nil, req.Hosts)
	results, err := s.b.SetProcessGroups(ctx, backend.GroupRequest{Namespace: ns, Hosts: hosts, Resource: res, Suppliers: sup})
	if err != nil && results == nil {
		return nil, backendError(CodeArgument, "set_process_group_info", err)
	}
	if err != nil {
		s.log.Warn("set_process_group_info: the agents took the group, the store did not", "namespace", ns, "err", err)
	}
	out := make(map[string]entry, len(results))
	for _, r := range results {
		out[groupKey(r.Host, sup, ns)] = entry{Code: r.Code, Message: r.Message}
	}
	return out, nil
}

// groupInfo is one entry of get_process_group_info: meta and host as the
// GSE 1.x form spells them (every field present).
type groupInfo struct {
	Meta struct {
		Namespace string            `json:"namespace"`
		Name      string            `json:"name"`
		Labels    map[string]string `json:"labels"`
	} `json:"meta"`
	Host struct {
		IP         string `json:"ip"`
		CloudID    int    `json:"bk_cloud_id"`
		SupplierID int    `json:"bk_supplier_id"`
	} `json:"host"`
	ID       string              `json:"id"`
	Resource model.GroupResource `json:"resource"`
}

// gseGetGroup serves get_process_group_info: data.process_group_infos
// [{meta, host, id, resource}] of meta.namespace on the hosts asked (every
// host when hosts is empty), by host; a host without a group has no entry.
func (s *Server) gseGetGroup(ctx context.Context, c *call) (any, *apiError) {
	v := &model.Validator{}
	req, hosts, aerr := s.groupRequest(v, c)
	if aerr != nil {
		return nil, aerr
	}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	gs, err := s.b.ProcessGroups(ctx, backend.GroupQuery{Namespace: req.Meta.Namespace, Hosts: hosts})
	if err != nil {
		return nil, backendError(CodeGSE, "get_process_group_info", err)
	}
	infos := make([]groupInfo, 0, len(gs))
	for _, g := range gs {
		gi := groupInfo{ID: g.Namespace, Resource: g.Resource}
		gi.Meta.Namespace, gi.Meta.Labels = g.Namespace, map[string]string{}
		gi.Host.IP, gi.Host.CloudID, gi.Host.SupplierID = g.Host.IP, g.Host.CloudID, g.SupplierID
		infos = append(infos, gi)
	}
	return map[string]any{"process_group_infos": infos}, nil
}

// v1SetGroups serves POST /api/v1/process_groups: a backend.GroupRequest,
// answered with one backend.GroupResult per host.
func (s *Server) v1SetGroups(ctx context.Context, c *call) (any, *apiError) {
	var req backend.GroupRequest
	if aerr := c.decode(&req); aerr != nil {
		return nil, aerr
	}
	v := &model.Validator{}
	refuseSuppliers(v, req.Suppliers)
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if !c.app.allowNamespace(req.Namespace) {
		return nil, namespaceDenied(c.app, "namespace", req.Namespace)
	}
	out, err := s.b.SetProcessGroups(ctx, req)
	if err != nil {
		return nil, backendError(CodeArgument, "set process group", err)
	}
	return out, nil
}

// v1Groups serves GET /api/v1/process_groups?namespace=&host=: the stored
// groups the app may see.
func (s *Server) v1Groups(ctx context.Context, c *call) (any, *apiError) {
	p := c.r.URL.Query()
	v := &model.Validator{}
	q := backend.GroupQuery{Namespace: p.Get("namespace"), Hosts: queryHosts(v, p["host"])}
	if err := v.Err(); err != nil {
		return nil, validationError(CodeArgument, err)
	}
	if q.Namespace != "" && !c.app.allowNamespace(q.Namespace) {
		return nil, namespaceDenied(c.app, "namespace", q.Namespace)
	}
	gs, err := s.b.ProcessGroups(ctx, q)
	if err != nil {
		return nil, backendError(CodeArgument, "process groups", err)
	}
	out := make([]model.ProcessGroup, 0, len(gs))
	for _, g := range gs {
		if c.app.allowNamespace(g.Namespace) {
			out = append(out, g)
		}
	}
	return out, nil
}
